"""Tasks of one cluster run must run the same benchmark.

Every client (a task that runs steps) hashes each flag that defines the run
(each Params field declared with graph=True) and stores the hashes in a
variable of its own on the first flag keeper; it then reads every other
client's hashes and refuses to start, naming the flag and the tasks, where
they differ (once every client has read them: see check). Without this,
two workers with different --batch_size trained to exit 0 with a wrong
global batch size, and different --model failed a minute later with a
message that did not say why.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from tf_cnn_benchmarks.cluster import spec as spec_lib

tf1 = tf.compat.v1

# How long a client waits for the others' hashes (the watchdog reports a
# client that never comes up sooner).
WAIT_S = 120.0


class FlagMismatch(spec_lib.ClusterError):
  """Tasks of one run were started with different run flags."""


def run_flags(params) -> tuple:
  """((flag, value), ...) of the run-defining flags of Params `params`.

  They are the fields declared with graph=True (config/fields.py): the same
  on every task. Output paths, data paths, cluster addresses and logging may
  differ. The cluster room reads the metadata from the value itself, so it
  imports nothing from the configuration.
  """
  return tuple(
    (f.name, getattr(params, f.name))
    for f in dataclasses.fields(params)
    if f.metadata.get('graph')
  )


def _hash(value) -> int:
  digest = hashlib.sha256(repr(value).encode()).digest()
  return int.from_bytes(digest[:8], 'big') >> 1  # a positive int64


class _Board:
  """Each client's hashes and whether it has read everyone's: variables on
  the keeper that every client's graph declares under the same names (so
  the same resources), each set only by its own client."""

  def __init__(self, keeper: tuple, clients: Sequence[tuple], me: tuple, n):
    self.graph = tf.Graph()
    device = spec_lib.task_device(*keeper) + '/cpu:0'
    with self.graph.as_default(), tf.device(device):
      hashes = {c: self._variable('cluster_run_flags', c, [n]) for c in clients}
      checked = {
        c: self._variable('cluster_run_checked', c, []) for c in clients
      }
      self.hashes = tf1.placeholder(tf.int64, [n])
      self.publish = hashes[me].assign(self.hashes)
      self.mark_checked = checked[me].assign(tf.constant(1, tf.int64))
      self.ready = {c: _initialized(v) for c, v in hashes.items()}
      self.reads = {c: v.read_value() for c, v in hashes.items()}
      self.all_checked = tf.reduce_all(
        [_initialized(v) for v in checked.values()]
      )

  @staticmethod
  def _variable(prefix, client, shape):
    return tf1.Variable(
      tf.zeros(shape, tf.int64),
      trainable=False,
      collections=[],
      use_resource=True,
      name='%s_%s_%d' % (prefix, *client),
    )


def _initialized(variable) -> tf.Tensor:
  return tf.raw_ops.VarIsInitializedOp(resource=variable.handle)


def _wait(sess, ready, deadline) -> bool:
  """Polls `ready` until true (True) or the deadline passes (False)."""
  while not sess.run(ready):
    if time.monotonic() > deadline:
      return False
    time.sleep(0.2)
  return True


def check(
  target: str,
  keeper: tuple,
  clients: Sequence[tuple],
  me: tuple,
  flags: tuple,
  leaving: Callable[[], None] = lambda: None,
) -> None:
  """Raises FlagMismatch unless every client has this task's run flags.

  On a difference every client reports the flag, none a lost task: each
  calls `leaving` first (e.g. stops its watchdog: the others go too), and a
  client that is also the keeper waits (up to the same deadline) until
  every client has read everyone's hashes before it stops serving them.
  """
  if len(clients) < 2 or not flags:
    return
  hashes = np.array([_hash(v) for _, v in flags], np.int64)
  board = _Board(keeper, clients, me, len(flags))
  config = tf1.ConfigProto(device_filters=['/job:%s/task:%d' % keeper])
  with tf1.Session(target, graph=board.graph, config=config) as sess:
    sess.run(board.publish, {board.hashes: hashes})
    deadline = time.monotonic() + WAIT_S
    mismatch = None
    for client in clients:
      if not _wait(sess, board.ready[client], deadline):
        return  # the watchdog names a client that never came
      theirs = sess.run(board.reads[client])
      same_shape = theirs.shape == hashes.shape
      if mismatch is None and same_shape and not (theirs == hashes).all():
        name, value = flags[int(np.argmax(theirs != hashes))]
        mismatch = FlagMismatch(
          '--%s=%s on %s:%d differs from %s:%d; start every task of a run '
          'with the same run flags' % (name, value, *me, *client)
        )
    if mismatch is not None:
      leaving()
    sess.run(board.mark_checked)
    if mismatch is not None:
      if me == keeper:
        _wait(sess, board.all_checked, deadline)
      raise mismatch
