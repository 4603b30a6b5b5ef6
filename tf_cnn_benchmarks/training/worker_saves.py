"""The chief's checkpoint of every worker's own state (a graph per worker).

What a worker keeps for itself (error buffers, accumulation buffers) lives
only in its own graph; the chief's graph declares every other worker's
copy (variable_mgr/worker_state.py) and saves it. Those values must be
read while no worker writes them: a worker's writes of a step do not wait
for the chief (error feedback's buffers are written before the reduction,
and the micro-steps of the next update run on the worker alone), so a
save of them is taken at a barrier every worker meets (SaveBarrier): the
others arrive after their step, the chief saves, then lets them go on.
"""

from __future__ import annotations

import contextlib

import tensorflow as tf

from variable_mgr import base
from variable_mgr import worker_state

tf1 = tf.compat.v1

# How long a task waits at the barrier: the others' last step (they are
# in lockstep) or the chief's save; longer means a task is gone.
BARRIER_TIMEOUT_S = 600


def between_graphs(manager) -> bool:
  """Whether the run is a cluster of more than one worker graph."""
  cluster = manager.cluster
  return (
    cluster is not None
    and cluster.num_workers > 1
    and not manager.traits.one_graph
  )


def other_workers_state(manager) -> list:
  """On the chief of such a cluster, its handles on every other worker's
  own state (to save, never to initialise or restore); else []."""
  if not (between_graphs(manager) and manager.cluster.is_chief):
    return []
  return worker_state.other_workers(
    manager.cluster.task_index, manager.cluster.num_workers
  )


def save_barrier(manager) -> 'SaveBarrier | None':
  """The barrier of such a cluster's saves when a worker has state of its
  own (every worker's graph decides alike: the same flags); else None."""
  if not (between_graphs(manager) and worker_state.registered()):
    return None
  return SaveBarrier(manager.cluster)


class SaveBarrier:
  """Two queues on the chief's CPU, shared by name by every worker's graph.

  A worker other than the chief enqueues its index (arrive) and dequeues a
  release token; the chief dequeues one arrival per other worker, saves,
  and enqueues their tokens.
  """

  def __init__(self, cluster: base.ClusterDevices):
    others = cluster.num_workers - 1
    self.is_chief = cluster.is_chief
    with tf.control_dependencies(None), tf1.name_scope(None):
      with tf.device(base.cpu_of_task(cluster.worker_devices[0])):
        arrived, released = (
          tf1.FIFOQueue(
            others, [tf.int32], shapes=[[]], shared_name=name, name=name
          )
          for name in ('save_barrier_arrived', 'save_barrier_released')
        )
        if cluster.is_chief:
          self._before = arrived.dequeue_many(others)
          self._after = released.enqueue_many([tf.zeros([others], tf.int32)])
        else:
          self._before = arrived.enqueue([cluster.task_index])
          self._after = released.dequeue()

  @contextlib.contextmanager
  def around(self, sess):
    """Every worker meets before the body (the chief's save) and leaves
    after it; the chief lets the others go even if its save failed."""
    options = tf1.RunOptions(timeout_in_ms=BARRIER_TIMEOUT_S * 1000)
    sess.run(self._before, options=options)
    if self.is_chief:
      try:
        yield
      finally:
        sess.run(self._after, options=options)
    else:
      yield
      sess.run(self._after, options=options)
