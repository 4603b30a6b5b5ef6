"""What a gradient compressor changes in a predicted step (both models).

The bytes are the compressor's own (variable_mgr/compression/catalog.py:
wire_phases, the rule PowerSGD and the benchmark read too): a cast halves
each float32 gradient; PowerSGD sends P (r n floats), then, after the P's
all-reduce and their orthogonalisation, Q (r m floats) of every matrix it
compresses, and the rest whole with the P's.

The compute is measured when the profile has it (profile.compressors:
each compressor's compress + decompress work per step for the model's own
gradients on the profiled device, profile/profile_compression.py): the
step's figure is spread over the gradients in proportion to the catalog's
elements of each (below). A profile without it (an older one, a paper
one), or PowerSGD at another rank than measured, falls back to the
assumption, and source() says which.

The assumption: the catalog's Work timed at the profile's own streaming
rate. The worker's optimizer apply (profile.apply.worker.ms_per_mb:
measured on a CPU host, the stated memory-bound assumption of a paper GPU
profile) reads and writes its bytes like an elementwise op, so each pass
over a float32 tensor costs what the apply costs per MB. PowerSGD's
matmuls with a thin rank-r factor (2 r flops per element read, far under
a CPU's or a GPU's flops per byte of memory) are counted the same way:
one pass over the n x m matrix each (catalog.Work.matmul_elements).
Against a throttled cluster (docs/all-reduce.md) it held for the casts and
over-priced PowerSGD several times over: its many small ops are not
streaming passes.

Either way, half the work comes before the reduction (compressing), half
after (decompressing); PowerSGD's orthogonalisation and Q = M^T P^ sit
between its two phases.
"""

from __future__ import annotations

import dataclasses

from variable_mgr.compression import catalog

NONE = 'none'
DEFAULT_RANK = catalog.DEFAULT_POWERSGD_RANK
# How the work splits around the reduction(s): before the first, between
# PowerSGD's two, after the last.
_BEFORE, _BETWEEN, _AFTER = 0.5, 0.0, 0.5
_BEFORE_2, _BETWEEN_2, _AFTER_2 = 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0


class CompressionError(ValueError):
  """A compressor the model cannot price for this strategy (one line)."""


@dataclasses.dataclass(frozen=True)
class Compression:
  """A --gradient_compression with its --powersgd_rank."""

  name: str = NONE
  rank: int = DEFAULT_RANK

  @property
  def compresses(self) -> bool:
    """Whether the gradients travel other than as they are."""
    return self.name != NONE

  @property
  def two_phase(self) -> bool:
    """PowerSGD's P, then Q."""
    return catalog.declared(self.name).two_phase

  def phases(self, gradient) -> tuple:
    """The bytes of each of the gradient's dependent reductions."""
    return catalog.wire_phases(
      self.name, gradient.shape, gradient.dtype, self.rank
    )

  def wire_bytes(self, gradients) -> int:
    """Bytes one replica hands the all-reduce per step."""
    return catalog.wire_bytes(
      self.name, [(g.shape, g.dtype) for g in gradients], self.rank
    )

  def elements(self, gradient) -> int:
    """The float32 elements the catalog's Work of the gradient streams."""
    w = catalog.work(self.name, [(gradient.shape, gradient.dtype)], self.rank)
    return w.elementwise + w.matmul_elements

  def work_ms(self, gradient, ms_per_mb: float) -> float:
    """The gradient's compression compute (every part), in ms, assumed:
    its elements streamed at `ms_per_mb`."""
    return self.elements(gradient) * 4 / 1e6 * ms_per_mb

  def measured(self, profile):
    """The profile's fmt.CompressorCost of this compressor, or None (not
    measured, or PowerSGD measured at another rank)."""
    costs = getattr(profile, 'compressors', None)
    if costs is None or self.name not in costs.per_step:
      return None
    if self.two_phase and costs.rank != self.rank:
      return None
    return costs.per_step[self.name]

  def gradient_ms(self, profile) -> list:
    """Each gradient's compression compute (ms), in profile order: the
    measured step's figure spread by the gradients' elements, else the
    assumption (work_ms at the worker's apply rate)."""
    grads = profile.gradients
    cost = self.measured(profile)
    if cost is None:
      rate = profile.apply.worker.ms_per_mb
      return [self.work_ms(g, rate) for g in grads]
    weights = [self.elements(g) for g in grads]
    total = sum(weights)
    if total <= 0:  # work the catalog does not see: spread evenly
      return [cost.ms / len(grads)] * len(grads)
    return [cost.ms * w / total for w in weights]

  def source(self, profile) -> str:
    """Where this compressor's compute figure comes from, in words."""
    cost = self.measured(profile)
    if cost is not None:
      return (
        '%s compute: measured on the profiled host, %.3f ms a step '
        '(p10 %.3f, p90 %.3f), spread over the gradients by their elements'
        % (self.name, cost.ms, cost.ms_p10, cost.ms_p90)
      )
    costs = getattr(profile, 'compressors', None)
    if costs is None:
      why = 'the profile has no compressor measurement'
    elif self.name in costs.per_step:
      why = 'measured at rank %d, not %d' % (costs.rank, self.rank)
    else:
      why = 'the profile did not measure it'
    total = sum(self.gradient_ms(profile))
    return (
      "%s compute: assumed (%s): the catalog's passes at the apply rate "
      '%.3f ms/MB, %.3f ms a step'
      % (self.name, why, profile.apply.worker.ms_per_mb, total)
    )

  def split(self) -> tuple:
    """(before, between, after): the work's shares around the reductions."""
    if self.two_phase:
      return _BEFORE_2, _BETWEEN_2, _AFTER_2
    return _BEFORE, _BETWEEN, _AFTER

  def label(self) -> str:
    """'' for none; ' +fp16', ' +powersgd4'."""
    if not self.compresses:
      return ''
    return ' +%s%s' % (self.name, self.rank if self.two_phase else '')


