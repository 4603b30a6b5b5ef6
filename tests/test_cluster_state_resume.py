"""A resumed cluster run equals a straight one: every worker's own state
(error buffers, PowerSGD's error, accumulation buffers) is in the chief's
checkpoint and comes back (variable_mgr/worker_state.py,
tf_cnn_benchmarks/training/worker_saves.py).

Two workers on 127.0.0.1 (tests/test_distributed.py's launcher): 6 steps
straight, against 3 steps and 3 resumed in a new cluster; the resumed
steps' losses on every worker and the final checkpoints (weights, slots,
every worker's state) must be equal, bit for bit.
"""

import contextlib

import numpy as np
import pytest
import tensorflow as tf

from tests import test_distributed as cluster
from tf_cnn_benchmarks.training import checkpoints
from variable_mgr import accumulation
from variable_mgr import worker_state
from variable_mgr.compression import base as compression_base
from variable_mgr.compression import registry

tf1 = tf.compat.v1

NUM_WORKERS = 2

CASES = [
  pytest.param(
    'collective_all_reduce',
    ['--gradient_compression=fp16_ef'],
    'gradient_compression/replica_1/',
    id='collective-fp16_ef',
  ),
  pytest.param(
    'collective_all_reduce',
    ['--gradient_compression=powersgd'],
    'gradient_compression/replica_1/',
    id='collective-powersgd',
  ),
  pytest.param(
    'collective_all_reduce',
    ['--gradient_accumulation_steps=2'],
    'gradient_accumulation_worker_1/',
    id='collective-accumulation',
  ),
  pytest.param(
    'parameter_server',
    ['--gradient_compression=fp16_ef'],
    'gradient_compression/replica_1/',
    id='ps-fp16_ef',
  ),
]


def _flags(train_dir, mode, extra, steps):
  """tests/test_distributed.py's LINEAR with momentum, no warm-up."""
  dropped = ('--num_batches', '--optimizer', '--num_warmup_batches')
  return [f for f in cluster.LINEAR if not f.startswith(dropped)] + [
    '--optimizer=momentum',
    '--init_learning_rate=0.1',
    '--num_warmup_batches=0',
    '--num_batches=%d' % steps,
    '--variable_update=' + mode,
    '--train_dir=' + train_dir,
    *extra,
  ]


def _run(tmp_path, name, train_dir, mode, extra, steps):
  """One cluster launch: (each worker's losses, the records)."""
  run_dir = tmp_path / name
  run_dir.mkdir()
  _, records = cluster.launch_ok(
    run_dir,
    NUM_WORKERS,
    _flags(train_dir, mode, extra, steps),
    launcher_flags=cluster.TASKS[mode],
    every_worker_reports=True,
  )
  return cluster.worker_losses(records, NUM_WORKERS), records


def _checkpoint(train_dir) -> dict:
  """name -> value of every variable of train_dir's latest checkpoint."""
  path = tf.train.latest_checkpoint(train_dir)
  reader = tf.train.load_checkpoint(path)
  return {
    name: reader.get_tensor(name) for name, _ in tf.train.list_variables(path)
  }


@pytest.mark.slow  # 3 cluster launches each (> 30 s)
@pytest.mark.parametrize('mode,extra,other_state', CASES)
def test_resumed_cluster_run_equals_a_straight_one(
  tmp_path, mode, extra, other_state
):
  straight_dir = str(tmp_path / 'straight')
  whole, _ = _run(tmp_path, 'whole', straight_dir, mode, extra, 6)
  split_dir = str(tmp_path / 'split')
  first, _ = _run(tmp_path, 'first', split_dir, mode, extra, 3)
  # Worker 1's own state is in the chief's checkpoint of the first part.
  after_first = _checkpoint(split_dir)
  theirs = [n for n in after_first if n.startswith(other_state)]
  assert theirs, sorted(after_first)
  then, records = _run(tmp_path, 'then', split_dir, mode, extra, 3)
  assert {r['start_step'] for r in records} == {3}
  for w in range(NUM_WORKERS):
    np.testing.assert_array_equal(first[w], whole[w][:3])
    np.testing.assert_array_equal(then[w], whole[w][3:])
  straight, resumed = _checkpoint(straight_dir), _checkpoint(split_dir)
  assert sorted(resumed) == sorted(straight)
  for name, value in straight.items():
    np.testing.assert_array_equal(resumed[name], value, err_msg=name)
  if other_state.startswith('gradient_compression'):
    # The state matters: worker 1's buffers are not zero.
    assert any(np.abs(straight[n]).max() > 0 for n in theirs)


