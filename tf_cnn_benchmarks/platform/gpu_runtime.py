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

The flags are fields of `params.Params`, declared with the others in
config/runtime_fields.py (RuntimeSettings). `summary` gives the resulting
non-default ConfigProto fields and environment as data (the header prints
them).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, MutableMapping, Optional

from variable_mgr import collective_catalog
from variable_mgr import topology

# Classic default of per_gpu_thread_count 0: one thread for compute, one for
# memory copies.
DEFAULT_THREADS_PER_GPU = 2


# The settings that act on GPUs only: set on a CPU run, each is one warning.
# (--mkl's and --gpu_indices, which orders the logical CPU towers of the
# all-reduce spec, mean something on CPU runs too.)
GPU_ONLY_FIELDS = (
  'gpu_thread_mode',
  'per_gpu_thread_count',
  'allow_growth',
  'gpu_memory_frac_for_testing',
  'use_unified_memory',
  'force_gpu_compatible',
  'timestamped_allocator',
  'gpu_kt_max_interval',
  'gpu_kt_max_bytes',
  'gpu_kt_max_pending',
  'winograd_nonfused',
  'batchnorm_persistent',
  'sync_on_finish',
  'autotune_threshold',
)


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
  defaults = {f.name: f.default for f in dataclasses.fields(p)}
  return [
    'warning: --%s has no effect on CPU (a GPU-only setting)' % name
    for name in GPU_ONLY_FIELDS
    if getattr(p, name) != defaults[name]
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
  if collective_catalog.wants_nccl_session(p):
    fields['experimental.collective_nccl'] = True
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
