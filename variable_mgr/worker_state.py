"""State a worker keeps for itself, and the chief's handles on the others'.

In a cluster whose workers build a graph each, what a worker keeps for
itself (gradient-compression error buffers, gradient-accumulation buffers,
the loss sum and micro-step count) lives only in that worker's graph, and
the chief's Saver saw the chief's only. TensorFlow identifies a resource
variable by its device and name, so a graph that declares a variable of the
same name, shape and dtype on worker W's device reads worker W's own. The
modules that make such state register each variable here with the rule for
its name in worker W's graph (`register`); the chief's graph then declares
every other worker's copy (`other_workers`) and its checkpoint holds them.
The chief neither initialises nor restores those copies: each worker does
its own, from the checkpoint every task reads on resume.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import tensorflow as tf

tf1 = tf.compat.v1

# Graph collection of PerWorker entries (Python objects: never exported).
COLLECTION = 'tf_cnn_benchmarks_per_worker_state'


@dataclasses.dataclass(frozen=True)
class PerWorker:
  """One variable of this worker's own state.

  name_of: its name in worker W's graph (W -> name); the device is the
  variable's own with worker W's task.
  """

  variable: tf.Variable
  name_of: Callable[[int], str]


def register(variable: tf.Variable, name_of: Callable[[int], str]) -> None:
  """Declares `variable` this worker's own (see the module docstring)."""
  tf1.add_to_collection(COLLECTION, PerWorker(variable, name_of))


def registered() -> list:
  """Every PerWorker of the default graph, in creation order."""
  return list(tf1.get_collection(COLLECTION))


def device_of_worker(device: str, worker: int) -> str:
  """`device` in worker `worker`'s graph: on that worker if it is on this
  one (or names no job: the session puts it on its own task), else the
  same device (a ps task's is one device for every graph)."""
  spec = tf.DeviceSpec.from_string(device or '')
  if spec.job not in (None, 'worker'):
    return spec.to_string()
  return spec.replace(job='worker', replica=0, task=worker).to_string()


def other_workers(task_index: int, num_workers: int) -> list:
  """Handles on every other worker's copy of the registered state.

  Each is a resource variable named and placed as in worker W's graph, in
  no collection: nothing here initialises, restores or trains it; a Saver
  given it reads and writes worker W's own.
  """
  out = []
  for entry in registered():
    var = entry.variable
    for worker in range(num_workers):
      if worker == task_index:
        continue
      out.append(
        _handle(
          entry.name_of(worker),
          var.shape,
          var.dtype.base_dtype,
          device_of_worker(var.device, worker),
        )
      )
  return out


def _handle(name: str, shape, dtype, device: str) -> tf.Variable:
  # Outside the caller's scopes: the name must be the other graph's exactly.
  with tf.control_dependencies(None), tf1.name_scope(None):
    with tf.device(device):
      var = tf1.Variable(
        tf.zeros(shape, dtype),
        trainable=False,
        use_resource=True,
        name=name,
        collections=[],
      )
  if var.op.name != name:  # another variable took the name first
    raise ValueError('per-worker state %s is declared twice' % name)
  return var
