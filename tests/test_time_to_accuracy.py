"""--stop_at_top_1_accuracy: train until an evaluation reaches the target."""

import io
import json
import time
import types

import pytest

from tests import helpers
from tests import testing_models
from tests.helpers import LINEAR_ON_CPU
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.cluster import fingerprint
from tf_cnn_benchmarks.cluster import verdicts as verdicts_lib
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.evaluation import eval_schedule


def scripted(accuracies, *, num_batches=10, target=0.5, every=2):
  """A DuringTraining whose evaluations return `accuracies` in turn."""
  lines, calls = [], []
  steps = iter(range(100, 200))

  def evaluate():
    calls.append(1)
    return types.SimpleNamespace(top_1=accuracies[len(calls) - 1])

  during = eval_schedule.DuringTraining(
    eval_schedule.EvalSchedule(every_n_steps=every),
    evaluate,
    lambda: next(steps),
    lines.append,
    num_batches=num_batches,
    target=target,
  )
  return during, lines


def test_stops_at_the_first_evaluation_reaching_the_target():
  during, lines = scripted([0.2, 0.5, 0.9])
  stops = [during.after_step(s) for s in range(1, 5)]
  assert stops == [False, False, False, True]  # the loop breaks there
  during.finish()  # no final evaluation after a stop
  assert [e.top_1 for e in during.evals] == [0.2, 0.5]
  reached = during.time_to_accuracy()
  assert reached.steps == 101  # the global step of the second evaluation
  assert reached.seconds > 0
  assert 'Stopping, as eval accuracy at least 0.5 was reached' in lines


def test_never_reached_gives_nulls_after_the_final_evaluation():
  during, lines = scripted([0.1, 0.2, 0.3, 0.4, 0.45], num_batches=10)
  assert not any(during.after_step(s) for s in range(1, 11))
  during.finish()
  assert len(during.evals) == 5  # steps 2, 4, 6, 8, then the final one
  assert during.time_to_accuracy().to_keys() == {
    'time_to_accuracy_sec': None,
    'steps_to_accuracy': None,
  }
  assert lines[-1].startswith('Target top-1 accuracy 0.5 not reached')


def test_target_reached_by_the_final_evaluation_counts():
  during, _ = scripted([0.1, 0.7], num_batches=3)
  assert not any(during.after_step(s) for s in range(1, 4))
  during.finish()
  assert during.time_to_accuracy().steps == 101


def test_no_target_null_keys():
  testing_models.ensure_registered()
  p = params_lib.make_params(
    **LINEAR_ON_CPU,
    batch_size=4,
    num_batches=2,
    num_warmup_batches=0,
    eval_during_training_every_n_steps=1,
    num_eval_batches=1,
    eval_dir='',
  )
  record = benchmark_cnn.run_benchmark(p, out=io.StringIO()).to_record()
  assert record['time_to_accuracy_sec'] is record['steps_to_accuracy'] is None
  assert len(record['evals']) == 2


@pytest.fixture(scope='module')
def separable_dir(tmp_path_factory):
  return helpers.separable_imagenet(tmp_path_factory)


def test_lenet_reaches_top1_of_099_on_the_separable_set(
  separable_dir, tmp_path
):
  """End to end: stops early, line and results keys say when."""
  result_file = tmp_path / 'r.jsonl'
  out = io.StringIO()
  p = params_lib.make_params(
    model='lenet',
    data_dir=separable_dir,
    device='cpu',
    batch_size=8,
    num_batches=200,
    num_warmup_batches=0,
    display_every=100,
    optimizer='sgd',
    init_learning_rate=0.001,  # slow enough to need a few evaluations
    distortions=False,
    eval_during_training_every_n_steps=3,
    num_eval_batches=2,  # one pass of the 16 validation examples
    stop_at_top_1_accuracy=0.99,
    eval_dir=str(tmp_path / 'eval'),
    result_file=str(result_file),
    peak_tflops_per_device='none',
  )
  result = benchmark_cnn.run_benchmark(p, out=out)
  record = json.loads(result_file.read_text().splitlines()[-1])
  steps = record['steps_to_accuracy']
  assert steps is not None and steps < 200
  assert record['end_step'] == steps == len(result.losses)
  accuracies = [e['top_1_accuracy'] for e in record['evals']]
  assert len(accuracies) >= 2 and accuracies[-1] >= 0.99
  assert max(accuracies[:-1]) < 0.99
  assert [e['checkpoint_step'] for e in record['evals']] == list(
    range(3, steps + 1, 3)
  )
  assert 0 < record['time_to_accuracy_sec']
  lines = out.getvalue().splitlines()
  assert 'Stopping, as eval accuracy at least 0.99 was reached' in lines
  assert any(x.startswith('Time to accuracy: ') for x in lines)


