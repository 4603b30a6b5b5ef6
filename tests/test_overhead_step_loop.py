"""Issue 27: a step's fixed cost (what the step loop does besides the step).

The step's fetches are parsed once: each step is one call of a callable the
session made before the first step, so no timed step goes through
Session.run's fetch handling. Checked by counting the session's calls, not
by timing.
"""

import io

import pytest
import tensorflow as tf

from tests import testing_models
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.training import step_loop

tf1 = tf.compat.v1


class CountingSession(tf1.Session):
  """A Session that counts its run() and make_callable() calls."""

  made = []  # every instance, so the test finds the run's session

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.runs = 0
    self.callables = 0
    CountingSession.made.append(self)

  def run(self, *args, **kwargs):
    self.runs += 1
    return super().run(*args, **kwargs)

  def make_callable(self, *args, **kwargs):
    self.callables += 1
    return super().make_callable(*args, **kwargs)


def counted_run(monkeypatch, num_batches, **kw):
  """(session runs, callables made, result) of a short test_linear run."""
  testing_models.ensure_registered()
  CountingSession.made = []
  monkeypatch.setattr(tf1, 'Session', CountingSession)
  fields = dict(
    model='test_linear',
    data_name='cifar10',
    device='cpu',
    num_gpus=1,
    variable_update='parameter_server',
    batch_size=4,
    num_batches=num_batches,
    num_warmup_batches=2,
    display_every=1,
    peak_tflops_per_device='none',
  )
  fields.update(kw)
  result = benchmark_cnn.run_benchmark(
    params_lib.make_params(**fields), out=io.StringIO()
  )
  (sess,) = CountingSession.made
  return sess.runs, sess.callables, result


@pytest.mark.parametrize('print_training_accuracy', [False, True])
def test_steps_run_through_callables_made_once(
  monkeypatch, print_training_accuracy
):
  few = counted_run(
    monkeypatch, 3, print_training_accuracy=print_training_accuracy
  )
  many = counted_run(
    monkeypatch, 9, print_training_accuracy=print_training_accuracy
  )
  # Six more steps, not one more Session.run nor one more callable.
  assert many[0] == few[0]
  assert many[1] == few[1] == 1
  assert many[2]['num_steps'] == 9


def test_summarised_steps_use_their_own_callable(monkeypatch, tmp_path):
  runs, callables, _ = counted_run(
    monkeypatch,
    6,
    train_dir=str(tmp_path),
    summary_verbosity=1,
    save_summaries_steps=2,
  )
  assert callables == 2  # the step's, and the step's with the summary
  more_runs, _, _ = counted_run(
    monkeypatch,
    12,
    train_dir=str(tmp_path / 'b'),
    summary_verbosity=1,
    save_summaries_steps=2,
  )
  assert more_runs == runs


def test_step_fetches_name_every_value():
  graph = tf.Graph()
  with graph.as_default():
    a, b = tf.constant(1.0), tf.constant(2.0)
  fetches = step_loop.StepFetches(('step', 'loss'), [a, b])
  assert fetches.named([None, 2.0]) == {'step': None, 'loss': 2.0}
  assert fetches.named([None, 2.0, b'summary']) == {
    'step': None,
    'loss': 2.0,
    'summary': b'summary',
  }
