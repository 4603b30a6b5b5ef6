"""What the step table reports: training accuracy, the loss type, the L2
term as one op, the EWMA images/sec; each checked against numbers."""

import io
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests import testing_models
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.inputs import inputs
from tf_cnn_benchmarks.reporting import timing
from tf_cnn_benchmarks.training import towers

tf1 = tf.compat.v1

B = 32  # per tower
CLASSES = 10
SHAPE = [testing_models.LINEAR_IMAGE_SIZE] * 2 + [3]


def numpy_in_top_k(logits, labels, k):
  """Fraction of rows whose label's logit is among the k largest."""
  order = np.argsort(-logits, axis=1)[:, :k]
  return float(np.mean([label in row for row, label in zip(order, labels)]))


def synthetic_batch(count):
  """The first `count` synthetic examples of a run (seed 1234), as numpy."""
  with tf.Graph().as_default(), tf1.Session() as sess:
    images, labels = inputs.synthetic_examples(1234, 0, count, SHAPE, CLASSES)
    return sess.run((images, labels))


def initial_logits(images):
  """test_linear's logits before any update."""
  flat = images.reshape(len(images), -1).astype(np.float64)
  weights, biases = testing_models.linear_initial_weights(
    flat.shape[1], CLASSES
  )
  return flat @ weights + biases, weights, biases


def build_linear_tower(images, labels, **kw):
  testing_models.ensure_registered()
  import models  # pylint: disable=g-import-not-at-top

  model = models.create_model('test_linear', 'cifar10')
  return towers.build_tower(
    model,
    tf.constant(images),
    tf.constant(labels),
    num_classes=CLASSES,
    data_format='NHWC',
    compute_dtype=tf.float32,
    seed=1234,
    weight_decay=kw.pop('weight_decay', 0.01),
    trainable_variables=tf1.trainable_variables,
    **kw,
  )


def test_tower_accuracy_is_numpy_top_k_of_its_logits():
  rng = np.random.default_rng(7)
  images = rng.uniform(-1, 1, [64] + SHAPE).astype(np.float32)
  labels = rng.integers(0, CLASSES, 64).astype(np.int32)
  with tf.Graph().as_default():
    tower = build_linear_tower(images, labels, accuracy=True)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      logits, correct = sess.run((tower.logits, tower.correct))
  expected = [numpy_in_top_k(logits, labels, k) for k in (1, 5)]
  np.testing.assert_allclose(np.array(correct) / 64, expected, rtol=1e-6)
  assert 0 < expected[0] < expected[1] < 1  # a batch that tells them apart


def test_base_loss_plus_l2_is_total_loss_and_one_l2_op_gives_the_same():
  rng = np.random.default_rng(3)
  images = rng.uniform(-1, 1, [16] + SHAPE).astype(np.float32)
  labels = rng.integers(0, CLASSES, 16).astype(np.int32)
  _, weights, biases = initial_logits(images)
  l2 = 0.5 * (np.sum(weights**2) + np.sum(biases**2))  # weight decay 1
  got = {}
  for single in (False, True):
    with tf.Graph().as_default() as graph:
      tower = build_linear_tower(
        images, labels, single_l2_loss_op=single, weight_decay=1.0
      )
      with tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        got[single] = sess.run((tower.loss, tower.base_loss))
      l2_ops = [op for op in graph.get_operations() if op.type == 'L2Loss']
      assert len(l2_ops) == (1 if single else 2)
  total, base = got[False]
  # float32: the difference of two numbers near 2.3 is exact to ~2.4e-7.
  np.testing.assert_allclose(total - base, l2, atol=5e-7)
  np.testing.assert_allclose(got[True], got[False], rtol=1e-6)


def run(tmp_path, name='r.jsonl', **kw):
  testing_models.ensure_registered()
  result_file = tmp_path / name
  p = params_lib.make_params(
    **{
      'model': 'test_linear',
      'data_name': 'cifar10',
      'device': 'cpu',
      'batch_size': B,
      'num_batches': 3,
      'num_warmup_batches': 1,
      'display_every': 1,
      'optimizer': 'sgd',
      'init_learning_rate': 0.5,
      'weight_decay': 0.01,
      'peak_tflops_per_device': 'none',
      'result_file': str(result_file),
      **kw,
    }
  )
  out = io.StringIO()
  benchmark_cnn.run_benchmark(p, out=out)
  return json.loads(result_file.read_text().splitlines()[-1]), out.getvalue()


def test_training_accuracy_in_the_results_line_and_table(tmp_path):
  # Two towers hold examples [0, B) and [B, 2B): the step's accuracy is over
  # both. The first step sees the initial weights.
  record, out = run(
    tmp_path,
    num_gpus=2,
    variable_update='replicated',
    print_training_accuracy=True,
  )
  images, labels = synthetic_batch(2 * B)
  logits, _, _ = initial_logits(images)
  for k, key in ((1, 'top_1_accuracies'), (5, 'top_5_accuracies')):
    assert len(record[key]) == 4
    assert record[key][0] == pytest.approx(numpy_in_top_k(logits, labels, k))
  assert 'Step\tImg/sec\ttotal_loss\ttop_1_accuracy\ttop_5_accuracy' in out
  rows = [line.split('\t') for line in out.splitlines() if line[:2] == '3\t']
  assert float(rows[0][3]) == pytest.approx(
    record['top_1_accuracies'][-1], abs=5e-4
  )


