"""Ranges of numeric flags, and whether a run's memory can fit at all.

Checked once, when the flags are resolved (resolve.resolve), so a value that
would crash TensorFlow later (a SIGSEGV, std::bad_alloc, an int32 overflow,
towers built until the process is killed) or train nonsense silently is one
line naming the flag instead.

The memory estimate is a lower bound, so it refuses only runs that cannot
fit: every tower holds its batch of float32 images at least twice (the
synthetic batch's variable and the value that initialises it; for real data,
the input pipeline's batch and the tower's copy). Activations and variables
come on top and are not counted.
"""

from __future__ import annotations

import math
import os
import re

from tf_cnn_benchmarks.cluster import spec as cluster_spec
from tf_cnn_benchmarks.config import datasets
from tf_cnn_benchmarks.config import params_value
from tf_cnn_benchmarks.platform import peak

# TensorFlow indexes a batch with int32; seeds are int64.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
# Towers of one process: far beyond any machine, short of building until
# the process is killed.
MAX_TOWERS = 1024
# Copies of a tower's input batch that exist at once (see the docstring).
INPUT_COPIES = 2


class BatchTooLargeError(params_value.ParamsError):
  """The run ran out of memory: one line naming --batch_size (exit 2)."""


# TensorFlow's out-of-memory message names what it failed to allocate:
# "OOM when allocating tensor with shape[64,224,224,3] and type float on
# /job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu".
_OOM_TENSOR = re.compile(r'shape\[([\d, ]*)\] and type (\w+) on (\S+)')
_DTYPE_BYTES = {
  'bool': 1,
  'int8': 1,
  'uint8': 1,
  'half': 2,
  'bfloat16': 2,
  'int16': 2,
  'float': 4,
  'int32': 4,
  'uint32': 4,
  'double': 8,
  'int64': 8,
  'uint64': 8,
}


def check(p, data_name, model, cluster, error) -> None:
  """Raises `error` (an exception class) with one line for a bad value.

  p: the Params; data_name: the dataset (resolved); model: the model it
  names; cluster: the Cluster or None.
  """
  for message in _problems(p, data_name, model, cluster):
    raise error(message)


def _problems(p, data_name, model, cluster):
  """Yields a message per bad value (the caller raises the first)."""
  yield from _sizes(p)
  yield from _optimizer_values(p)
  yield from _other_values(p, cluster)
  needed, total = input_bytes(p, data_name, model), memory_bytes()
  if total and p.device != 'gpu' and needed > total:
    yield (
      '--batch_size=%d x %d tower(s): needs at least %.1f GiB for the '
      'input batches alone; this machine has %.1f GiB (memory + swap)'
      % (p.batch_size, p.num_gpus, needed / 2**30, total / 2**30)
    )


def _sizes(p):
  if not 1 <= p.num_gpus <= MAX_TOWERS:
    yield '--num_gpus=%d: must be in 1..%d' % (p.num_gpus, MAX_TOWERS)
  if p.batch_size * max(p.num_gpus, 1) > INT32_MAX:
    yield '--batch_size=%d: batch_size x num_gpus must be <= %d' % (
      p.batch_size,
      INT32_MAX,
    )
  if not 0 <= p.tf_random_seed <= INT64_MAX:
    yield '--tf_random_seed=%d: must be in 0..2**63-1' % p.tf_random_seed
  if p.num_epochs is not None and not math.isfinite(p.num_epochs):
    yield '--num_epochs=%s: must be a finite number > 0' % p.num_epochs
  for name in ('num_batches', 'num_warmup_batches'):
    value = getattr(p, name)
    if isinstance(value, int) and value > INT64_MAX:
      yield '--%s=%d: must be <= 2**63-1' % (name, value)


def _in(name, value, low, high, low_open=False, high_open=False):
  """A message unless low <(=) value <(=) high (finite)."""
  ok = (
    value is not None
    and math.isfinite(value)
    and (value > low if low_open else value >= low)
    and (value < high if high_open else value <= high)
  )
  if ok:
    return None
  return '--%s=%s: must be in %s%s, %s%s' % (
    name,
    value,
    '(' if low_open else '[',
    low,
    high,
    ')' if high_open else ']',
  )


