"""Local devices and the session configuration that creates them."""

from __future__ import annotations

from typing import Any, Mapping

import tensorflow as tf

tf1 = tf.compat.v1


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