def test_no_accuracy_unless_asked(tmp_path):
  record, out = run(tmp_path)
  assert record['top_1_accuracies'] is None
  assert record['loss_type'] == 'total_loss'
  assert 'top_1_accuracy' not in out


def test_forward_only_reports_accuracy_as_classic(tmp_path):
  record, out = run(tmp_path, forward_only=True)
  images, labels = synthetic_batch(B)
  logits, _, _ = initial_logits(images)
  expected = numpy_in_top_k(logits, labels, 5)
  np.testing.assert_allclose(record['top_5_accuracies'], [expected] * 4)
  assert '\ttop_1_accuracy\ttop_5_accuracy' in out


def test_base_loss_report_is_total_minus_l2(tmp_path):
  total, _ = run(tmp_path, 'total.jsonl')
  base, out = run(tmp_path, 'base.jsonl', loss_type_to_report='base_loss')
  assert base['loss_type'] == 'base_loss'
  assert 'Step\tImg/sec\tbase_loss' in out
  # The first step's loss is at the initial weights, whose L2 term is known.
  images, _ = synthetic_batch(B)
  _, weights, biases = initial_logits(images)
  l2 = 0.01 * 0.5 * (np.sum(weights**2) + np.sum(biases**2))
  np.testing.assert_allclose(
    total['losses'][0] - base['losses'][0], l2, rtol=1e-3, atol=5e-7
  )
  # Reporting changes nothing else: the learning rates and what is trained.
  assert total['learning_rates'] == base['learning_rates']


def test_single_l2_loss_op_trains_the_same(tmp_path):
  one, _ = run(tmp_path, 'one.jsonl', single_l2_loss_op=True)
  many, _ = run(tmp_path, 'many.jsonl')
  np.testing.assert_allclose(one['losses'], many['losses'], rtol=1e-6)


def test_summaries_use_the_reported_loss_and_accuracy(tmp_path):
  train_dir = tmp_path / 'train'
  run(
    tmp_path,
    train_dir=str(train_dir),
    summary_verbosity=1,
    save_summaries_steps=1,
    loss_type_to_report='base_loss',
    print_training_accuracy=True,
  )
  (events,) = [f for f in os.listdir(train_dir) if 'tfevents' in f]
  tags = set()
  for event in tf1.train.summary_iterator(str(train_dir / events)):
    tags.update(value.tag for value in event.summary.value)
  assert {
    'base_loss',
    'top_1_accuracy',
    'top_5_accuracy',
    'learning_rate',
  } <= tags
  assert 'total_loss' not in tags


def test_ewma_images_per_sec_is_the_classic_formula():
  # Times 1, 2, 4 s, weight 0.5: weights 0.25, 0.5, 1 (newest); weighted
  # mean time (0.25 + 1 + 4) / 1.75 = 3 s -> 8 / 3 images/sec.
  ewma = timing.speed_summary(8, [1.0, 2.0, 4.0], ewma=0.5)
  plain = timing.speed_summary(8, [1.0, 2.0, 4.0])
  assert ewma.mean == pytest.approx(8 / 3)
  assert plain.mean == pytest.approx(8 * 3 / 7)
  assert (ewma.uncertainty, ewma.jitter) == (plain.uncertainty, plain.jitter)
  # Weight 1: the newest step alone.
  assert timing.speed_summary(8, [1.0, 2.0, 4.0], ewma=1.0).mean == 2.0


def test_display_perf_ewma_reaches_the_table(tmp_path, monkeypatch):
  seen, shown = [], []
  real = timing.speed_summary

  def spy(images, times, ewma=None):
    seen.append(ewma)
    shown.append(real(images, times, ewma))
    return shown[-1]

  monkeypatch.setattr(timing, 'speed_summary', spy)
  _, out = run(tmp_path, display_perf_ewma=0.25)
  assert seen == [0.25] * 3  # a row per step
  (row,) = [line for line in out.splitlines() if line.startswith('3\t')]
  assert row.split('\t')[1] == str(shown[-1])


def test_the_report_keys_are_documented(tmp_path):
  from tests.test_timing_results import documented_keys

  # The step report's keys, in the table generated from results/schema.json.
  report_keys = {
    'loss_type',
    'learning_rates',
    'top_1_accuracies',
    'top_5_accuracies',
  }
  keys = documented_keys(
    '### Keys added by real data, checkpoints and evaluation'
  )
  record, _ = run(tmp_path)
  assert report_keys <= set(keys) and report_keys <= set(record), set(keys)
