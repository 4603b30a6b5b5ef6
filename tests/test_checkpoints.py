"""Checkpoints, resume, evaluation and observability on synthetic data."""

import io
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from tests import helpers
from tests.helpers import LINEAR_ON_CPU
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.training import checkpoints

tf1 = tf.compat.v1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Momentum: the resumed run must also get the optimizer's slots back.
LINEAR = dict(
  **LINEAR_ON_CPU,
  optimizer='momentum',
  init_learning_rate=0.1,
  num_warmup_batches=0,
  display_every=100,
  batch_size=4,
)


# test_linear (tests/testing_models.py) registered for every test here.
pytestmark = pytest.mark.usefixtures('test_models_registered')


def run(**kw):
  return helpers.run_in_process(**{**LINEAR, **kw})


def index_files(train_dir):
  return sorted(f for f in os.listdir(train_dir) if f.endswith('.index'))


@pytest.mark.parametrize(
  'first,then',
  [
    ('parameter_server', 'parameter_server'),
    ('replicated', 'replicated'),
    ('replicated', 'parameter_server'),
    ('parameter_server', 'replicated'),
    ('independent', 'independent'),  # every tower's own values come back
  ],
)
def test_resume_continues_the_run_exactly(tmp_path, first, then):
  """3 steps, checkpoint, 3 resumed steps == 6 steps in one run.

  The synthetic batch is the same every step, so the resumed run's losses
  are those of steps 4..6 of the uninterrupted run if (and only if) it got
  back every variable, optimizer slot and the global step.
  """
  whole = run(variable_update=first, num_gpus=2, num_batches=6)
  train_dir = str(tmp_path / 'train')
  part1 = run(
    variable_update=first, num_gpus=2, num_batches=3, train_dir=train_dir
  )
  part2 = run(
    variable_update=then, num_gpus=2, num_batches=3, train_dir=train_dir
  )
  assert part1.training.start_step == 0 and part1.training.end_step == 3
  assert part2.training.start_step == 3 and part2.training.end_step == 6
  np.testing.assert_allclose(part1.losses, whole.losses[:3], rtol=1e-6)
  np.testing.assert_allclose(part2.losses, whole.losses[3:], rtol=1e-5)
  assert index_files(train_dir) == ['model.ckpt-3.index', 'model.ckpt-6.index']


def test_loss_scale_and_skip_count_are_resumed(tmp_path):
  fp16 = dict(
    use_fp16=True,
    fp16_enable_auto_loss_scale=True,
    fp16_loss_scale=1e30,
    fp16_inc_loss_scale_every_n=3,
  )
  whole = run(num_batches=40, **fp16)
  train_dir = str(tmp_path / 'train')
  run(num_batches=20, train_dir=train_dir, **fp16)
  part2 = run(num_batches=20, train_dir=train_dir, **fp16)
  assert whole.precision_info.skipped_steps > 0
  assert (
    part2.precision_info.skipped_steps == whole.precision_info.skipped_steps
  )
  assert part2.precision_info.loss_scale == whole.precision_info.loss_scale
  np.testing.assert_allclose(part2.losses, whole.losses[20:], rtol=1e-5)


def test_periodic_saves_keep_the_newest(tmp_path):
  train_dir = str(tmp_path / 'train')
  run(
    num_batches=5, train_dir=train_dir, save_model_steps=1, max_ckpts_to_keep=2
  )
  assert index_files(train_dir) == ['model.ckpt-4.index', 'model.ckpt-5.index']


def test_a_periodic_save_at_the_last_step_is_not_repeated(tmp_path):
  train_dir = str(tmp_path / 'train')
  out = io.StringIO()
  benchmark_cnn.run_benchmark(
    params_lib.make_params(
      **{
        **LINEAR,
        'num_batches': 4,
        'train_dir': train_dir,
        'save_model_steps': 2,
      }
    ),
    out=out,
  )
  saved = [
    line.split()[-1]
    for line in out.getvalue().splitlines()
    if line.startswith('Saved checkpoint')
  ]
  assert [os.path.basename(s) for s in saved] == [
    'model.ckpt-2',
    'model.ckpt-4',
  ]