# ---- in a cluster: the chief evaluates, every worker stops with it --------


def test_cluster_flags_are_accepted_with_a_target():
  p = params_lib.make_params(
    model='trivial',
    device='cpu',
    eval_during_training_every_n_steps=2,
    stop_at_top_1_accuracy=0.5,
    job_name='worker',
    task_index=0,
    worker_hosts='127.0.0.1:1,127.0.0.1:2',
    variable_update='collective_all_reduce',
  )
  assert p.stop_at_top_1_accuracy == 0.5


class FakeVerdicts:
  """Records the chief's calls; a waiter gets the scripted verdicts."""

  chief_name = 'worker:0 (h:1)'

  def __init__(self, stops=()):
    self.calls, self.stops = [], set(stops)

  def announce(self, step):
    self.calls.append(('announce', step))

  def publish(self, step, stop):
    self.calls.append(('publish', step, stop))

  def wait(self, step):
    self.calls.append(('wait', step))
    return step in self.stops


def test_chief_publishes_each_verdict_after_its_evaluation():
  during, _ = scripted([0.2, 0.9])
  during.verdicts = verdicts = FakeVerdicts()
  stops = [during.after_step(s) for s in range(1, 5)]
  assert stops == [False, False, False, True]
  assert verdicts.calls == [
    ('announce', 2),
    ('publish', 2, False),
    ('announce', 4),
    ('publish', 4, True),
  ]


def test_other_workers_stop_on_the_chiefs_verdict():
  lines = []
  verdicts = FakeVerdicts(stops={6})
  during = eval_schedule.DuringTraining(
    eval_schedule.EvalSchedule(every_n_steps=3),
    lambda: pytest.fail('a worker that does not evaluate evaluated'),
    lambda: 0,
    lines.append,
    num_batches=10,
    target=0.5,
    evaluates=False,
    verdicts=verdicts,
  )
  assert [during.after_step(s) for s in range(1, 7)] == [False] * 5 + [True]
  assert verdicts.calls == [('wait', 3), ('wait', 6)]
  assert lines == [
    'Stopping, as the evaluation of worker:0 (h:1) after step 6 reached 0.5'
  ]
  during.finish()
  assert during.evals == [] and during.time_to_accuracy() is None


def test_without_a_target_nobody_waits():
  verdicts = FakeVerdicts(stops={2})
  during = eval_schedule.DuringTraining(
    eval_schedule.EvalSchedule(every_n_steps=2),
    lambda: None,
    lambda: 0,
    print,
    num_batches=10,
    evaluates=False,
    verdicts=verdicts,
  )
  assert not any(during.after_step(s) for s in range(1, 10))
  assert verdicts.calls == []


def test_schedule_and_target_are_run_flags_every_task_shares():
  p = params_lib.make_params(
    model='trivial',
    device='cpu',
    eval_during_training_every_n_steps=2,
    stop_at_top_1_accuracy=0.5,
  )
  flags = dict(fingerprint.run_flags(p))
  assert flags['stop_at_top_1_accuracy'] == 0.5
  assert flags['eval_during_training_every_n_steps'] == 2
  assert {
    'eval_during_training_every_n_epochs',
    'eval_during_training_at_specified_steps',
    'eval_during_training_at_specified_epochs',
  } <= set(flags)


