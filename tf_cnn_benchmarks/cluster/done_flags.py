"""Done flags: how clients say they finished, and how a loss is recorded.

Some tasks are *flag keepers*: each keeps a vector of flags, one per client
(a task that runs steps). A client sets its flag on every keeper when it has
finished; a keeper that only serves exits once every flag is set. A keeper
that lost a client marks it LOST, so that the other clients can name it.
"""

from __future__ import annotations

import time
from typing import Optional, Sequence

import tensorflow as tf

from tf_cnn_benchmarks.cluster import spec as spec_lib

tf1 = tf.compat.v1

# Values of a done flag.
DONE, LOST = 1, 2
# How long a finishing task waits for the keepers' flags to exist.
FLAG_WAIT_S = 30.0


def _flags_variable(keeper_job: str, keeper_index: int, num_clients: int):
  """The done flags that (keeper_job, keeper_index) keeps; one per client."""
  with tf.device(
    spec_lib.task_device(keeper_job, keeper_index) + '/device:CPU:0'
  ):
    return tf1.Variable(
      tf.zeros([num_clients], tf.int32),
      trainable=False,
      collections=[],
      use_resource=True,
      name='cluster_done_%s_%d' % (keeper_job, keeper_index),
    )


class DoneFlags:
  """Graph and session on this task's server for the keepers' done flags.

  keepers: (job, index) of every flag keeper; own: this task if it is one.
  """

  def __init__(
    self, target: str, keepers: Sequence, num_clients: int, own: Optional[tuple]
  ):
    self.graph = tf.Graph()
    self.keepers = list(keepers)
    with self.graph.as_default():
      self.flags = {
        k: _flags_variable(k[0], k[1], num_clients) for k in keepers
      }
      self.client = tf1.placeholder(tf.int32, [])
      self.set_ops = {k: self._set_op(v, DONE) for k, v in self.flags.items()}
      self.lost_ops = {
        k: self._set_op(v, LOST) for k, v in self.flags.items() if k == own
      }
      # The raw op: the wrapped one warns when a keeper's op goes unused.
      self.ready = {
        k: tf.raw_ops.VarIsInitializedOp(resource=v.handle)
        for k, v in self.flags.items()
      }
      self.init = (
        {own: self.flags[own].initializer} if own in self.flags else {}
      )
      self.read = {k: v.read_value() for k, v in self.flags.items()}
    devices = ['/job:%s/task:%d' % k for k in keepers]
    config = tf1.ConfigProto(device_filters=devices)
    config.operation_timeout_in_ms = 20000
    self.session = tf1.Session(target, graph=self.graph, config=config)
    self.own = own
    if own in self.init:
      self.session.run(self.init[own])

  def _set_op(self, flags, value: int):
    return flags.scatter_update(
      tf.IndexedSlices(tf.fill([1], value), tf.reshape(self.client, [1]))
    )

  def done_clients(self) -> set:
    """Clients whose flag is set on this task's own flags."""
    return {
      i
      for i, f in enumerate(self.session.run(self.read[self.own]))
      if f == DONE
    }

  def mark_lost(self, client: int) -> None:
    """Records on this keeper that `client` was lost (other clients read it)."""
    self.session.run(self.lost_ops[self.own], {self.client: client})

  def _values(self, include_own: bool):
    """keeper -> its flag values, for the keepers that answer."""
    values = {}
    for keeper in self.keepers:
      if keeper == self.own and not include_own:
        continue
      try:
        values[keeper] = self.session.run(
          self.read[keeper], options=tf1.RunOptions(timeout_in_ms=2000)
        )
      except tf.errors.OpError:
        continue  # the keeper itself may be gone: the probes see that
    return values

  def lost_clients(self) -> list:
    """(keeper, client index) of the clients another keeper marked lost."""
    return [
      (keeper, i)
      for keeper, flags in self._values(False).items()
      for i, f in enumerate(flags)
      if f == LOST
    ]

  def is_done(self, client: int) -> bool:
    """Whether some keeper has `client` marked done."""
    return any(flags[client] == DONE for flags in self._values(True).values())

  def mark_done(self, client: int) -> None:
    """Sets `client`'s flag on every keeper (waits for each to exist)."""
    for keeper in self.keepers:
      deadline = time.monotonic() + FLAG_WAIT_S
      while not self.session.run(self.ready[keeper]):
        if time.monotonic() > deadline:
          raise tf.errors.DeadlineExceededError(
            None, None, 'done flags of %s:%d never appeared' % keeper
          )
        time.sleep(0.2)
      self.session.run(self.set_ops[keeper], {self.client: client})