def test_a_save_killed_midway_leaves_the_previous_checkpoint(tmp_path):
  """Files of an unfinished save (not in the state file) are ignored."""
  train_dir = tmp_path / 'train'
  run(num_batches=3, train_dir=str(train_dir))
  (train_dir / 'model.ckpt-9.index').write_bytes(b'half an index')
  (train_dir / 'model.ckpt-9.data-00000-of-00001').write_bytes(b'\0' * 10)
  resumed = run(num_batches=1, train_dir=str(train_dir))
  assert resumed.training.start_step == 3


def test_eval_of_a_checkpoint_counts_every_example(tmp_path):
  train_dir = str(tmp_path / 'train')
  run(num_batches=2, train_dir=train_dir, num_gpus=2)
  ev = run(eval=True, train_dir=train_dir, num_gpus=2, num_eval_batches=3)
  assert ev.run.mode == 'eval'
  assert ev.evaluation.checkpoint_step == 2
  assert ev.evaluation.eval_examples == 3 * 2 * 4
  # Synthetic labels are random: accuracy is a multiple of 1/24, top-5 >= top-1.
  top_1, top_5 = ev.evaluation.top_1_accuracy, ev.evaluation.top_5_accuracy
  assert top_1 * 24 == pytest.approx(round(top_1 * 24))
  assert 0 <= top_1 <= top_5 <= 1
  assert ev.images_per_sec > 0


def test_eval_during_training_is_recorded(tmp_path):
  result = run(
    num_batches=4, eval_during_training_every_n_steps=2, num_eval_batches=1
  )
  steps = [e.checkpoint_step for e in result.training.evals]
  assert steps == [2, 4]
  assert len(result.losses) == 4


def test_summaries_trace_and_graph_files(tmp_path):
  train_dir = tmp_path / 'train'
  trace = tmp_path / 'trace.json'
  graph = tmp_path / 'graph.pbtxt'
  run(
    num_batches=4,
    train_dir=str(train_dir),
    summary_verbosity=3,
    save_summaries_steps=2,
    trace_file=str(trace),
    graph_file=str(graph),
  )
  events = [f for f in os.listdir(train_dir) if 'tfevents' in f]
  assert len(events) == 1
  tags = {}
  for event in tf1.train.summary_iterator(str(train_dir / events[0])):
    for value in event.summary.value:
      tags.setdefault(value.tag, []).append(event.step)
  # The traced step counts: summaries at global steps 2 and 4 of 5.
  assert tags['total_loss'] == [2, 4]
  assert {'learning_rate', 'gradient_norm', 'variable_norm'} <= set(tags)
  trace_events = json.loads(trace.read_text())['traceEvents']
  assert any(e.get('ph') == 'X' and e['args']['op'] for e in trace_events)
  graph_def = tf1.GraphDef()
  from google.protobuf import text_format  # pylint: disable=g-import-not-at-top

  text_format.Parse(graph.read_text(), graph_def)
  assert any(n.op == 'MatMul' for n in graph_def.node)


def test_checkpoint_of_another_model_is_refused(tmp_path):
  train_dir = str(tmp_path / 'train')
  run(num_batches=1, train_dir=train_dir)
  with pytest.raises(checkpoints.CheckpointError, match='model.ckpt-1'):
    helpers.run_in_process(
      model='trivial',
      data_name='cifar10',
      device='cpu',
      num_batches=1,
      train_dir=train_dir,
    )


def _cli(*flags):
  return helpers.run_benchmark(*flags)


@pytest.mark.parametrize(
  'flags,needle',
  [
    (dict(eval=True), '--eval: needs --train_dir'),
    (dict(save_model_steps=5), '--save_model_steps: needs --train_dir'),
    (dict(summary_verbosity=1, train_dir='/tmp/x'), '--save_summaries_steps'),
    (dict(eval=True, forward_only=True, train_dir='/tmp/x'), 'choose one'),
    (dict(max_ckpts_to_keep=0), '--max_ckpts_to_keep=0'),
  ],
)
def test_bad_checkpoint_flags(flags, needle):
  with pytest.raises(params_lib.ParamsError) as e:
    params_lib.make_params(model='trivial', device='cpu', **flags)
  assert needle in str(e.value)


