"""Leftovers of faults, and outputs and clusters that cannot work (issue 29,
item 14): checkpoint files killed saves left, a /proc-like output directory,
a TF_CONFIG task index that does not exist."""

import json
import os
import re
import shutil

import pytest

from tests import helpers
from tests.helpers import LINEAR_ON_CPU
from tf_cnn_benchmarks.cluster import spec as cluster_spec
from tf_cnn_benchmarks.reporting import outputs
from tf_cnn_benchmarks.training import checkpoint_cleanup
from tf_cnn_benchmarks.training import checkpoints

LINEAR = dict(
  **LINEAR_ON_CPU,
  num_warmup_batches=0,
  display_every=100,
  batch_size=4,
)

# test_linear (tests/testing_models.py) registered for every test here.
pytestmark = pytest.mark.usefixtures('test_models_registered')

# Files a user or another tool keeps in --train_dir: never removed.
UNRELATED = (
  'notes.txt',
  'model.ckpt-best.index',  # not PREFIX-STEP
  'model.ckpt-7.index.bak',
  'events.out.tfevents.1.host',
  'checkpoint.bak',
  'mymodel.ckpt-3.index',
)


def run(**kw):
  return helpers.run_in_process(**{**LINEAR, **kw})


def index_files(train_dir):
  """The harness's checkpoints (PREFIX-STEP.index) in train_dir."""
  return sorted(
    f
    for f in os.listdir(train_dir)
    if re.fullmatch(r'model\.ckpt-\d+\.index', f)
  )


def _copy_checkpoint(train_dir, step, new_step):
  """A complete checkpoint at new_step, not in the state file (the old one
  a SIGKILL kept from being deleted)."""
  for name in os.listdir(train_dir):
    old = 'model.ckpt-%d.' % step
    if name.startswith(old):
      shutil.copy(
        os.path.join(train_dir, name),
        os.path.join(
          train_dir, 'model.ckpt-%d.%s' % (new_step, name[len(old) :])
        ),
      )


def _leave_debris(train_dir):
  """What saves killed midway leave, and files that are not ours."""
  leftovers = [
    'model.ckpt-6.data-00000-of-00001.tempstate1234567890',
    'model.ckpt-6.index.tempstate1234567890',
    'model.ckpt-9.data-00000-of-00001',  # its .index never written
    'checkpoint.tmp0123456789abcdef0123456789abcdef',
  ]
  for name in leftovers + list(UNRELATED):
    with open(os.path.join(train_dir, name), 'w') as f:
      f.write('x')
  os.mkdir(os.path.join(train_dir, 'model.ckpt-6_temp'))
  with open(os.path.join(train_dir, 'model.ckpt-6_temp', 'part-00000'), 'w'):
    pass
  return leftovers + ['model.ckpt-6_temp']


def test_a_resumed_run_removes_leftovers_and_trims_to_max_to_keep(tmp_path):
  train_dir = str(tmp_path / 'train')
  run(
    num_batches=3, train_dir=train_dir, save_model_steps=1, max_ckpts_to_keep=2
  )
  assert index_files(train_dir) == ['model.ckpt-2.index', 'model.ckpt-3.index']
  _copy_checkpoint(train_dir, 2, 1)  # step 1's deletion never happened
  leftovers = _leave_debris(train_dir)
  result = run(
    num_batches=2, train_dir=train_dir, save_model_steps=1, max_ckpts_to_keep=2
  )
  assert result.training.start_step == 3  # resumed from the newest
  names = set(os.listdir(train_dir))
  assert index_files(train_dir) == ['model.ckpt-4.index', 'model.ckpt-5.index']
  assert not names & set(leftovers)
  assert set(UNRELATED) <= names
  assert checkpoints.LOCK_FILE in names  # the lock file stays


