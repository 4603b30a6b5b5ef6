"""The test-bed model: predicted images/sec of a strategy on one of this
repository's local clusters, from a profile (GPU clusters described as
hardware: hardware_model.py).

`predict(profile, target, strategy)` simulates one training step of every
worker (simulate.py) built from what the strategy's manager sends
(cost_model_strategies.py, cost_model_ps.py, cost_model_allreduce.py):
each tower's compute cut at its gradients' profiled ready times, messages
sharing the links they cross (one shared link, or a switch port per host
and direction), a per-message latency whose software part is CPU work, the
cores that colocated tasks share, and communication taking CPU from compute
(calibration: cost_model_calibration.py).

The band runs the same step with the profile's p90 compute and slower
transports (by the transport fit's residual) for its low end, p10 and
faster ones for its high end, widened by the assumed model error.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tf_cnn_benchmarks.scaling.model import (
  cost_model_calibration as calibration_lib,
)
from tf_cnn_benchmarks.scaling.model import cost_model_compression
from tf_cnn_benchmarks.scaling.model import cost_model_graph
from tf_cnn_benchmarks.scaling.model import cost_model_ps
from tf_cnn_benchmarks.scaling.model import cost_model_strategies
from tf_cnn_benchmarks.scaling.model import profile_format as fmt
from tf_cnn_benchmarks.scaling.model import simulate
from variable_mgr import allreduce_spec
from variable_mgr import catalog

# The managers the model knows, from their declared traits
# (variable_mgr/catalog.py): every one whose towers share one model
# (independent's train separate models: nothing to predict but one tower's
# rate).
LOCAL = catalog.names(in_cluster=False)
CLUSTER = catalog.names(in_cluster=True)
MODELLED = tuple(sorted(set(LOCAL) | set(CLUSTER)))
# Managers whose batch all-reduce packs (variable_mgr/batch_allreduce.py).
PACKING = tuple(n for n in MODELLED if catalog.any_of(n, catalog.packs))
# Managers that reduce with --all_reduce_spec (the rest take none).
WITH_SPEC = tuple(n for n in MODELLED if catalog.any_of(n, catalog.takes_spec))


class StrategyError(ValueError):
  """A strategy that cannot run on the target (one line, says why)."""


@dataclasses.dataclass(frozen=True)
class Strategy:
  """A --variable_update with its reduction options.

  all_reduce_spec: the spec text, or None (the manager's default).
  sync: --cross_replica_sync (False: parameter_server's async bound).
  gradient_compression, powersgd_rank: the compressor and its rank
    (cost_model_compression.py).
  """

  variable_update: str
  all_reduce_spec: Optional[str] = None
  gradient_repacking: int = 0
  sync: bool = True
  hybrid_threshold_bytes: int = 1 << 20
  agg_small_grads_max_bytes: int = 0
  agg_small_grads_max_group: int = 10
  gradient_compression: str = 'none'
  powersgd_rank: int = cost_model_compression.DEFAULT_RANK

  def label(self) -> str:
    """'replicated xring', 'parameter_server async (bound)'."""
    text = self.variable_update
    if self.all_reduce_spec:
      text += ' ' + self.all_reduce_spec
    if self.gradient_repacking:
      text += ' repack=%d' % self.gradient_repacking
    if self.agg_small_grads_max_bytes:
      text += ' agg=%d:%d' % (
        self.agg_small_grads_max_bytes,
        self.agg_small_grads_max_group,
      )
    if not self.sync:
      text += ' async (bound)'
    return text + cost_model_compression.of_strategy(self).label()


@dataclasses.dataclass(frozen=True)
class Prediction:
  """One strategy on one target."""

  strategy: Strategy
  target: object
  images_per_sec: float
  low: float
  high: float
  step_ms: float

  def as_json(self) -> dict:
    """The JSON line: names, the cluster shape, the prediction, the band."""
    t = self.target
    return {
      'variable_update': self.strategy.variable_update,
      'all_reduce_spec': self.strategy.all_reduce_spec,
      'gradient_repacking': self.strategy.gradient_repacking,
      'agg_small_grads_max_bytes': self.strategy.agg_small_grads_max_bytes,
      'agg_small_grads_max_group': self.strategy.agg_small_grads_max_group,
      'cross_replica_sync': self.strategy.sync,
      'gradient_compression': self.strategy.gradient_compression,
      'powersgd_rank': (
        self.strategy.powersgd_rank
        if cost_model_compression.of_strategy(self.strategy).two_phase
        else None
      ),
      'num_workers': t.num_workers,
      'devices_per_worker': t.devices_per_worker,
      'num_ps': t.num_ps,
      'link_mbits': t.link_mbits,
      'link_latency_us': t.link_latency_us,
      'topology': t.topology,
      'colocated': t.colocated,
      'predicted_images_per_sec': round(self.images_per_sec, 3),
      'band_low': round(self.low, 3),
      'band_high': round(self.high, 3),
      'predicted_step_ms': round(self.step_ms, 4),
    }


def check_strategy(strategy: Strategy, target, profile) -> None:
  """Raises StrategyError unless `strategy` can run on `target`."""
  name = strategy.variable_update
  cluster = target.num_workers > 1 or target.num_ps > 0
  allowed = CLUSTER if cluster else LOCAL
  if name not in allowed:
    raise StrategyError(
      '--variable_update=%s does not run on %s; one of %s'
      % (name, 'a cluster' if cluster else 'one worker', ', '.join(allowed))
    )
  if catalog.traits_of(name, cluster).needs_ps and target.num_ps < 1:
    raise StrategyError('--variable_update=%s needs --num_ps >= 1' % name)
  if strategy.all_reduce_spec and name not in WITH_SPEC:
    raise StrategyError(
      '--all_reduce_spec applies to %s only' % ', '.join(WITH_SPEC)
    )
  _check_packing(strategy)
  try:
    cost_model_compression.check(
      cost_model_compression.of_strategy(strategy),
      name,
      strategy.gradient_repacking,
      strategy.agg_small_grads_max_bytes,
    )
  except cost_model_compression.CompressionError as e:
    raise StrategyError(str(e)) from None
  if not strategy.sync and name != 'parameter_server':
    raise StrategyError('the async bound is modelled for parameter_server')
  spec = parse_spec(strategy.all_reduce_spec)
  if spec is not None:
    _check_spec(strategy, spec, profile)
    _check_nccl_in_one_worker(strategy, spec, target)


def _check_packing(strategy):
  """Packing options: the batch all-reduce's, one at a time (as the harness)."""
  repack = strategy.gradient_repacking
  agg = strategy.agg_small_grads_max_bytes
  if repack < 0 or agg < 0 or strategy.agg_small_grads_max_group < 1:
    raise StrategyError('packing options must be >= 0 (group size >= 1)')
  if (repack or agg) and strategy.variable_update not in PACKING:
    raise StrategyError(
      '--gradient_repacking / --agg_small_grads_max_bytes apply to %s only'
      % ', '.join(PACKING)
    )
  if repack and agg:
    raise StrategyError(
      'use --gradient_repacking or --agg_small_grads_max_bytes, not both'
    )


def parse_spec(text):
  """The parsed AllReduceSpec of `text` (None for None)."""
  if not text:
    return None
  return allreduce_spec.parse_all_reduce_spec(text)


def _check_spec(strategy, spec, profile):
  on_gpu = profile.host.device.lower() in ('gpu', 'cuda', 'rocm')
  if 'nccl' in spec.algorithms and not on_gpu:
    raise StrategyError(
      'all_reduce_spec=%s: nccl needs a GPU profile (this one is %s)'
      % (strategy.all_reduce_spec, profile.host.device)
    )
  if catalog.any_of(strategy.variable_update, catalog.collective_only) and (
    spec.algorithms != {'collective'} or spec.is_hybrid
  ):
    raise StrategyError(
      'collective_all_reduce takes --all_reduce_spec=collective[#N] only'
    )


def _check_nccl_in_one_worker(strategy, spec, target):
  """NCCL groups live in one process: across workers only as `nccl/b`."""
  if target.num_workers < 2:
    return
  for r in spec.ranges:
    across = r.alg.inter if r.alg.inter is not None else r.alg.intra
    if across == 'nccl':
      raise StrategyError(
        'all_reduce_spec=%s: nccl runs inside one worker; across workers '
        'use it as the intra part (nccl/xring)' % strategy.all_reduce_spec
      )


def _parameter_server_step(b, strategy, spec):
  t = b.target
  if t.num_workers == 1 and t.num_ps == 0:
    return cost_model_ps.local_parameter_server_step(b)
  return cost_model_ps.parameter_server_step(b, strategy.sync)


def _all_reduce_step(b, strategy, spec):
  """replicated, distributed_all_reduce and collective_all_reduce: the
  batch all-reduce's chunks over the spec's algorithms (a collective-only
  manager's default spec is the collective)."""
  collective = catalog.any_of(strategy.variable_update, catalog.collective_only)
  if collective:
    spec = spec or parse_spec('collective')
  return cost_model_strategies.all_reduce_step(
    b,
    spec,
    strategy.gradient_repacking,
    collective=collective,
    agg=(
      strategy.agg_small_grads_max_bytes,
      strategy.agg_small_grads_max_group,
    ),
    compression=cost_model_compression.of_strategy(strategy),
  )


# What one step of each modelled manager sends and computes: name ->
# fn(builder, strategy, parsed spec) -> {worker: its step's last job}. A new
# strategy is a function and a row here (its rules come from its traits in
# variable_mgr/catalog.py); tests check every modelled manager has a row.
STEP_JOBS = {
  'parameter_server': _parameter_server_step,
  'distributed_replicated': (
    lambda b, strategy, spec: cost_model_ps.distributed_replicated_step(b)
  ),
  'hybrid': lambda b, strategy, spec: cost_model_ps.hybrid_step(
    b, strategy.hybrid_threshold_bytes
  ),
  'replicated': _all_reduce_step,
  'distributed_all_reduce': _all_reduce_step,
  'collective_all_reduce': _all_reduce_step,
}


def _step_jobs(b, strategy, spec):
  """{worker: its step's last job} for `strategy`."""
  return STEP_JOBS[strategy.variable_update](b, strategy, spec)


def simulate_step(profile, target, strategy, cal, **scales) -> tuple:
  """(images/sec, step ms) of a step in the steady state: the second of
  three simulated steps, from each worker's end of the first to its end of
  the second; scales: see StepBuilder."""
  b = cost_model_graph.StepBuilder(profile, target, cal, **scales)
  spec = parse_spec(strategy.all_reduce_spec)
  # Each worker's step starts where its previous one ended: the period
  # between two ends is the steady state the benchmark times. A lone step
  # starts every worker together, which steps after the first do not:
  # distributed_replicated's reads at a step's end, which flows share
  # unevenly, let the first worker served compute while others still read.
  # The period is taken before the last step: the last has no next step
  # whose traffic meets its own (the first worker's next push beside the
  # others' reads), so it ends sooner than a step of a long run
  # (distributed_replicated on a shared link: 6% short;
  # lab/notes/predicting_experiments_3.md, section 20).
  steps = []
  for _ in range(3):  # the third: its traffic, not its end
    steps.append(_step_jobs(b, strategy, spec))
    b.previous_end = {w: [j] for w, j in steps[-1].items()}
  first, ends = steps[0], steps[1]
  finish = simulate.run(b.graph, b.capacities(), b.link_decay(), b.crowds)
  images = profile.run.batch_size * target.devices_per_worker
  busy = target.colocated and not b.on_gpu  # the other tasks' compute
  extra = controller_us(profile, strategy, busy, b.touches_ps)
  if strategy.sync:  # the cluster's period: its last end to its last end
    last = [max(finish[j] for j in step.values()) for step in (first, ends)]
    step_us = last[1] - last[0] + extra
    return images * len(ends) / step_us * 1e6, step_us / 1000.0
  # Each worker at its own pace: the sum of their rates (a bound).
  periods = [finish[j] - finish[first[w]] + extra for w, j in ends.items()]
  rate = sum(images / us * 1e6 for us in periods)
  return rate, max(periods) / 1000.0


def controller_us(profile, strategy, busy=False, touches_ps=False) -> float:
  """What starting another task's part of the step adds to every step (the
  profile's controller_step; 0 when not measured or for a step that starts
  none).

  A one-graph manager's controller starts each step on every worker and
  waits for all of them. A worker whose step sends to or from a ps task
  (`touches_ps`: its graph holds variables there, as parameter_server's,
  distributed_replicated's and hybrid's over its threshold) likewise starts
  the ps task's partition of each step over gRPC (RunGraph) and waits for
  it: the same round trip, which controller_step times.

  `busy`: the tasks share the host's cores with the other tasks' towers
  (colocated CPU towers): their RPCs wait for a core, the profile's
  controller_step_busy (the idle figure if the profile lacks it).
  """
  step = profile.transports.get(fmt.CONTROLLER_STEP)
  if busy:
    step = profile.transports.get(fmt.CONTROLLER_STEP_BUSY, step)
  traits = catalog.traits_of(strategy.variable_update, in_cluster=True)
  if step is None or not (traits.one_graph or touches_ps):
    return 0.0
  return step.latency_us


def transport_residual(profile) -> float:
  """Relative misfit of the linear transport fits where the table ends.

  Where a transport has a table, the fit is compared with the last measured
  row (the largest size measured below the fit's range).
  """
  worst = 0.0
  for t in profile.transports.values():
    if not t.table:
      continue
    nbytes, measured = t.table[-1]
    fitted = t.latency_us + nbytes / t.bytes_per_us
    if measured > 0:
      worst = max(worst, abs(fitted - measured) / measured)
  return min(worst, 0.5)


def predict(profile, target, strategy, cal=None) -> Prediction:
  """The prediction and its band for `strategy` on `target`."""
  cal = cal or calibration_lib.default_calibration()
  check_strategy(strategy, target, profile)
  rate, step_ms = simulate_step(profile, target, strategy, cal)
  c = profile.compute
  residual = transport_residual(profile)
  slow, _ = simulate_step(
    profile,
    target,
    strategy,
    cal,
    compute_scale=c.step_ms_p90 / c.step_ms,
    comm_scale=1 + residual,
  )
  fast, _ = simulate_step(
    profile,
    target,
    strategy,
    cal,
    compute_scale=c.step_ms_p10 / c.step_ms,
    comm_scale=1 - residual,
  )
  error = cal.value('model_error')
  low = min(slow, rate) * (1 - error)
  high = max(fast, rate) * (1 + error)
  return Prediction(strategy, target, rate, low, high, step_ms)
