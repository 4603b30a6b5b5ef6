"""A resumed cluster run equals a straight one: every worker's own state
(error buffers, PowerSGD's error, accumulation buffers) is in the chief's
checkpoint and comes back (variable_mgr/worker_state.py,
tf_cnn_benchmarks/training/worker_saves.py).

Two workers on 127.0.0.1 (tests/test_distributed.py's launcher): 6 steps
straight, against 3 steps and 3 resumed in a new cluster; the resumed
steps' losses on every worker and the final checkpoints (weights, slots,
every worker's state) must be equal, bit for bit.
"""

import numpy as np
import pytest
import tensorflow as tf

from tests import test_distributed as cluster

pytestmark = pytest.mark.slow  # 3 cluster launches each (> 30 s)

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