# ---- the rule, in one graph (no session) ---------------------------------


def _task_cpu(task):
  return '/job:worker/replica:0/task:%d/device:CPU:0' % task


def _handles(task, num_workers):
  """name -> device of the other workers' handles of the default graph."""
  return {
    v.op.name: v.device for v in worker_state.other_workers(task, num_workers)
  }


def test_every_other_workers_error_buffers_are_named_and_placed_as_theirs():
  """Worker 1 of 3, two towers (replicas 2, 3): the handles are replicas
  0, 1 on task 0 and 4, 5 on task 2, tower by tower."""
  with tf.Graph().as_default():
    devices = (_task_cpu(1), _task_cpu(1))
    grads = [[tf.zeros([3])] for _ in devices]
    wire = compression_base.Wire(
      devices=devices, reduce=lambda t: t, num_replicas=6, first_replica=2
    )
    registry.create('fp16_ef').reduce(grads, wire)
    assert _handles(1, 3) == {
      'gradient_compression/replica_%d/grad_0/error' % k: _task_cpu(k // 2)
      for k in (0, 1, 4, 5)
    }


def test_a_push_replica_is_its_worker():
  with tf.Graph().as_default():
    registry.create('bf16_ef').push([tf.zeros([2])], _task_cpu(0), 0, ['w'])
    assert _handles(0, 2) == {
      'gradient_compression/replica_1/w/error': _task_cpu(1)
    }


def test_every_other_workers_accumulation_is_named_and_placed_as_theirs():
  with tf.Graph().as_default():
    v = tf1.get_variable('v0/w', [2], use_resource=True)
    acc = accumulation.GradientAccumulation(2, _task_cpu(0), worker=0)
    with tf.device(_task_cpu(0)):
      acc.build([[(tf.ones([2]), v)]], tf.constant(1.0), [_task_cpu(0)])
    assert _handles(0, 2) == {
      'gradient_accumulation_worker_1/micro_steps_done': _task_cpu(1),
      'gradient_accumulation_worker_1/loss_sum': _task_cpu(1),
      'gradient_accumulation_worker_1/tower_0/v0/w': _task_cpu(1),
    }
    # Nothing the chief initialises, restores or trains.
    assert set(tf1.global_variables()) == {v, *acc.variables()}


def test_a_ps_device_is_every_workers():
  ps = '/job:ps/replica:0/task:0/device:CPU:0'
  assert worker_state.device_of_worker(ps, 3) == ps
  assert worker_state.device_of_worker('/device:CPU:0', 3) == _task_cpu(3)


class _Barrier:
  """Counts the saves that meet every worker."""

  def __init__(self):
    self.met = 0

  def around(self, sess):
    del sess
    self.met += 1
    return contextlib.nullcontext()


def test_met_saves_are_counted_alike_whatever_else_saved(tmp_path):
  """Every --save_model_steps=2 steps a met save, the chief's own saves in
  between (an evaluation's) notwithstanding; one met save retakes a step an
  unmet one took."""
  with tf.Graph().as_default():
    step = tf1.train.get_or_create_global_step()
    barrier = _Barrier()
    ckpt = checkpoints.Checkpointer(
      str(tmp_path),
      {'global_step': step},
      step,
      restore_from=None,
      restore_variables={},
      max_to_keep=5,
      policy=checkpoints.SavePolicy(every_n_steps=2),
      writes=True,
      barrier=barrier,
    )
    with tf1.Session() as sess:
      sess.run(step.initializer)
      saved = []
      for k in range(1, 6):
        sess.run(step.assign(k))
        if k == 3:
          assert ckpt.save(sess) is not None  # unmet: no barrier
        saved.append(ckpt.step_done(sess))
      assert barrier.met == 2
      assert [p is not None for p in saved] == [False, True, False, True, False]
      assert ckpt.save(sess, met=True) is not None  # step 5: once
      assert ckpt.save(sess, met=True) is None
      ckpt.release()
    assert barrier.met == 4
