"""Models: each model's own learning-rate schedule, step by step."""

import os

# NCHW convolutions / pooling on CPU need the oneDNN kernels; must be set
# before TensorFlow is imported.
os.environ.setdefault('TF_ENABLE_ONEDNN_OPTS', '1')

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import models  # noqa: E402

tf1 = tf.compat.v1


# --------------------------------------------------------------------------
# Learning-rate schedules


def _lr_at(model, steps, global_batch_size, examples_per_epoch):
  graph = tf.Graph()
  with graph.as_default():
    step = tf1.placeholder(tf.int64, [])
    lr = model.learning_rate(step, global_batch_size, examples_per_epoch)
    lr = tf.convert_to_tensor(lr)
  assert lr.dtype == tf.float32 and lr.shape.rank == 0
  with tf1.Session(graph=graph) as sess:
    return [float(sess.run(lr, {step: s})) for s in steps]


def test_constant_learning_rates():
  for name, dataset in [
    ('trivial', 'imagenet'),
    ('trivial', 'cifar10'),
    ('lenet', 'imagenet'),
    ('alexnet', 'imagenet'),
  ]:
    model = models.create_model(name, dataset)
    assert model.learning_rate(tf.constant(10, tf.int64), 32, 1000) == 0.005


def test_cifar_resnet_learning_rate():
  # 50000 / 128 -> 390 batches an epoch; boundaries at epochs 82, 123, 300.
  model = models.create_model('resnet20', 'cifar10')
  steps = [0, 390 * 82, 390 * 82 + 1, 390 * 123 + 1, 390 * 300, 390 * 300 + 1]
  assert _lr_at(model, steps, 128, 50000) == pytest.approx(
    [0.1, 0.1, 0.01, 0.001, 0.001, 0.0002]
  )


def test_imagenet_resnet_learning_rate():
  model = models.create_model('resnet50_v1.5', 'imagenet')
  # Global batch 1024 -> peak 0.128 * 4; 1251.1 batches an epoch.
  per_epoch = 1281167 / 1024
  warmup = int(5 * per_epoch)
  steps = [
    0,
    warmup // 2,
    warmup,
    int(30 * per_epoch),
    int(30 * per_epoch) + 1,
    int(90 * per_epoch) + 1,
  ]
  expected = [
    0.0,
    0.512 * (warmup // 2) / warmup,
    0.512,
    0.512,
    0.0512,
    0.0000512,
  ]
  assert _lr_at(model, steps, 1024, 1281167) == pytest.approx(
    expected, rel=1e-5
  )


def test_densenet_learning_rate():
  # 50000 / 64 -> 781 batches an epoch; /10 after epochs 150 and 225.
  model = models.create_model('densenet40_k12', 'cifar10')
  steps = [0, 781 * 150, 781 * 150 + 1, 781 * 225 + 1]
  assert _lr_at(model, steps, 64, 50000) == pytest.approx(
    [0.1, 0.1, 0.01, 0.001]
  )


def test_alexnet_cifar_learning_rate():
  # Divided by 10 every 100 epochs: 100 * 50000 // 128 = 39062 steps.
  model = models.create_model('alexnet', 'cifar10')
  assert _lr_at(
    model, [0, 39061, 39062, 2 * 39062], 128, 50000
  ) == pytest.approx([0.1, 0.1, 0.01, 0.001])