def measured_names(items) -> tuple:
  """The compressors a --compressors list asks to measure: 'all' (every
  one but none), 'none' or nothing (()), or names of the catalog;
  ValueError (one line) for another name."""
  items = [t.strip() for t in items if t.strip()]
  every = tuple(n for n in catalog.NAMES if n != NONE)
  if items == ['all']:
    return every
  if items in ([], [NONE]):
    return ()
  unknown = [t for t in items if t not in every]
  if unknown:
    raise ValueError(
      '--compressors=%s: all, none, or names of %s'
      % (','.join(items), ', '.join(every))
    )
  return tuple(dict.fromkeys(items))


def of_strategy(strategy) -> Compression:
  """The Compression a cost_model.Strategy names."""
  return Compression(strategy.gradient_compression, strategy.powersgd_rank)


def check(compression: Compression, variable_update: str, repacking, agg):
  """CompressionError unless the model prices this compressor here: the
  managers that all-reduce every gradient, one gradient per reduction."""
  if compression.name not in catalog.COMPRESSORS:
    raise CompressionError(
      '--gradient_compression=%s: one of %s'
      % (compression.name, ', '.join(catalog.NAMES))
    )
  if compression.rank < 1:
    raise CompressionError('--powersgd_rank must be >= 1')
  if not compression.compresses:
    return
  if variable_update not in ALL_REDUCE_MANAGERS:
    raise CompressionError(
      '--gradient_compression=%s is modelled for %s'
      % (compression.name, ', '.join(ALL_REDUCE_MANAGERS))
    )
  if repacking or agg:
    raise CompressionError(
      '--gradient_compression is modelled without --gradient_repacking / '
      '--agg_small_grads_max_bytes'
    )


# The managers whose step the compressor changes in both models.
ALL_REDUCE_MANAGERS = (
  'replicated',
  'distributed_all_reduce',
  'collective_all_reduce',
)


# ---- the simulation (cost_model_strategies.all_reduce_step) ----------------


def reduce_all(b, order, ready, extra_deps, compression, reduce_unit) -> dict:
  """{place: [jobs]} of every gradient's compressed reductions.

  b: the StepBuilder; order: the tower places; ready[p][i]: gradient i's
  ready job on place p; extra_deps: jobs every reduction also waits for;
  reduce_unit(nbytes, deps, k) -> one job per place (the spec's
  all-reduce). Compress work runs on each tower before the first phase,
  PowerSGD's middle work between its phases, decompress work after.
  """
  before, between, after = compression.split()
  done = {p: [] for p in order}
  k = 0
  work = compression.gradient_ms(b.profile)
  for i, g in enumerate(b.profile.gradients):
    us = work[i] * 1000.0
    deps = {p: [ready[p][i]] + list(extra_deps) for p in order}
    phases = [x for x in compression.phases(g) if x > 0]
    shares = [before] + [between] * (len(phases) - 1)
    for nbytes, share in zip(phases, shares):
      jobs = _on_each(b, order, us * share, deps, 'compress')
      reduced = reduce_unit(nbytes, [j for p in order for j in jobs[p]], k)
      k += 1
      deps = {p: [j] for p, j in zip(order, reduced)}
    ends = _on_each(b, order, us * after, deps, 'decompress')
    for p in order:
      done[p].extend(ends[p])
  return done


def _on_each(b, order, us, deps, name) -> dict:
  """{place: [its job]}: `us` of work on each place after its deps (no job
  when there is no work)."""
  if us <= 0:
    return {p: list(deps[p]) for p in order}
  return {p: [b.work([p], us, deps[p], name)] for p in order}


# ---- the closed form (hardware_model._overlapped) ---------------------------


def messages(compression, profile, k: float) -> tuple:
  """([(ready ms, bytes)], work ms): the compressed messages of one GPU's
  step (ready times stretched by k and pushed back by the compression work
  queued before them on the GPU), and the whole step's compression work.

  A PowerSGD Q is ready when its P is: the bottleneck's queue sends it
  after the P, as its reduction must wait for the P's.
  """
  before, between, _ = compression.split()
  msgs, queued, total = [], 0.0, 0.0
  for g, work in zip(profile.gradients, compression.gradient_ms(profile)):
    total += work
    queued += work * (before + between)
    for nbytes in compression.phases(g):
      if nbytes > 0:
        msgs.append((g.ready_ms * k + queued, float(nbytes)))
  return msgs, total
