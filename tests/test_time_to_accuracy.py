"""--stop_at_top_1_accuracy: train until an evaluation reaches the target."""

import io
import json
import types

import pytest

from scripts import make_fake_data
from tests import testing_models
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks import eval_schedule
from tf_cnn_benchmarks import params as params_lib


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
    model='test_linear',
    data_name='cifar10',
    device='cpu',
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
  """Two classes, each one solid grey level (black / white)."""
  path = str(tmp_path_factory.mktemp('separable'))
  make_fake_data.write_imagenet(
    path,
    num_train=64,
    num_validation=16,
    num_classes=2,
    num_shards=2,
    image_size=40,
    separable=True,
    seed=2,
  )
  return path


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
