"""Tasks of one cluster run must run the same benchmark.

Every client (a task that runs steps) hashes each flag that defines the run
(each Params field declared with graph=True) and stores the hashes in a
variable of its own on the first flag keeper; it then reads every other
client's hashes and refuses to start, naming the flag and the tasks, where
they differ. Without this, two workers with different
--batch_size trained to exit 0 with a wrong global batch size, and different
--model failed a minute later with a message that did not say why.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from typing import Sequence

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


def check(
  target: str,
  keeper: tuple,
  clients: Sequence[tuple],
  me: tuple,
  flags: tuple,
) -> None:
  """Raises FlagMismatch unless every client has this task's run flags."""
  if len(clients) < 2 or not flags:
    return
  hashes = np.array([_hash(v) for _, v in flags], np.int64)
  graph = tf.Graph()
  with graph.as_default(), tf.device(spec_lib.task_device(*keeper) + '/cpu:0'):
    variables = {
      c: tf1.Variable(
        tf.zeros([len(flags)], tf.int64),
        trainable=False,
        collections=[],
        use_resource=True,
        name='cluster_run_flags_%s_%d' % c,
      )
      for c in clients
    }
    publish = variables[me].assign(hashes)
    ready = {
      c: tf.raw_ops.VarIsInitializedOp(resource=v.handle)
      for c, v in variables.items()
    }
    reads = {c: v.read_value() for c, v in variables.items()}
  config = tf1.ConfigProto(device_filters=['/job:%s/task:%d' % keeper])
  with tf1.Session(target, graph=graph, config=config) as sess:
    sess.run(publish)
    deadline = time.monotonic() + WAIT_S
    for client in clients:
      while not sess.run(ready[client]):
        if time.monotonic() > deadline:
          return  # the watchdog names a client that never came
        time.sleep(0.2)
      theirs = sess.run(reads[client])
      if theirs.shape == hashes.shape and not (theirs == hashes).all():
        index = int(np.argmax(theirs != hashes))
        name, value = flags[index]
        raise FlagMismatch(
          '--%s=%s on %s:%d differs from %s:%d; start every task of a run '
          'with the same run flags' % (name, value, *me, *client)
        )
