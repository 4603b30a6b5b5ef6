"""Evaluation as the classic harness did it: schedules, sizes, events, lines.

Schedules (--eval_during_training_*), --eval_batch_size, --num_eval_epochs,
--num_eval_batches repeating the validation pass, --eval_dir events, the
classic progress lines and the Python API's run() with eval=True.
"""

import glob
import io
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from tests import testing_models
from tests.test_distributed import launch
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.commands import make_fake_data
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.evaluation import eval_schedule

tf1 = tf.compat.v1

LINEAR = dict(
  model='test_linear',
  data_name='cifar10',
  device='cpu',
  optimizer='sgd',
  init_learning_rate=0.1,
  num_warmup_batches=1,
  display_every=100,
  batch_size=4,
  peak_tflops_per_device='none',
)


@pytest.fixture(autouse=True)
def _models():
  testing_models.ensure_registered()


def run(**kw):
  p = params_lib.make_params(**{**LINEAR, **kw})
  return benchmark_cnn.run_benchmark(p, out=io.StringIO())


def run_with_output(**kw):
  out = io.StringIO()
  p = params_lib.make_params(**{**LINEAR, **kw})
  return benchmark_cnn.run_benchmark(p, out=out), out.getvalue()


def schedule(step_images, **kw):
  p = params_lib.make_params(model='trivial', data_name='cifar10', **kw)
  return eval_schedule.EvalSchedule.from_params(p, step_images, 50000)


def due_steps(sched, num_batches):
  return [s for s in range(1, num_batches + 1) if sched.due(s)]


def test_schedule_steps_match_the_classic_rounding():
  # A step of 3000 images over CIFAR-10's 50000: epoch e ends at step
  # ceil(e * 50000 / 3000).
  every_epoch = schedule(
    3000, num_batches=40, eval_during_training_every_n_epochs=1.0
  )
  assert due_steps(every_epoch, 40) == [17, 34]  # 16.67, 33.3 rounded up
  at_epochs = schedule(
    3000, num_batches=40, eval_during_training_at_specified_epochs='0.5,1.5'
  )
  assert due_steps(at_epochs, 40) == [9, 25]  # 8.33, 25.0
  at_steps = schedule(
    3000, num_batches=40, eval_during_training_at_specified_steps=['3', '7']
  )
  assert due_steps(at_steps, 40) == [3, 7]
  every_steps = schedule(
    3000, num_batches=10, eval_during_training_every_n_steps=4
  )
  assert due_steps(every_steps, 10) == [4, 8]
  # Every 0.5 epochs of a 3-epoch run (5000 images a step): 0.5 .. 2.5.
  halves = schedule(
    5000, num_batches=30, eval_during_training_every_n_epochs=0.5
  )
  assert due_steps(halves, 30) == [5, 10, 15, 20, 25]


def test_epochs_count_every_workers_images():
  """The driver hands the schedule the cluster's images per step."""
  p = params_lib.make_params(
    **LINEAR, num_gpus=2, num_batches=10, eval_during_training_every_n_epochs=1
  )
  bench = benchmark_cnn.BenchmarkCNN(p, out=io.StringIO())
  during = bench.during_training(lambda: None, lambda: 0)
  assert during.schedule == eval_schedule.EvalSchedule.from_params(
    p, 4 * 2, 50000
  )


def test_num_eval_batches_defaults_as_classic():
  def batches(**kw):
    p = params_lib.make_params(model='trivial', data_name='cifar10', **kw)
    return eval_schedule.num_eval_batches(p, 48, 10000)

  assert batches(num_batches=7) == 7  # --num_batches
  assert batches(num_batches=7, num_eval_batches=3) == 3
  # ceil(0.01 * 10000 / 48) = ceil(2.08)
  assert batches(num_batches=7, num_eval_epochs=0.01) == 3
  # Training by epochs: the same epochs of the validation split.
  assert batches(num_epochs=0.0096) == 2  # ceil(96 / 48)


@pytest.mark.parametrize(
  'flags,needle',
  [
    (
      dict(
        eval_during_training_every_n_steps=2,
        eval_during_training_every_n_epochs=1.0,
      ),
      'at most one --eval_during_training_* flag',
    ),
    (dict(stop_at_top_1_accuracy=0.5), 'only with one of the'),
    (
      dict(eval_during_training_every_n_steps=2, stop_at_top_1_accuracy=1.5),
      'must be in (0, 1]',
    ),
    (
      dict(eval_during_training_at_specified_steps='2,x'),
      'comma-separated list of integers',
    ),
    (dict(eval_during_training_at_specified_steps=[0]), 'not a step >= 1'),
    (dict(eval_during_training_every_n_epochs=-1.0), 'must be > 0'),
    (dict(eval_during_training_every_n_epochs=float('inf')), 'finite'),
    (dict(eval_during_training_every_n_epochs=1e-300), 'under one'),
    (
      dict(eval_during_training_at_specified_epochs=[float('inf')]),
      'not a finite number',
    ),
    (dict(num_eval_batches=2, num_eval_epochs=1.0), 'at most one of them'),
    (dict(eval_batch_size=-1), '--eval_batch_size=-1'),
    (
      dict(eval_during_training_every_n_steps=2, forward_only=True),
      'only when training',
    ),
  ],
)
def test_bad_eval_flags_are_one_line(flags, needle):
  with pytest.raises(params_lib.ParamsError) as e:
    params_lib.make_params(model='trivial', device='cpu', **flags)
  assert needle in str(e.value)
  assert '\n' not in str(e.value)


