"""measure_profile: the whole profile of this host for one model and batch.

    profile = measure_profile(model='resnet20', data_name='cifar10',
                              batch_size=32, device='cpu')
    profile_format.save_profile(profile, 'resnet20.json')

Parts: one tower's compute (profile_compute.py), the all-reduce chunk lists
(profile_chunks.py), the transports and the ps-side apply
(transport.py), and, when asked, the gradient compressors' compute
(profile_compression.py). See lab/notes/predicting_profile.md.
"""

from __future__ import annotations

import dataclasses
import datetime
import os

import tensorflow as tf

from tf_cnn_benchmarks.cluster import thread_pools
from tf_cnn_benchmarks.platform import cpu_features
from tf_cnn_benchmarks.reporting import environment
from tf_cnn_benchmarks.scaling.model import profile_format as fmt
from tf_cnn_benchmarks.scaling.profile import profile_chunks
from tf_cnn_benchmarks.scaling.profile import profile_compression
from tf_cnn_benchmarks.scaling.profile import profile_compute
from tf_cnn_benchmarks.scaling.profile import profile_concurrent
from tf_cnn_benchmarks.scaling.profile import profile_graph
from tf_cnn_benchmarks.scaling.profile import profile_stats as stats
from tf_cnn_benchmarks.scaling.profile import transport
from tf_cnn_benchmarks.scaling.profile import transport_bench
from tf_cnn_benchmarks.training import optimizers

# What every profile says of its figures; machine_note() adds the CPU and
# the load average at start (other processes on the cores show there).
SPREAD_NOTE = (
  'compute keeps the p10/p90 spread of its timed steps, transports the '
  'p10/p90 of each size'
)


def measure_profile(
  model: str | None = None,
  data_name: str | None = None,
  batch_size: int | None = None,
  device: str = 'cpu',
  *,
  num_steps: int = 40,
  num_traced: int = 5,
  transport_sizes=transport_bench.DEFAULT_SIZES,
  specs=None,
  notes: str = SPREAD_NOTE,
  timeout: float = 900.0,
  concurrent_copies=profile_concurrent.DEFAULT_COPIES,
  compressors=(),
  **flags,
) -> fmt.Profile:
  """Measures this host's profile of `model` (see the module docstring).

  Args:
    model, data_name, batch_size, device: the benchmark's flags of the same
      names (None: the benchmark's default).
    num_steps, num_traced: timed steps (after 5 warm-up), then traced ones.
    transport_sizes: transport message sizes (empty: none; ps apply = worker's).
    specs: --all_reduce_spec strings for the chunk lists (default: all).
    notes, timeout: the note; seconds a transport task or copy may take.
    concurrent_copies: the k of compute.concurrent_speedup (CPU; empty: none).
    compressors: the compressors whose compute to measure (empty: none).
    **flags: further benchmark flags (data_format, use_fp16, ...), checked.

  Raises:
    tf_cnn_benchmarks.config.params.ParamsError: a bad flag (one line).
    transport.TransportProfileError: the transport tasks failed.
    profile_concurrent.ConcurrentProfileError: a concurrent copy failed.
  """
  given = dict(model=model, data_name=data_name, batch_size=batch_size)
  overrides = {k: v for k, v in given.items() if v is not None}
  plan = profile_graph.profile_plan(device=device, **overrides, **flags)
  compute = profile_compute.measure_compute(plan, num_steps, num_traced)
  gradients = compute.gradients
  copies = (plan.params.device, concurrent_copies, num_steps, timeout)
  tower = _towers_at_once(compute.compute, dict(overrides, **flags), *copies)
  chunks, algorithms = profile_chunks.measure_chunks(
    [(g.shape, g.dtype) for g in gradients], specs=specs
  )
  transports, ps_apply, how = _transports(
    plan, compute, transport_sizes, timeout
  )
  return fmt.Profile(
    created=_now(),
    host=_host(plan.params.device),
    run=compute.run,
    compute=tower,
    gradients=gradients,
    apply=fmt.Apply(compute.apply_worker, ps_apply, measured=how),
    chunks=chunks,
    transports=transports,
    notes='; '.join(n for n in (notes, machine_note()) if n),
    chunk_algorithms=algorithms,
    compressors=_compressors(plan, gradients, compressors),
  )


def _now() -> str:
  now = datetime.datetime.now(datetime.timezone.utc)
  return now.strftime('%Y-%m-%dT%H:%M:%SZ')


def _compressors(plan, gradients, names):
  """The compressors' compute (fmt.CompressorCosts), None for no names."""
  return profile_compression.measure_compressors(
    gradients,
    names,
    device=plan.params.device,
    rank=plan.params.powersgd_rank,
    config=profile_graph.session_config(plan),
  )


