"""Workers started with different graph-shaping flags refuse to start.

Before issue 26 the cluster fingerprint listed its flags by hand and missed
nine graph-shaping ones; it now hashes every Params field declared with
graph=True. Two real workers, as tests/test_failures.py starts them.
"""

import threading
import time

import numpy as np
import tensorflow as tf

from tests import test_failures
from tf_cnn_benchmarks.cluster import fingerprint


def test_workers_with_different_allreduce_merge_scope_refuse_to_start():
  hosts = ['127.0.0.1:%d' % test_failures._free_port() for _ in range(2)]
  out = test_failures._start_tasks(
    [['--allreduce_merge_scope=%d' % v] for v in (1, 2)], hosts
  )
  # Before: both workers trained, each with its own merge scope.
  assert [rc for rc, _ in out] == [2, 2], out
  assert [len(err) for _, err in out] == [1, 1], out
  for _, err in out:
    assert err[0].startswith('error: --allreduce_merge_scope='), err


def _one_worker_keeper():
  """An in-process server for worker 0 of a 2-worker cluster (the keeper);
  worker 1 is played by hand through it."""
  hosts = ['127.0.0.1:%d' % test_failures._free_port() for _ in range(2)]
  cluster = tf.train.ClusterSpec({'worker': hosts})
  return tf.distribute.Server(cluster, job_name='worker', task_index=0).target


def test_a_client_that_finds_a_mismatch_waits_until_every_client_checked():
  # Worker 0 (also the keeper) sees worker 1's different hashes; it must not
  # stop (taking the keeper down) before worker 1 has read them too, or
  # worker 1 reports a lost task instead of the flag.
  target = _one_worker_keeper()
  keeper, clients = ('worker', 0), [('worker', 0), ('worker', 1)]
  flags_0, flags_1 = (('batch_size', 2),), (('batch_size', 3),)
  raised, left, marked = [], [], threading.Event()

  def worker_0():
    try:
      fingerprint.check(
        target, keeper, clients, clients[0], flags_0, lambda: left.append(1)
      )
    except fingerprint.FlagMismatch as e:
      raised.append((marked.is_set(), str(e)))

  thread = threading.Thread(target=worker_0)
  thread.start()
  board = fingerprint._Board(keeper, clients, clients[1], 1)
  only_keeper = tf.compat.v1.ConfigProto(device_filters=['/job:worker/task:0'])
  with tf.compat.v1.Session(
    target, graph=board.graph, config=only_keeper
  ) as sess:
    hashes = np.array([fingerprint._hash(v) for _, v in flags_1], np.int64)
    sess.run(board.publish, {board.hashes: hashes})
    time.sleep(1.0)  # worker 0 has seen the difference by now
    marked.set()
    sess.run(board.mark_checked)
  thread.join(timeout=60)
  assert left == [1]  # it stopped watching its peers before leaving
  assert raised == [
    (
      True,
      '--batch_size=2 on worker:0 differs from worker:1; start every '
      'task of a run with the same run flags',
    )
  ]