def test_eval_without_a_checkpoint_is_one_line_exit_2(tmp_path):
  proc = _cli(
    '--model=trivial', '--device=cpu', '--eval', '--train_dir=%s' % tmp_path
  )
  assert proc.returncode == 2, proc.stderr
  assert proc.stderr.strip().splitlines() == [
    'error: --train_dir=%s: no checkpoint to evaluate' % tmp_path
  ]


def _start_saving_every_step(train_dir):
  """A process that trains and saves a checkpoint after every step.

  trivial on ImageNet shapes: ~4.3M parameters + momentum slots, so a save
  writes ~34 MB and lasts long enough to be caught.
  """
  return subprocess.Popen(
    [
      sys.executable,
      '-m',
      'tf_cnn_benchmarks',
      '--model=trivial',
      '--device=cpu',
      '--batch_size=2',
      '--num_batches=400',
      '--num_warmup_batches=0',
      '--optimizer=momentum',
      '--train_dir=%s' % train_dir,
      '--save_model_steps=1',
      '--max_ckpts_to_keep=2',
      '--display_every=1000',
    ],
    cwd=ROOT,
    env=helpers.quiet_env(),
    stdout=subprocess.DEVNULL,
    stderr=subprocess.PIPE,
  )


def test_sigkill_during_a_save_leaves_a_usable_checkpoint(tmp_path):
  """A real run SIGKILLed while TensorFlow writes a checkpoint's files.

  The train_dir is polled until a save is under way (TensorFlow writes a
  checkpoint's files under temporary names, '...tempstate<N>', and renames
  them; after at least one complete save), then the process is killed. The
  state file must still name a complete checkpoint, and a new run must resume
  from it.
  """
  train_dir = tmp_path / 'train'
  proc = _start_saving_every_step(train_dir)
  caught_mid_save = False
  try:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
      names = os.listdir(train_dir) if train_dir.exists() else []
      if 'checkpoint' in names and any('temp' in n for n in names):
        caught_mid_save = True
        break
      time.sleep(0.0005)
  finally:
    proc.kill()
    proc.wait()
  assert caught_mid_save, proc.stderr.read()[-2000:]
  latest = checkpoints.latest_checkpoint(str(train_dir))
  assert latest is not None
  saved_step = checkpoints.step_of(latest)
  tf.train.load_checkpoint(latest).get_tensor('global_step')  # readable
  resumed = benchmark_cnn.run_benchmark(
    params_lib.make_params(
      model='trivial',
      device='cpu',
      batch_size=2,
      num_batches=1,
      num_warmup_batches=0,
      optimizer='momentum',
      train_dir=str(train_dir),
      display_every=100,
    ),
    out=io.StringIO(),
  )
  assert resumed.training.start_step == saved_step >= 1
  assert np.all(np.isfinite(resumed.losses))


@pytest.mark.slow  # default-suite budget (20 min); runs with -m slow
def test_eval_interval_evaluates_each_new_checkpoint(tmp_path):
  """--eval_interval_secs: a running evaluator picks up a later checkpoint."""
  train_dir = str(tmp_path / 'train')
  result_file = tmp_path / 'eval.jsonl'
  run(num_batches=2, train_dir=train_dir)
  env = helpers.quiet_env()
  evaluator = subprocess.Popen(
    [
      sys.executable,
      '-m',
      'tests.testing_models',
      '--model=test_linear',
      '--data_name=cifar10',
      '--device=cpu',
      '--batch_size=4',
      '--num_batches=1',
      '--eval',
      '--train_dir=' + train_dir,
      '--eval_interval_secs=1',
      '--eval_timeout_secs=10',
      '--result_file=%s' % result_file,
    ],
    cwd=ROOT,
    env=env,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.PIPE,
    text=True,
  )
  try:
    deadline = time.monotonic() + 90
    while not result_file.exists() and time.monotonic() < deadline:
      assert evaluator.poll() is None, evaluator.stderr.read()
      time.sleep(0.2)
    run(num_batches=2, train_dir=train_dir)  # resumes: checkpoint 4
    _, err = evaluator.communicate(timeout=120)
  finally:
    evaluator.kill()
  assert evaluator.returncode == 0, err
  lines = [json.loads(line) for line in result_file.read_text().splitlines()]
  assert [line['checkpoint_step'] for line in lines] == [2, 4]
  assert all(line['mode'] == 'eval' for line in lines)