def test_clean_trims_the_state_file_to_max_to_keep(tmp_path):
  train_dir = str(tmp_path / 'train')
  run(
    num_batches=3, train_dir=train_dir, save_model_steps=1, max_ckpts_to_keep=3
  )
  _leave_debris(train_dir)
  removed = checkpoint_cleanup.clean(
    train_dir, 1, checkpoints.CHECKPOINT_BASENAME, checkpoints.STATE_FILE
  )
  assert index_files(train_dir) == ['model.ckpt-3.index']
  assert 'model.ckpt-1.index' in removed and 'model.ckpt-2.index' in removed
  assert checkpoints.latest_checkpoint(train_dir).endswith('model.ckpt-3')
  with open(os.path.join(train_dir, 'checkpoint')) as f:
    assert 'model.ckpt-2' not in f.read()
  assert set(UNRELATED) <= set(os.listdir(train_dir))


def test_without_a_state_file_only_temporaries_go(tmp_path):
  train_dir = tmp_path / 'train'
  train_dir.mkdir()
  (train_dir / 'model.ckpt-4.index').write_text('x')
  (train_dir / 'model.ckpt-4.data-00000-of-00001').write_text('x')
  leftovers = _leave_debris(str(train_dir))
  checkpoint_cleanup.clean(str(train_dir), 5, 'model.ckpt', 'checkpoint')
  names = set(os.listdir(train_dir))
  assert not names & set(leftovers)
  assert {'model.ckpt-4.index', 'model.ckpt-4.data-00000-of-00001'} <= names
  assert set(UNRELATED) <= names


def _tf_config(task_type, index):
  return json.dumps(
    {
      'cluster': {
        'chief': ['127.0.0.1:2222'],
        'worker': ['127.0.0.1:2223', '127.0.0.1:2224', '127.0.0.1:2225'],
      },
      'task': {'type': task_type, 'index': index},
    }
  )


@pytest.mark.parametrize(
  'task_type, index, allowed',
  [
    ('chief', 3, 'cluster.chief has 1 task(s): index must be in 0..0'),
    ('worker', 3, 'cluster.worker has 3 task(s): index must be in 0..2'),
    ('ps', 0, 'cluster.ps lists no task'),
  ],
)
def test_tf_config_task_that_does_not_exist_is_refused(
  task_type, index, allowed
):
  env = {'TF_CONFIG': _tf_config(task_type, index)}
  with pytest.raises(cluster_spec.ClusterError) as info:
    cluster_spec.resolve(None, None, None, None, None, 'grpc', env=env)
  assert str(info.value) == (
    'TF_CONFIG: task {"type": "%s", "index": %d} does not exist; %s'
    % (task_type, index, allowed)
  )


def test_tf_config_tasks_that_exist_still_resolve():
  for task_type, index, worker in (('chief', 0, 0), ('worker', 2, 3)):
    env = {'TF_CONFIG': _tf_config(task_type, index)}
    c = cluster_spec.resolve(None, None, None, None, None, 'grpc', env=env)
    assert (c.job_name, c.task_index, c.num_workers) == ('worker', worker, 4)


PROC_LIKE = '/proc/self/task'  # files cannot be created there, even by root


@pytest.mark.skipif(
  not os.path.isdir(PROC_LIKE), reason='needs a Linux /proc file system'
)
def test_output_check_tries_to_create_a_file_in_proc_like_dirs():
  # os.access says yes to root here; the probe finds out.
  with pytest.raises(outputs.OutputError, match='--train_dir=%s' % PROC_LIKE):
    outputs.check_dir('train_dir', PROC_LIKE, writes=True)
  with pytest.raises(outputs.OutputError) as info:
    outputs.check_file('result_file', os.path.join(PROC_LIKE, 'r', 'x.jsonl'))
  assert str(info.value) == (
    '--result_file=%s/r/x.jsonl: cannot create files in %s (no write '
    'permission)' % (PROC_LIKE, PROC_LIKE)
  )


def test_output_check_leaves_no_probe_file(tmp_path):
  outputs.check_dir('train_dir', str(tmp_path), writes=True)
  outputs.check_file('result_file', str(tmp_path / 'new' / 'r.jsonl'))
  assert os.listdir(tmp_path) == []
