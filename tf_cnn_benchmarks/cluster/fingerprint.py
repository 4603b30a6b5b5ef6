"""Tasks of one cluster run must run the same benchmark.

Every client (a task that runs steps) hashes each flag that defines the run
and stores the hashes in a variable of its own on the first flag keeper; it
then reads every other client's hashes and refuses to start, naming the flag
and the tasks, where they differ. Without this, two workers with different
--batch_size trained to exit 0 with a wrong global batch size, and different
--model failed a minute later with a message that did not say why.
"""

from __future__ import annotations

import hashlib
import time
from typing import Sequence

import numpy as np
import tensorflow as tf

from tf_cnn_benchmarks.cluster import spec as spec_lib

tf1 = tf.compat.v1

# The flags that define the run: the same on every task. Output paths, data
# paths, cluster addresses and logging may differ.
RUN_FLAGS = (
  'model',
  'data_name',
  'batch_size',
  'num_batches',
  'num_epochs',
  'num_warmup_batches',
  'forward_only',
  'eval',
  'num_gpus',
  'device',
  'data_format',
  'variable_update',
  'use_resource_vars',
  'cross_replica_sync',
  'ps_partition_threshold_bytes',
  'hybrid_threshold_bytes',
  'use_fp16',
  'fp16_vars',
  'fp16_loss_scale',
  'fp16_enable_auto_loss_scale',
  'fp16_inc_loss_scale_every_n',
  'use_bf16',
  'all_reduce_spec',
  'gradient_repacking',
  'agg_small_grads_max_bytes',
  'agg_small_grads_max_group',
  'compact_gradient_transfer',
  'variable_consistency',
  'optimizer',
  'init_learning_rate',
  'num_epochs_per_decay',
  'learning_rate_decay_factor',
  'minimum_learning_rate',
  'piecewise_learning_rate_schedule',
  'num_learning_rate_warmup_epochs',
  'resnet_base_lr',
  'momentum',
  'rmsprop_decay',
  'rmsprop_momentum',
  'rmsprop_epsilon',
  'adam_beta1',
  'adam_beta2',
  'adam_epsilon',
  'weight_decay',
  'gradient_clip',
  'gradient_clip_norm',
  'tf_random_seed',
  'distortions',
  'resize_method',
  # Every worker must know the evaluation steps: the others wait there for
  # the chief's verdict (verdicts.py).
  'eval_during_training_every_n_steps',
  'eval_during_training_every_n_epochs',
  'eval_during_training_at_specified_steps',
  'eval_during_training_at_specified_epochs',
  'stop_at_top_1_accuracy',
)
# How long a client waits for the others' hashes (the watchdog reports a
# client that never comes up sooner).
WAIT_S = 120.0


class FlagMismatch(spec_lib.ClusterError):
  """Tasks of one run were started with different run flags."""


def run_flags(params) -> tuple:
  """((flag, value), ...) of the run-defining flags `params` has."""
  return tuple(
    (name, getattr(params, name)) for name in RUN_FLAGS if hasattr(params, name)
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
