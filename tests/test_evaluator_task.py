"""The evaluator task and TF_CONFIG's "master" (issue 30, item 3).

An evaluator (TF_CONFIG type "evaluator", or --job_name=evaluator) follows
the chief's checkpoints in --train_dir, evaluates each new one (a results
line naming its step) and exits after the chief marks its final one; the
training tasks never wait for it. The follower's rules are tested in this
process with a stand-in evaluation; a 2-worker run with a real evaluator,
and one whose evaluator is killed, run as processes on 127.0.0.1.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import types

import pytest

from tests.helpers import ROOT
from tests.helpers import TRIVIAL_FLAGS
from tests.helpers import cli_status
from tests.helpers import task_env
from tests.test_tfjob import free_ports
from tests.test_tfjob import read_lines
from tests.test_tfjob import start_task
from tests.test_tfjob import wait_all
from tf_cnn_benchmarks.cluster import spec
from tf_cnn_benchmarks.evaluation import eval_runs
from tf_cnn_benchmarks.evaluation import evaluator_task


def _resolve(tf_config, job_name=None):
  return spec.resolve(
    job_name,
    None,
    None,
    None,
    None,
    'grpc',
    env={'TF_CONFIG': json.dumps(tf_config)},
  )


# ---- TF_CONFIG: master, evaluator -------------------------------------------

HOSTS = {'worker': ['h:2', 'h:3'], 'ps': ['h:4']}


@pytest.mark.parametrize('cluster_job', ['chief', 'master'])
@pytest.mark.parametrize('task_type', ['chief', 'master'])
def test_master_is_the_chief(cluster_job, task_type):
  cluster = dict(HOSTS, **{cluster_job: ['h:1']})
  chief = _resolve({'cluster': cluster, 'task': {'type': task_type}})
  worker = _resolve(
    {'cluster': cluster, 'task': {'type': 'worker', 'index': 1}}
  )
  # Before: task type "master" and cluster.master were refused.
  assert (chief.me, chief.worker_hosts) == (
    ('worker', 0),
    ('h:1', 'h:2', 'h:3'),
  )
  assert (worker.me, worker.num_workers) == (('worker', 2), 3)


def test_master_and_chief_both_is_one_line_exit_2():
  tf_config = {
    'cluster': dict(HOSTS, chief=['h:1'], master=['h:5']),
    'task': {'type': 'worker', 'index': 0},
  }
  with pytest.raises(spec.ClusterError, match='both "chief" and "master"'):
    _resolve(tf_config)
  env = dict(task_env(), TF_CONFIG=json.dumps(tf_config))
  proc = subprocess.run(
    [sys.executable, '-m', 'tf_cnn_benchmarks', *TRIVIAL_FLAGS],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert proc.returncode == 2
  assert proc.stderr.splitlines() == [
    'error: TF_CONFIG: cluster has both "chief" and "master", two names of '
    'the one chief task; give one of them'
  ]


def test_master_index_that_does_not_exist_names_master():
  tf_config = {
    'cluster': dict(HOSTS, master=['h:1']),
    'task': {'type': 'master', 'index': 1},
  }
  with pytest.raises(spec.ClusterError) as info:
    _resolve(tf_config)
  assert str(info.value) == (
    'TF_CONFIG: task {"type": "master", "index": 1} does not exist; '
    'cluster.master has 1 task(s): index must be in 0..0'
  )


@pytest.mark.parametrize(
  'cluster',
  [
    dict(HOSTS, chief=['h:1']),  # Kubeflow: the evaluator is not listed
    dict(HOSTS, chief=['h:1'], evaluator=['h:9']),  # tf.distribute's way
  ],
)
def test_evaluator_joins_no_cluster(cluster):
  tf_config = {'cluster': cluster, 'task': {'type': 'evaluator', 'index': 0}}
  # Before: refused ("run the evaluation as its own process").
  assert _resolve(tf_config) is None
  env = {'TF_CONFIG': json.dumps(tf_config)}
  assert spec.is_evaluator(None, env)
  assert spec.is_evaluator('evaluator', {})
  assert not spec.is_evaluator('worker', env)  # the flag wins
  assert not spec.is_evaluator(None, {'TF_CONFIG': '{"cluster": 1}'})
  # The training tasks' cluster never names it.
  worker = _resolve({'cluster': cluster, 'task': {'type': 'worker'}})
  assert 'evaluator' not in worker.spec_dict()


def test_evaluator_index_past_its_listed_tasks_is_refused():
  tf_config = {
    'cluster': dict(HOSTS, evaluator=['h:9']),
    'task': {'type': 'evaluator', 'index': 1},
  }
  with pytest.raises(spec.ClusterError, match='cluster.evaluator has 1'):
    _resolve(tf_config)


def test_evaluator_plan_is_a_local_eval_of_train_dir(tmp_path):
  from tf_cnn_benchmarks.config import params as params_lib  # pylint: disable=g-import-not-at-top

  plan = params_lib.make_plan(
    model='trivial',
    data_name='cifar10',
    device='cpu',
    job_name='evaluator',
    worker_hosts='h:1,h:2',
    variable_update='collective_all_reduce',  # cluster-only: still fine
    train_dir=str(tmp_path),
  )
  assert plan.cluster is None and plan.mode is params_lib.Mode.EVAL
  assert plan.params.eval_interval_secs == spec.EVALUATOR_POLL_SECS
  with pytest.raises(params_lib.ParamsError, match='needs --train_dir'):
    params_lib.make_plan(
      model='trivial', data_name='cifar10', device='cpu', job_name='evaluator'
    )


def test_evaluator_without_train_dir_is_one_line_exit_2():
  rc, err = cli_status(*TRIVIAL_FLAGS, '--job_name=evaluator')
  assert (rc, err) == (
    2,
    [
      "error: --job_name=evaluator: needs --train_dir (the chief's "
      'checkpoints to follow)'
    ],
  )


# ---- the follower, with a stand-in evaluation --------------------------------


class _Chief:
  """Writes checkpoints (empty .index files, the state file) and its mark."""

  def __init__(self, train_dir):
    self.dir = str(train_dir)
    os.makedirs(self.dir, exist_ok=True)
    self.steps = []

  def save(self, step):
    self.steps.append(step)
    open(self._path(step) + '.index', 'w').close()
    names = ['"model.ckpt-%d"' % s for s in self.steps]
    with open(os.path.join(self.dir, 'checkpoint'), 'w') as f:
      f.write('model_checkpoint_path: %s\n' % names[-1])
      f.writelines('all_model_checkpoint_paths: %s\n' % n for n in names)

  def mark_done(self):
    checkpointer = types.SimpleNamespace(
      writes=True, last_path=self._path(self.steps[-1]), train_dir=self.dir
    )
    evaluator_task.mark_training_done(checkpointer, print)

  def _path(self, step):
    return os.path.join(self.dir, 'model.ckpt-%d' % step)


def _follow(monkeypatch, train_dir, on_evaluate=None, timeout=30):
  """(steps evaluated, printed lines) of follow() with a stand-in."""
  evaluated, lines = [], []

  def evaluate_one(setup, facts, path):
    step = int(path.rsplit('-', 1)[1])
    evaluated.append(step)
    if on_evaluate:
      on_evaluate(step)
    return step

  monkeypatch.setattr(eval_runs, 'evaluate_one', evaluate_one)
  params = types.SimpleNamespace(
    train_dir=str(train_dir),
    eval_interval_secs=0,
    eval_timeout_secs=timeout,
    max_ckpts_to_keep=5,
  )
  setup = types.SimpleNamespace(print_line=lines.append, summaries=None)
  facts = types.SimpleNamespace(params=params)
  evaluator_task.follow(setup, facts)
  return evaluated, lines


def test_follower_evaluates_each_checkpoint_once_until_the_mark(
  monkeypatch, tmp_path
):
  chief = _Chief(tmp_path)
  chief.save(2)

  def chief_goes_on(step):  # the chief saves while the evaluator works
    if step == 2:
      chief.save(4)
      chief.save(6)
    elif step == 6:
      chief.save(8)
      chief.mark_done()

  evaluated, lines = _follow(monkeypatch, tmp_path, chief_goes_on)
  assert evaluated == [2, 4, 6, 8]
  assert lines[-1] == (
    'Evaluator: training ended at step 8 (training_done.json); evaluated 4 '
    'checkpoint(s)'
  )


def test_follower_skips_an_earlier_runs_checkpoints(monkeypatch, tmp_path):
  chief = _Chief(tmp_path)
  chief.save(2)
  chief.save(4)
  chief.mark_done()  # an earlier run (before this process), resumed from 4
  an_hour_ago = time.time() - 3600
  os.utime(
    os.path.join(str(tmp_path), 'training_done.json'), (an_hour_ago,) * 2
  )

  def resumed_run(step):
    if step == 6:
      chief.mark_done()

  chief.save(6)
  evaluated, _ = _follow(monkeypatch, tmp_path, resumed_run)
  assert evaluated == [6]


def test_follower_started_after_the_chief_ended_evaluates_all(
  monkeypatch, tmp_path
):
  # The chief finished while the evaluator process was starting: its mark
  # is there at the first look, but written after this process started.
  chief = _Chief(tmp_path)
  for step in (2, 4, 6):
    chief.save(step)
  chief.mark_done()
  evaluated, lines = _follow(monkeypatch, tmp_path)
  assert evaluated == [2, 4, 6]
  assert lines[-1].startswith('Evaluator: training ended at step 6')


def test_follower_times_out_without_the_mark(monkeypatch, tmp_path):
  _Chief(tmp_path).save(2)
  with pytest.raises(evaluator_task.EvaluatorTimeout) as info:
    _follow(monkeypatch, tmp_path, timeout=0)
  assert str(info.value) == (
    'evaluator: no new checkpoint in --train_dir=%s for '
    '--eval_timeout_secs=0 and no end of training marked there '
    '(training_done.json); exiting after 1 evaluation(s)' % tmp_path
  )


def test_follower_skips_a_checkpoint_the_chief_removed(monkeypatch, tmp_path):
  from tf_cnn_benchmarks.training import checkpoints  # pylint: disable=g-import-not-at-top

  chief = _Chief(tmp_path)
  chief.save(2)
  chief.save(4)
  # --max_ckpts_to_keep removed it after the evaluator listed it.
  os.remove(os.path.join(str(tmp_path), 'model.ckpt-2.index'))

  def evaluate(step):
    if step == 2:
      raise checkpoints.CheckpointError('model.ckpt-2: gone')
    chief.mark_done()

  evaluated, lines = _follow(monkeypatch, tmp_path, evaluate)
  assert evaluated == [2, 4]
  assert lines[1] == (
    'Evaluator: skipped %s/model.ckpt-2: removed before it was evaluated '
    '(the chief keeps --max_ckpts_to_keep=5)' % tmp_path
  )


def test_mark_is_written_whole_and_junk_is_refused(tmp_path):
  chief = _Chief(tmp_path)
  chief.save(3)
  chief.mark_done()
  mark = evaluator_task.read_done(str(tmp_path))
  assert (mark['final_step'], mark['checkpoint']) == (3, 'model.ckpt-3')
  assert sorted(os.listdir(str(tmp_path))) == [
    'checkpoint',
    'model.ckpt-3.index',
    'training_done.json',
  ]
  for junk in ('', '{"final_step": "3"}', '[1]', '{"final_step": 3'):
    with open(os.path.join(str(tmp_path), 'training_done.json'), 'w') as f:
      f.write(junk)
    # Not the chief's (it writes the mark whole): one line, exit 2.
    with pytest.raises(evaluator_task.checkpoints.CheckpointError) as e:
      evaluator_task.read_done(str(tmp_path))
    assert 'training_done.json: not' in str(e.value)


# ---- a 2-worker run and its evaluator, as processes ------------------------

TRAIN = [
  '--model=trivial',
  '--data_name=cifar10',
  '--device=cpu',
  '--batch_size=2',
  '--num_warmup_batches=0',
  '--display_every=100',
  '--variable_update=collective_all_reduce',
  '--peak_tflops_per_device=1',  # no peak probe (not tested here)
]
EVALUATOR = ['--num_eval_batches=2', '--eval_interval_secs=1']
SAVED = re.compile(r'^Saved checkpoint .*model\.ckpt-(\d+)$', re.M)


def _two_workers_and_evaluator(tmp_path, train_flags, evaluator_flags):
  """Starts worker:0, worker:1 and an evaluator from TF_CONFIG: {name: proc}.

  The workers' TF_CONFIG lists the evaluator too (tf.distribute's way);
  their cluster still leaves it out.
  """
  w0, w1, ev = free_ports(3)
  cluster = {
    'worker': ['127.0.0.1:%d' % w0, '127.0.0.1:%d' % w1],
    'evaluator': ['127.0.0.1:%d' % ev],
  }
  train_dir = '--train_dir=%s' % (tmp_path / 'train')
  procs = {}
  for name, task, flags in (
    ('worker-0', {'type': 'worker', 'index': 0}, train_flags),
    ('worker-1', {'type': 'worker', 'index': 1}, train_flags),
    ('evaluator', {'type': 'evaluator', 'index': 0}, evaluator_flags),
  ):
    procs[name] = start_task(
      ['-m', 'tf_cnn_benchmarks', *TRAIN, train_dir, *flags],
      {'TF_CONFIG': json.dumps({'cluster': cluster, 'task': task})},
      tmp_path / ('%s.log' % name),
    )
  return procs


def _log(tmp_path, name):
  return (tmp_path / ('%s.log' % name)).read_text()


def test_evaluator_evaluates_every_checkpoint_of_a_two_worker_run(tmp_path):
  procs = _two_workers_and_evaluator(
    tmp_path,
    [
      '--num_batches=6',
      '--save_model_steps=2',
      '--result_file=%s' % (tmp_path / 'train.jsonl'),
    ],
    [*EVALUATOR, '--result_file=%s' % (tmp_path / 'eval.jsonl')],
  )
  status = wait_all(procs)
  for name, rc in status.items():
    assert rc == 0, (name, _log(tmp_path, name)[-3000:])
  saved = [int(s) for s in SAVED.findall(_log(tmp_path, 'worker-0'))]
  assert saved == [2, 4, 6]  # the chief's checkpoints
  assert not SAVED.findall(_log(tmp_path, 'worker-1'))
  evals = read_lines(tmp_path / 'eval.jsonl')
  assert [e['checkpoint_step'] for e in evals] == saved
  assert {e['mode'] for e in evals} == {'eval'}
  assert all(0 <= e['top_1_accuracy'] <= 1 for e in evals)
  (train,) = read_lines(tmp_path / 'train.jsonl')
  assert (train['num_workers'], train['num_steps']) == (2, 6)


@pytest.mark.slow  # three processes to the end of 200 steps (~36 s loaded)
def test_killed_evaluator_never_stops_training(tmp_path):
  procs = _two_workers_and_evaluator(
    tmp_path,
    [
      '--num_batches=200',
      '--save_model_steps=50',
      '--result_file=%s' % (tmp_path / 'train.jsonl'),
    ],
    EVALUATOR,
  )
  evaluator = procs.pop('evaluator')
  try:
    # Killed once it evaluates the first checkpoint (step 50 of 200).
    while 'Evaluating ' not in _log(tmp_path, 'evaluator'):
      assert evaluator.poll() is None, _log(tmp_path, 'evaluator')[-3000:]
      assert all(p.poll() in (None, 0) for p in procs.values())
      evaluator_wait(evaluator)
    evaluator.send_signal(signal.SIGKILL)
    assert evaluator.wait(timeout=60) == -signal.SIGKILL
  finally:
    if evaluator.poll() is None:
      evaluator.kill()
  status = wait_all(procs)
  for name, rc in status.items():
    assert rc == 0, (name, _log(tmp_path, name)[-3000:])
  (train,) = read_lines(tmp_path / 'train.jsonl')
  assert (train['num_workers'], train['num_steps']) == (2, 200)
  saved = [int(s) for s in SAVED.findall(_log(tmp_path, 'worker-0'))]
  assert saved == [50, 100, 150, 200]


def evaluator_wait(proc):
  """Waits a moment for the evaluator (returns early if it ended)."""
  try:
    proc.wait(timeout=0.2)
  except subprocess.TimeoutExpired:
    pass


def test_evaluator_without_a_chief_times_out_with_one_line_exit_1(tmp_path):
  rc, err = cli_status(
    *TRIVIAL_FLAGS,
    '--job_name=evaluator',
    '--train_dir=%s' % tmp_path,
    '--eval_interval_secs=1',
    '--eval_timeout_secs=1',
  )
  assert (rc, err) == (
    1,
    [
      'error: evaluator: no new checkpoint in --train_dir=%s for '
      '--eval_timeout_secs=1 and no end of training marked there '
      '(training_done.json); exiting after 0 evaluation(s)' % tmp_path
    ],
  )
