"""The classic GPU (and MKL) runtime settings: session config and environment.

The classic harness tuned how TensorFlow runs on GPUs in two places, and so
does this module:

  ConfigProto fields (read when the session creates its devices):
    --allow_growth, --gpu_memory_frac_for_testing, --use_unified_memory,
    --force_gpu_compatible, --timestamped_allocator, --gpu_kt_max_*,
    --gpu_indices (collective_ring_order).
  Environment variables (read when TensorFlow creates the GPU devices or
  runs a kernel, so they are set before the first session):
    --gpu_thread_mode / --per_gpu_thread_count (TF_GPU_THREAD_MODE,
    TF_GPU_THREAD_COUNT), --winograd_nonfused, --batchnorm_persistent,
    --autotune_threshold, --sync_on_finish, and --mkl's KMP_* and
    OMP_NUM_THREADS.

On GPU runs the thread counts are sized as the classic harness sized them
(`resolved_threads`). Every name and value here is the classic one
(tensorflow/benchmarks, benchmark_cnn.py: create_config_proto and
set_default_param_values_and_env_vars).

`RuntimeSettings` holds the flags; `params.Params` inherits them, so they are
Params fields like any other. `summary` gives the resulting non-default
ConfigProto fields and environment as data (the header prints them).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, MutableMapping, Optional

from variable_mgr import topology

GPU_THREAD_MODES = ('gpu_private', 'gpu_shared', 'global')
# Classic default of per_gpu_thread_count 0: one thread for compute, one for
# memory copies.
DEFAULT_THREADS_PER_GPU = 2
CLASSIC_KMP_AFFINITY = 'granularity=fine,verbose,compact,1,0'


def _field(default: Any, help_text: str, choices: tuple = ()) -> Any:
  # The metadata params._field gives (params imports this module).
  return dataclasses.field(
    default=default, metadata={'help': help_text, 'choices': choices}
  )


@dataclasses.dataclass(frozen=True)
class RuntimeSettings:
  """The runtime flags of `params.Params` (its base class)."""

  gpu_thread_mode: str = _field(
    'gpu_private',
    'GPU host threads: gpu_private (a thread pool per GPU), gpu_shared (one '
    'pool for all GPUs), global (the shared inter-op pool); '
    'TF_GPU_THREAD_MODE.',
    GPU_THREAD_MODES,
  )
  per_gpu_thread_count: int = _field(
    0,
    'Threads per GPU with gpu_private / gpu_shared (0: 2); '
    'TF_GPU_THREAD_COUNT.',
  )
  allow_growth: Optional[bool] = _field(
    None, "GPUOptions.allow_growth (unset: TensorFlow's default, false)."
  )
  gpu_memory_frac_for_testing: float = _field(
    0.0,
    'If > 0: GPUOptions.per_process_gpu_memory_fraction (e.g. to run '
    'several tasks on one GPU).',
  )
  use_unified_memory: Optional[bool] = _field(
    None, 'GPUOptions.experimental.use_unified_memory.'
  )
  force_gpu_compatible: bool = _field(
    False, 'GPUOptions.force_gpu_compatible (pinned host tensors).'
  )
  timestamped_allocator: bool = _field(
    False, 'GPUOptions.experimental.timestamped_allocator.'
  )
  gpu_kt_max_interval: int = _field(
    0,
    'If > 0: GPU kernel tracker, max ops queued in a row without a '
    'tracking event.',
  )
  gpu_kt_max_bytes: int = _field(
    0,
    'If > 0: GPU kernel tracker, max bytes allocated by ops in a row '
    'without a tracking event.',
  )
  gpu_kt_max_pending: int = _field(
    0, 'If > 0: GPU kernel tracker, max outstanding tracking events.'
  )
  winograd_nonfused: bool = _field(
    True, 'cuDNN Winograd non-fused convolutions (TF_ENABLE_WINOGRAD_NONFUSED).'
  )
  batchnorm_persistent: bool = _field(
    True,
    'cuDNN CUDNN_BATCHNORM_SPATIAL_PERSISTENT batch norm '
    '(TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT).',
  )
  sync_on_finish: bool = _field(
    False, 'Synchronise the GPUs after each step (TF_SYNC_ON_FINISH).'
  )
  autotune_threshold: Optional[int] = _field(
    None, 'cuDNN autotune threshold (TF_AUTOTUNE_THRESHOLD).'
  )
  gpu_indices: str = _field(
    '',
    'Comma-separated order of the GPUs (0..num_gpus-1) in rings and '
    "collectives: the all-reduce spec's device order and "
    'GPUOptions.experimental.collective_ring_order.',
  )
  mkl: bool = _field(
    False,
    'Set the MKL environment: KMP_BLOCKTIME, KMP_AFFINITY, KMP_SETTINGS and '
    'OMP_NUM_THREADS (--num_intra_threads). This TensorFlow wheel ships no '
    'Intel OpenMP runtime, so only OMP_NUM_THREADS is read.',
  )
  kmp_blocktime: int = _field(0, 'KMP_BLOCKTIME with --mkl.')
  kmp_affinity: str = _field(CLASSIC_KMP_AFFINITY, 'KMP_AFFINITY with --mkl.')
  kmp_settings: int = _field(1, 'KMP_SETTINGS with --mkl.')


RUNTIME_FIELDS = {f.name: f for f in dataclasses.fields(RuntimeSettings)}
# Settings that mean something on CPU runs too (--gpu_indices orders the
# logical CPU towers of the all-reduce spec).
_CPU_FIELDS = (
  'mkl',
  'kmp_blocktime',
  'kmp_affinity',
  'kmp_settings',
  'gpu_indices',
)
GPU_ONLY_FIELDS = tuple(n for n in RUNTIME_FIELDS if n not in _CPU_FIELDS)


def check(p, error_cls) -> None:
  """Raises error_cls (one line naming the flag) for a bad runtime value."""
  for name in (
    'per_gpu_thread_count',
    'gpu_kt_max_interval',
    'gpu_kt_max_bytes',
    'gpu_kt_max_pending',
    'kmp_blocktime',
  ):
    if getattr(p, name) < 0:
      raise error_cls('--%s=%s: must be >= 0' % (name, getattr(p, name)))
  if p.per_gpu_thread_count and p.gpu_thread_mode == 'global':
    raise error_cls(
      '--per_gpu_thread_count=%d: only with --gpu_thread_mode=gpu_private '
      'or gpu_shared (global uses the inter-op threads)'
      % p.per_gpu_thread_count
    )
  if not 0 <= p.gpu_memory_frac_for_testing <= 1:
    raise error_cls(
      '--gpu_memory_frac_for_testing=%s: must be in [0, 1]'
      % p.gpu_memory_frac_for_testing
    )
  if p.autotune_threshold is not None and p.autotune_threshold < 1:
    raise error_cls(
      '--autotune_threshold=%s: must be >= 1 (or unset)' % p.autotune_threshold
    )
  if p.kmp_settings not in (0, 1):
    raise error_cls('--kmp_settings=%s: must be 0 or 1' % p.kmp_settings)
  topology.ring_order(p.gpu_indices, p.num_gpus, error_cls)


def cpu_warnings(p) -> list[str]:
  """One warning line per GPU-only setting given to a CPU run."""
  if p.device != 'cpu':
    return []
  return [
    'warning: --%s has no effect on CPU (a GPU-only setting)' % name
    for name in GPU_ONLY_FIELDS
    if getattr(p, name) != RUNTIME_FIELDS[name].default
  ]


def resolved_threads(p, device: str, cpu_count: Optional[int] = None) -> dict:
  """Thread counts a GPU run leaves unset, sized as the classic harness did.

  On GPU: one intra-op thread; inter-op threads = the CPUs left after the
  GPU threads (gpu_private / gpu_shared); the input pipeline's private pool =
  the CPUs left after the GPU threads and 2 per GPU (event polling, sends and
  receives) when it prefetches to the devices. Each at least 1.

  Returns:
    Params field -> value, for the fields to change (none on CPU).
  """
  if device != 'gpu':
    return {}
  cpus = cpu_count or os.cpu_count() or 1
  gpu_threads = (p.per_gpu_thread_count or DEFAULT_THREADS_PER_GPU) * p.num_gpus
  out = {}
  if p.num_intra_threads is None:
    out['num_intra_threads'] = 1
  if not p.num_inter_threads and p.gpu_thread_mode != 'global':
    out['num_inter_threads'] = max(cpus - gpu_threads, 1)
  if p.datasets_use_prefetch and p.datasets_num_private_threads is None:
    out['datasets_num_private_threads'] = max(
      cpus - gpu_threads - 2 * p.num_gpus, 1
    )
  return out


def config_fields(p) -> dict:
  """ConfigProto field path -> value the runtime flags set.

  Only the fields a flag sets (the classic create_config_proto rules); GPU
  fields only on GPU runs.
  """
  if p.device != 'gpu':
    return {}
  exp = 'gpu_options.experimental.'
  fields = {}
  if p.allow_growth is not None:
    fields['gpu_options.allow_growth'] = p.allow_growth
  if p.gpu_memory_frac_for_testing > 0:
    fields['gpu_options.per_process_gpu_memory_fraction'] = (
      p.gpu_memory_frac_for_testing
    )
  if p.force_gpu_compatible:
    fields['gpu_options.force_gpu_compatible'] = True
  if p.use_unified_memory:
    fields[exp + 'use_unified_memory'] = True
  if p.timestamped_allocator:
    fields[exp + 'timestamped_allocator'] = True
  for flag, field in (
    ('gpu_kt_max_interval', 'kernel_tracker_max_interval'),
    ('gpu_kt_max_bytes', 'kernel_tracker_max_bytes'),
    ('gpu_kt_max_pending', 'kernel_tracker_max_pending'),
  ):
    if getattr(p, flag) > 0:
      fields[exp + field] = getattr(p, flag)
  if p.gpu_indices:
    fields[exp + 'collective_ring_order'] = p.gpu_indices
  return fields


def set_config_fields(config, fields: Mapping[str, Any]) -> None:
  """Sets each dotted ConfigProto field path of `fields` in `config`."""
  for path, value in fields.items():
    *parents, leaf = path.split('.')
    message = config
    for name in parents:
      message = getattr(message, name)
    setattr(message, leaf, value)


def environment(p) -> dict:
  """Environment variable -> value (None: removed) the runtime flags set."""
  env = {}
  if p.mkl:
    env['KMP_BLOCKTIME'] = str(p.kmp_blocktime)
    env['KMP_SETTINGS'] = str(p.kmp_settings)
    env['KMP_AFFINITY'] = p.kmp_affinity
    env['OMP_NUM_THREADS'] = (
      str(p.num_intra_threads) if p.num_intra_threads else None
    )
  if p.device != 'gpu':
    return env
  env['TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT'] = (
    '1' if p.batchnorm_persistent else None
  )
  env['TF_ENABLE_WINOGRAD_NONFUSED'] = '1' if p.winograd_nonfused else None
  if p.autotune_threshold:
    env['TF_AUTOTUNE_THRESHOLD'] = str(p.autotune_threshold)
  env['TF_SYNC_ON_FINISH'] = str(int(p.sync_on_finish))
  env['TF_GPU_THREAD_MODE'] = p.gpu_thread_mode
  per_gpu = p.per_gpu_thread_count or DEFAULT_THREADS_PER_GPU
  if p.gpu_thread_mode == 'gpu_private':
    env['TF_GPU_THREAD_COUNT'] = str(per_gpu)
  elif p.gpu_thread_mode == 'gpu_shared':
    env['TF_GPU_THREAD_COUNT'] = str(per_gpu * p.num_gpus)
  return env


def apply_environment(
  env: Mapping[str, Optional[str]],
  environ: MutableMapping[str, str] = os.environ,
) -> None:
  """Sets (or, for None, removes) each variable of `env` in `environ`.

  TensorFlow reads these when it creates the GPU devices (the first session
  or server) and when kernels run, so this runs before either.
  """
  for name, value in env.items():
    if value is None:
      environ.pop(name, None)
    else:
      environ[name] = value


def nondefault_fields(message, prefix: str = '') -> dict:
  """Dotted path -> value of every field of a proto set to a non-default.

  Map fields give one path per key (device_count.CPU).
  """
  out = {}
  for field, value in message.ListFields():
    path = prefix + field.name
    if (
      field.message_type is not None
      and field.message_type.GetOptions().map_entry
    ):
      for key in sorted(value):
        out['%s.%s' % (path, key)] = value[key]
    elif field.message_type is not None and not _is_repeated(field):
      out.update(nondefault_fields(value, path + '.'))
    else:
      out[path] = list(value) if _is_repeated(field) else value
  return out


def _is_repeated(field) -> bool:
  # FieldDescriptor.label is deprecated in newer protobufs.
  repeated = getattr(field, 'is_repeated', None)
  if repeated is not None:
    return repeated
  return field.label == field.LABEL_REPEATED


def summary(config, env: Mapping[str, Optional[str]]) -> dict:
  """The run's runtime settings as data: non-default config, environment."""
  return {
    'session_config': nondefault_fields(config),
    'environment': dict(env),
  }


def header_rows(config, env: Mapping[str, Optional[str]]) -> list[tuple]:
  """(key, value) rows of the console header: one line each."""
  info = summary(config, env)
  rows = [
    (
      'Config',
      ', '.join('%s=%s' % kv for kv in info['session_config'].items()),
    )
  ]
  if env:
    rows.append(
      (
        'Environment',
        ', '.join(
          '%s=%s' % (k, 'unset' if v is None else v) for k, v in env.items()
        ),
      )
    )
  return rows