def _optimizer_values(p):
  inf = math.inf
  checks = [
    ('momentum', 0, inf, False, True),
    ('rmsprop_decay', 0, 1, False, False),
    ('rmsprop_momentum', 0, inf, False, True),
    ('rmsprop_epsilon', 0, inf, True, True),
    ('adam_beta1', 0, 1, False, True),
    ('adam_beta2', 0, 1, False, True),
    ('adam_epsilon', 0, inf, True, True),
    # 0 means "no decay" for these three (the classic default).
    ('learning_rate_decay_factor', 0, inf, False, True),
    ('num_epochs_per_decay', 0, inf, False, True),
    ('minimum_learning_rate', 0, inf, False, True),
    ('num_learning_rate_warmup_epochs', 0, inf, False, True),
  ]
  for name, low, high, low_open, high_open in checks:
    if hasattr(p, name):
      message = _in(name, getattr(p, name), low, high, low_open, high_open)
      if message:
        yield message
  try:
    peak.parse_flag(p.peak_tflops_per_device)
  except ValueError as e:
    yield str(e)
  for name in (
    'init_learning_rate',
    'fp16_loss_scale',
    'resnet_base_lr',
  ):
    value = getattr(p, name, None)
    if value is not None:
      message = _in(name, value, 0, math.inf, True, True)
      if message:
        yield message


def _other_values(p, cluster):
  for name in (
    'num_intra_threads',
    'num_inter_threads',
    'hybrid_threshold_bytes',
    'ps_partition_threshold_bytes',
  ):
    value = getattr(p, name, None)
    if value is not None and value < 0:
      yield '--%s=%d: must be >= 0' % (name, value)
  if p.display_perf_ewma is not None:
    message = _in('display_perf_ewma', p.display_perf_ewma, 0, 1, True)
    if message:
      yield message
  if p.server_protocol not in cluster_spec.PROTOCOLS:
    yield '--server_protocol=%s: must be one of %s' % (
      p.server_protocol,
      ', '.join(cluster_spec.PROTOCOLS),
    )
  if cluster is None and p.task_index not in (None, 0):
    yield '--task_index=%d: only in a cluster (with --job_name)' % p.task_index
  for name in ('result_file', 'trace_file', 'graph_file', 'train_dir'):
    if getattr(p, name) == '':
      yield '--%s=: empty; give a path or leave the flag out' % name


def input_bytes(p, data_name, model) -> int:
  """Lower bound of the bytes the towers' input batches take."""
  depth = datasets.get(data_name).depth
  batch = p.batch_size or model.default_batch_size
  image = model.image_size * model.image_size * depth * 4 + 4  # + label
  return INPUT_COPIES * batch * p.num_gpus * image


def memory_bytes() -> int:
  """Memory plus swap of this machine (0 if unknown)."""
  try:
    with open('/proc/meminfo') as f:
      fields = dict(line.split(':', 1) for line in f)
    return sum(
      int(fields[k].split()[0]) * 1024 for k in ('MemTotal', 'SwapTotal')
    )
  except (OSError, KeyError, ValueError):
    return 0 if not hasattr(os, 'sysconf') else _sysconf_bytes()


def _sysconf_bytes() -> int:
  try:
    return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
  except (ValueError, OSError):
    return 0


def out_of_memory_message(p, data_name, model, tf_message: str) -> str:
  """One line for an out-of-memory failure of a run of Params p.

  Names --batch_size, what TensorFlow failed to allocate (from its
  message, when it says) and the input-batch lower bound of this module.
  """
  needed = input_bytes(p, data_name, model)
  total = memory_bytes()
  failed = ''
  match = _OOM_TENSOR.search(tf_message or '')
  if match:
    dims = [int(d) for d in match.group(1).split(',') if d.strip()]
    size = _DTYPE_BYTES.get(match.group(2))
    if size is not None:
      size *= math.prod(dims)
    failed = ' allocating %s tensor [%s] on %s' % (
      '%s (%s)' % (_gib(size), match.group(2)) if size else match.group(2),
      ','.join(map(str, dims)),
      match.group(3).rsplit('/', 1)[-1],
    )
  return (
    '--batch_size=%d x %d tower(s): out of memory%s; the input batches '
    'alone need at least %s, activations and variables more%s; give a '
    'smaller --batch_size'
    % (
      p.batch_size,
      p.num_gpus,
      failed,
      _gib(needed),
      '; this machine has %s (memory + swap)' % _gib(total) if total else '',
    )
  )


def _gib(size: int) -> str:
  """A byte count for a message: GiB, or MiB under one GiB."""
  if size >= 2**30:
    return '%.1f GiB' % (size / 2**30)
  return '%.1f MiB' % (size / 2**20)