def test_cli_list_flags_parse_and_a_bad_value_exits_2(capfd):
  from tests.test_classic_compat import run_main

  common = ['--model=trivial', '--device=cpu', '--only_check_args']
  ok = run_main(
    common + ['--eval_during_training_at_specified_epochs', '0.5,1'], capfd
  )
  assert ok[0] == 0, ok[2]
  status, _, err = run_main(
    common + ['--eval_during_training_at_specified_steps=3,y'], capfd
  )
  assert status == 2
  assert err.strip().splitlines() == [
    'error: --eval_during_training_at_specified_steps=3,y: must be a '
    'comma-separated list of integers'
  ]


@pytest.mark.parametrize(
  'flag',
  [
    dict(eval_during_training_every_n_steps=2),
    dict(eval_during_training_every_n_epochs=1.0),
    dict(eval_during_training_at_specified_steps='2'),
    dict(eval_during_training_at_specified_epochs='1'),
  ],
)
def test_header_says_training_and_evaluation(flag):
  out = io.StringIO()
  p = params_lib.make_params(**LINEAR, num_batches=4, **flag)
  benchmark_cnn.BenchmarkCNN(p, out=out).print_header()
  assert 'Mode:        training + evaluation' in out.getvalue().splitlines()


def read_events(eval_dir):
  """{step: {tag: value}} of every events file in eval_dir."""
  got = {}
  for path in sorted(glob.glob(os.path.join(eval_dir, 'events.*'))):
    for event in tf1.train.summary_iterator(path):
      for value in event.summary.value:
        got.setdefault(event.step, {})[value.tag] = value.simple_value
  return got


def test_scheduled_evals_then_final_and_events(tmp_path):
  """Steps 2 and 3 of 5 timed steps (warm-up 1), then the final one."""
  eval_dir = str(tmp_path / 'eval')
  result, out = run_with_output(
    num_batches=5,
    eval_during_training_at_specified_steps='2,3,5',  # 5: the final eval
    num_eval_batches=2,
    eval_dir=eval_dir,
  )
  evals = result.training.evals
  assert [e.checkpoint_step for e in evals] == [3, 4, 6]
  assert [e.eval_examples for e in evals] == [8, 8, 8]
  assert len(result.losses) == 6 and result.num_steps == 5
  lines = out.splitlines()
  assert [x for x in lines if x.startswith('Running')] == [
    'Running warm up',
    'Running evaluation at global_step 3',
    'Running evaluation at global_step 4',
    'Running final evaluation at global_step 6',
  ]
  events = read_events(eval_dir)
  assert sorted(events) == [3, 4, 6]
  for e in evals:
    assert events[e.checkpoint_step] == pytest.approx(
      {
        'eval/Accuracy@1': e.top_1_accuracy,
        'eval/Accuracy@5': e.top_5_accuracy,
      }
    )
  record = result.to_record()
  assert [e['checkpoint_step'] for e in record['evals']] == [3, 4, 6]
  assert record['time_to_accuracy_sec'] is None  # no target given


def test_eval_mode_batch_size_progress_lines_and_block(tmp_path):
  train_dir = str(tmp_path / 'train')
  run(num_batches=2, train_dir=train_dir)
  ev, out = run_with_output(
    eval=True,
    train_dir=train_dir,
    num_gpus=2,
    eval_batch_size=3,
    num_eval_batches=4,
    display_every=2,
    eval_dir='',
  )
  assert ev.evaluation.eval_examples == 4 * 2 * 3
  assert ev.global_batch_size == 6 and ev.num_steps == 4
  lines = out.splitlines()
  progress = [x for x in lines if re.fullmatch(r'\d+\t[\d.]+ examples/sec', x)]
  assert [x.split('\t')[0] for x in progress] == ['2', '4']
  block = lines.index('total images/sec: %.2f' % ev.images_per_sec)
  assert lines[block - 1] == lines[block + 1] == '-' * 64
  assert lines[block - 2].startswith('Accuracy @ 1 = ')
  assert not os.path.exists(tmp_path / 'eval')