def _towers_at_once(tower, flags, device, copies, num_steps, timeout):
  """`tower` (fmt.Compute) with its concurrent_speedup measured (CPU)."""
  if device != 'cpu' or not copies:
    return tower
  speedups = profile_concurrent.measure_speedups(
    flags,
    cores=thread_pools.available_cores(),
    copies=copies,
    num_steps=max(10, num_steps // 2),  # in 3 rounds (profile_concurrent)
    timeout=timeout,
  )
  return dataclasses.replace(tower, concurrent_speedup=speedups)


def _transports(plan, compute, sizes, timeout) -> tuple:
  """(transports, the ps ApplyCost, how apply was measured)."""
  if not sizes:
    return {}, compute.apply_worker, _SAME_APPLY
  measured = transport.measure_transports(
    sizes,
    apply_shapes=[g.shape for g in compute.gradients],
    optimizer_config=optimizers.OptimizerConfig.from_params(plan.params),
    timeout=timeout,
  )
  return (
    measured.transports,
    _ps_apply(measured.ps_apply_samples),
    _PS_APPLY,
  )


_SAME_APPLY = (
  'worker: apply ops of the profiled step trace; ps: not measured '
  '(no transport run), the worker figure'
)
_PS_APPLY = (
  'worker: apply ops of the profiled step trace; ps: the same optimizer '
  'applying every model variable on a ps task (separate process, gRPC '
  'session), its traced apply ops'
)


def _ps_apply(samples) -> fmt.ApplyCost:
  if not samples:
    raise transport.TransportProfileError(
      'transport profile: the ps task traced no optimizer-apply op'
    )
  intercept, slope = stats.fit_line(
    [b / 1e6 for b, _ in samples], [ms for _, ms in samples]
  )
  return fmt.ApplyCost(intercept, slope)


def machine_note() -> str:
  """The CPU (model, family/model numbers, a VM?) and the load at start."""
  fields = {}
  for line in (cpu_features.read_cpuinfo() or '').splitlines():
    key, _, value = line.partition(':')
    fields.setdefault(key.strip(), value.strip())
  cpu = cpu_features.cpu_model() or 'unknown CPU'
  if 'cpu family' in fields:
    cpu += ' (family %s model %s)' % (fields['cpu family'], fields.get('model'))
  if 'hypervisor' in fields.get('flags', '').split():
    cpu += ', virtual machine'
  try:
    load = 'load average %.1f at start' % os.getloadavg()[0]
  except OSError:
    load = 'load average unknown'
  return 'cpu: %s, %d logical cores; %s' % (cpu, os.cpu_count() or 1, load)


def _host(device: str) -> fmt.Host:
  """This host's description (CPU model and cores; the GPU's name)."""
  cpu_model = cpu_features.cpu_model() or 'unknown'
  name = cpu_model
  if device == 'gpu':
    name = environment.gpus(tf, {}).get('gpu_model') or 'unknown GPU'
  try:
    cores = len(os.sched_getaffinity(0))
  except (AttributeError, OSError):
    cores = os.cpu_count() or 1
  return fmt.Host(
    cpu_model=cpu_model,
    cpu_cores=max(1, cores),
    tf_version=tf.__version__,
    device=device,
    device_name=name,
    num_devices_profiled=1,
  )


def summary_lines(profile: fmt.Profile) -> list:
  """A short human summary of `profile` (what profile_host.py prints)."""
  c, run = profile.compute, profile.run
  grads = profile.gradients
  lines = [
    'host: %s, %d cores, TF %s; profiled on %s (%s)'
    % (
      profile.host.cpu_model,
      profile.host.cpu_cores,
      profile.host.tf_version,
      profile.host.device,
      profile.host.device_name,
    ),
    'run: %s %s batch %d %s %s, %d timed steps'
    % (
      run.model,
      run.data_name,
      run.batch_size,
      run.data_format,
      run.optimizer,
      run.num_steps,
    ),
    'step: %.2f ms (p10 %.2f, p90 %.2f); forward %.2f ms, backward %.2f '
    'ms; cores busy %.2f'
    % (
      c.step_ms,
      c.step_ms_p10,
      c.step_ms_p90,
      c.forward_ms,
      c.backward_ms,
      c.cores_busy,
    ),
    'gradients: %d tensors, %.3f MB; ready from %.2f to %.2f ms'
    % (
      len(grads),
      profile.total_gradient_bytes / 1e6,
      min(g.ready_ms for g in grads),
      max(g.ready_ms for g in grads),
    ),
  ]
  if c.concurrent_speedup:
    lines.append(
      'towers at once on this host: %s (images/sec against one alone)'
      % ', '.join('%d: %.2fx' % row for row in c.concurrent_speedup)
    )
  for where in ('worker', 'ps'):
    cost = getattr(profile.apply, where)
    lines.append(
      'apply (%s): %.4f ms + %.4f ms/MB per variable'
      % (where, cost.fixed_ms, cost.ms_per_mb)
    )
  lines.append(_chunk_line(profile))
  lines.extend(_transport_lines(profile))
  lines.append(profile_compression.summary_line(profile.compressors))
  return lines


def _transport_lines(profile: fmt.Profile) -> list:
  lines = []
  for name, t in profile.transports.items():
    if name in (fmt.CONTROLLER_STEP, fmt.CONTROLLER_STEP_BUSY):
      busy = ', every core busy' if name == fmt.CONTROLLER_STEP_BUSY else ''
      lines.append('controller step%s: %.1f us' % (busy, t.latency_us))
      continue
    lines.append(
      'transport %s: %.1f us + bytes / %.1f bytes/us (fit from %d B); '
      'table: %s'
      % (
        name,
        t.latency_us,
        t.bytes_per_us,
        t.fit_from_bytes,
        ', '.join('%d B %.1f us' % row for row in t.table),
      )
    )
  return lines


def _chunk_line(profile: fmt.Profile) -> str:
  packings = [k for k in profile.chunks if not k.startswith('spec=')]
  return 'chunks: %s; %d spec lists' % (
    ', '.join('%s: %d' % (k, len(profile.chunks[k])) for k in packings),
    len(profile.chunks) - len(packings),
  )