@pytest.fixture(scope='module')
def verdict_server():
  """One in-process server: the keeper of the verdict variable."""
  import tensorflow as tf

  from tests.test_distributed import _free_ports

  (port,) = _free_ports(1)
  server = tf.distribute.Server(
    tf.train.ClusterSpec({'worker': ['127.0.0.1:%d' % port]}),
    job_name='worker',
    task_index=0,
    start=True,
  )
  return server.target


def make_verdicts(target, **waits):
  return verdicts_lib.Verdicts(
    target, ('worker', 0), ('worker', 0), '127.0.0.1:9', **waits
  )


def test_verdicts_continue_stop_and_steps_only_grow(verdict_server):
  chief = make_verdicts(verdict_server)
  other = make_verdicts(verdict_server, reach_wait_s=5.0)
  chief.publish(3, stop=False)
  assert other.wait(3) is False
  chief.publish(9, stop=True)
  # The chief went past step 6: it continued there; it stopped at 9.
  assert other.wait(6) is False
  assert other.wait(9) is True


def test_no_verdict_in_time_names_the_chief(verdict_server):
  import tensorflow as tf

  chief = make_verdicts(verdict_server)
  other = make_verdicts(verdict_server, reach_wait_s=0.3, eval_wait_s=0.6)
  chief.publish(20, stop=False)
  with pytest.raises(tf.errors.DeadlineExceededError) as e:
    other.wait(21)
  assert str(e.value.message) == (
    'no evaluation verdict from the chief worker:0 (127.0.0.1:9) for step 21 '
    'within 0.3s (it did not reach that step)'
  )
  chief.announce(21)  # evaluating: the longer bound applies
  start = time.monotonic()
  with pytest.raises(tf.errors.DeadlineExceededError) as e:
    other.wait(21)
  assert time.monotonic() - start >= 0.6
  assert 'its evaluation did not end' in e.value.message


# Three task processes for parameter_server take longer: slow suite only.
CLUSTER_MODES = [
  pytest.param(
    'parameter_server',
    ['--num_ps=1', '--no-controller'],
    id='parameter_server',
    marks=pytest.mark.slow,
  ),
  pytest.param(
    'collective_all_reduce',
    ['--num_ps=0', '--no-controller'],
    id='collective_all_reduce',
  ),
]


@pytest.mark.parametrize('mode,launcher_flags', CLUSTER_MODES)
def test_two_workers_stop_at_the_chiefs_step(
  mode, launcher_flags, separable_dir, tmp_path
):
  """Lenet on the separable set: every task exits 0 at the same step."""
  from tests.test_distributed import launch_ok

  out, records = launch_ok(
    tmp_path,
    2,
    [
      '--model=lenet',
      '--data_dir=%s' % separable_dir,
      '--device=cpu',
      '--batch_size=8',
      '--num_batches=200',
      '--num_warmup_batches=0',
      '--display_every=100',
      '--optimizer=sgd',
      '--init_learning_rate=0.001',
      '--nodistortions',
      '--variable_update=%s' % mode,
      '--eval_during_training_every_n_steps=3',
      '--num_eval_batches=2',
      '--stop_at_top_1_accuracy=0.99',
      '--peak_tflops_per_device=none',
    ],
    launcher_flags=launcher_flags,
    every_worker_reports=True,
  )
  by_task = {r['task']['task_index']: r for r in records}
  chief, other = by_task[0], by_task[1]
  steps = chief['steps_to_accuracy']
  assert steps is not None and steps < 200, out[-3000:]
  assert chief['end_step'] == other['end_step'] == steps
  assert len(chief['losses']) == len(other['losses']) == steps
  accuracies = [e['top_1_accuracy'] for e in chief['evals']]
  assert accuracies[-1] >= 0.99 and max(accuracies[:-1], default=0) < 0.99
  assert [e['checkpoint_step'] for e in chief['evals']] == list(
    range(3, steps + 1, 3)
  )
  assert chief['time_to_accuracy_sec'] > 0
  assert other['time_to_accuracy_sec'] is other['evals'] is None
  assert any(
    'worker:1' in x and 'Stopping, as the evaluation of worker:0' in x
    for x in out.splitlines()
  ), out[-3000:]
