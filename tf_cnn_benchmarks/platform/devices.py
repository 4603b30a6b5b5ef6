"""Local devices and the session configuration that creates them."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Mapping

import tensorflow as tf

from tf_cnn_benchmarks.platform import quiet

tf1 = tf.compat.v1

# The child that asks TensorFlow again, verbosely, why it sees no GPU: its
# C++ log level lets info and warning lines through (this process's level,
# 2 by default, is fixed once TensorFlow has logged), and the two modules
# whose verbose lines name the library that failed to load and the state of
# the driver ("Could not load dynamic library 'libcuda.so.1'; dlerror: ...",
# "kernel driver does not appear to be running on this host").
_PROBE_PROGRAM = (
  "import tensorflow as tf; tf.config.list_physical_devices('GPU')"
)
_PROBE_ENV = {
  'TF_CPP_MIN_LOG_LEVEL': '0',
  'TF_CPP_VMODULE': 'dso_loader=1,cuda_diagnostics=1',
}
_PROBE_TIMEOUT_S = 300


def tower_devices(device_kind: str, num_towers: int) -> tuple[str, ...]:
  """Device strings of the towers: /cpu:0..N-1 (logical CPUs) or /gpu:0..N-1."""
  return tuple('/%s:%d' % (device_kind, i) for i in range(num_towers))


def logical_cpu_count(device_kind: str, num_towers: int) -> int:
  """CPU devices a process creates: one per tower on cpu, else the one host CPU.

  The one rule for every session and server config of the project.
  """
  return num_towers if device_kind == 'cpu' else 1


def devices_sharing_compute(
  device_kind: str, num_towers: int, workers_on_host: int = 1
) -> int:
  """Tower devices that share one physical device's compute.

  On a CPU every logical tower device of every worker process on the host
  shares the same cores; a GPU is its own.
  """
  if device_kind != 'cpu':
    return 1
  return logical_cpu_count(device_kind, num_towers) * max(1, workers_on_host)


def session_config(
  device_kind: str,
  num_towers: int,
  *,
  num_intra_threads: int | None = None,
  num_inter_threads: int = 0,
  runtime_fields: Mapping[str, Any] | None = None,
) -> tf1.ConfigProto:
  """Session config; on CPU it asks for one logical CPU device per tower.

  The logical CPU devices share the process's thread pools, so N CPU towers
  measure the cost of the strategy's extra work and communication, not N
  times the compute. runtime_fields: dotted ConfigProto field -> value (the
  GPU options of gpu_runtime.config_fields), set last.
  """
  config = tf1.ConfigProto(
    device_count={'CPU': logical_cpu_count(device_kind, num_towers)},
    allow_soft_placement=False,
  )
  if num_intra_threads is not None:
    config.intra_op_parallelism_threads = num_intra_threads
  config.inter_op_parallelism_threads = num_inter_threads
  for path, value in (runtime_fields or {}).items():
    *parents, leaf = path.split('.')
    message = config
    for name in parents:
      message = getattr(message, name)
    setattr(message, leaf, value)
  return config


def gpu_visible() -> bool:
  """Whether TensorFlow sees a GPU in this process."""
  return bool(tf.config.list_physical_devices('GPU'))


def why_no_gpu(startup_log: str | None = None, *, probe: bool = True) -> list:
  """TensorFlow's own lines saying why it sees no GPU (see
  quiet.gpu_reason_lines), for a run that asked for one.

  startup_log: what TensorFlow printed as this process loaded it (default:
  quiet.startup_log()). probe: also ask a child Python, with TensorFlow's
  verbose lines on (which this process has off), and put its lines first;
  it takes as long as loading TensorFlow, once, on this failure path. When
  neither names a reason and the build has no CUDA, one line saying so.
  """
  if startup_log is None:
    startup_log = quiet.startup_log()
  lines = quiet.gpu_reason_lines(
    (_probe_log() if probe else '') + '\n' + startup_log
  )
  if not lines and not tf.test.is_built_with_cuda():
    lines.append(
      'this TensorFlow build has no CUDA support (TensorFlow %s): on Linux, '
      'install tensorflow[and-cuda] (docs/gpu.md)' % tf.__version__
    )
  return lines


def _probe_log() -> str:
  """What a child TensorFlow prints, verbosely, while looking for GPUs."""
  try:
    child = subprocess.run(
      [sys.executable, '-c', _PROBE_PROGRAM],
      env=dict(os.environ, **_PROBE_ENV),
      stdin=subprocess.DEVNULL,
      stdout=subprocess.DEVNULL,
      stderr=subprocess.PIPE,
      timeout=_PROBE_TIMEOUT_S,
      check=False,
    )
  except (OSError, subprocess.SubprocessError):
    return ''  # this process's own start-up lines still say something
  return child.stderr[-2 * quiet.KEPT_CAPTURE_BYTES :].decode(
    'utf-8', 'replace'
  )