def test_classic_api_run_with_eval_returns_the_accuracy(tmp_path):
  train_dir = str(tmp_path / 'train')
  eval_dir = str(tmp_path / 'eval')
  run(num_batches=2, train_dir=train_dir)
  params = benchmark_cnn.make_params(
    **{**LINEAR, 'eval': True, 'train_dir': train_dir, 'eval_dir': eval_dir},
    num_batches=3,
  )
  params = benchmark_cnn.setup(params)
  bench = benchmark_cnn.BenchmarkCNN(params, out=io.StringIO())
  stats = bench.run()
  assert stats['top_1_accuracy'] == stats.evaluation.top_1_accuracy
  assert stats['top_5_accuracy'] == stats.evaluation.top_5_accuracy
  assert stats.evaluation.eval_examples == 3 * 4  # --num_batches, classic
  assert stats['num_steps'] == 3
  assert stats.evaluation.checkpoint_step == 3  # 1 warm-up + 2 steps
  assert read_events(eval_dir)[3]['eval/Accuracy@1'] == pytest.approx(
    stats['top_1_accuracy']
  )


@pytest.fixture(scope='module')
def cifar_dir(tmp_path_factory):
  path = str(tmp_path_factory.mktemp('cifar'))
  make_fake_data.write_cifar10(path, num_train=40, num_validation=20, seed=3)
  return path


def test_real_data_eval_repeats_the_validation_pass(cifar_dir, tmp_path):
  """20 examples, batch 8: a pass is 2 batches; 4 batches are 2 passes."""
  train_dir = str(tmp_path / 'train')
  common = dict(data_dir=cifar_dir, train_dir=train_dir, batch_size=8)
  run(num_batches=2, **common)
  one = run(eval=True, num_eval_batches=2, **common).evaluation
  two = run(eval=True, num_eval_batches=4, **common).evaluation
  three = run(eval=True, num_eval_batches=3, **common).evaluation
  assert (one.eval_examples, two.eval_examples) == (16, 32)
  assert two.top_1_accuracy == one.top_1_accuracy
  assert two.top_5_accuracy == one.top_5_accuracy
  # Default: --num_batches (3) batches, as classic: one pass and a half.
  default = run(eval=True, num_batches=3, **common).evaluation
  assert default.eval_examples == 24
  assert default.top_1_accuracy == three.top_1_accuracy


def test_two_workers_evaluate_on_the_chief_only(tmp_path):
  eval_dir = tmp_path / 'eval'
  rc, out, records = launch(
    tmp_path,
    2,
    [
      '--model=test_linear',
      '--data_name=cifar10',
      '--device=cpu',
      '--batch_size=4',
      '--num_batches=4',
      '--num_warmup_batches=1',
      '--display_every=1',
      '--optimizer=sgd',
      '--variable_update=collective_all_reduce',
      '--eval_during_training_every_n_steps=2',
      '--num_eval_batches=1',
      '--eval_dir=%s' % eval_dir,
    ],
    launcher_flags=['--num_ps=0', '--no-controller'],
    every_worker_reports=True,
  )
  assert rc == 0, out[-3000:]
  by_task = {r['task']['task_index']: r for r in records}
  # Chief: after timed step 2 (global step 3) and at the end (5).
  assert [e['checkpoint_step'] for e in by_task[0]['evals']] == [3, 5]
  assert by_task[1]['evals'] is None
  assert by_task[0]['losses'] == by_task[1]['losses']
  running = [x for x in out.splitlines() if 'evaluation at global_step' in x]
  assert len(running) == 2 and all('worker:0' in x for x in running), running
  assert sorted(read_events(str(eval_dir))) == [3, 5]
  assert np.all(np.isfinite(by_task[0]['losses']))


def test_eval_dir_that_is_a_file_is_refused_before_any_graph(tmp_path):
  from tf_cnn_benchmarks.reporting import outputs

  not_a_dir = tmp_path / 'file'
  not_a_dir.write_text('')
  p = params_lib.make_params(
    **LINEAR,
    num_batches=2,
    eval_during_training_every_n_steps=1,
    eval_dir=str(not_a_dir),
  )
  with pytest.raises(outputs.OutputError, match='exists and is not a dir'):
    benchmark_cnn.BenchmarkCNN(p, out=io.StringIO())


@pytest.mark.parametrize('value', ['inf', '1e-300'])
def test_cli_unusable_eval_interval_exits_2(value, capfd):
  from tests.test_classic_compat import run_main

  status, _, err = run_main(
    [
      '--model=trivial',
      '--device=cpu',
      '--only_check_args',
      '--eval_during_training_every_n_epochs=%s' % value,
    ],
    capfd,
  )
  assert status == 2
  lines = [line for line in err.splitlines() if 'every_n_epochs' in line]
  assert len(lines) == 1, err
