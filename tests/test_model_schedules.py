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
  # 50000 / 64 -> 781 batches an epoch; /10 after epochs 150, 225 and 300
  # (classic's last drop, to 0.0001).
  model = models.create_model('densenet40_k12', 'cifar10')
  steps = [0, 781 * 150, 781 * 150 + 1, 781 * 225 + 1, 781 * 300]
  steps += [781 * 300 + 1, 781 * 400]
  assert _lr_at(model, steps, 64, 50000) == pytest.approx(
    [0.1, 0.1, 0.01, 0.001, 0.001, 0.0001, 0.0001]
  )


@pytest.mark.parametrize('name', ['official_resnet50', 'official_resnet18_v2'])
def test_official_resnet_learning_rate(name):
  # Classic's official models: 0.0125 per 32 images (0.1 at a global batch
  # of 256, 0.4 at 1024), no warm-up, /10 after epochs 30, 60, 80, 90.
  model = models.create_model(name, 'imagenet')
  per_epoch = 1281167 / 1024
  steps = [0, 1, int(5 * per_epoch), int(30 * per_epoch)]
  steps += [int(30 * per_epoch) + 1, int(90 * per_epoch) + 1]
  assert _lr_at(model, steps, 1024, 1281167) == pytest.approx(
    [0.4, 0.4, 0.4, 0.4, 0.04, 0.00004], rel=1e-6
  )
  assert _lr_at(model, [0], 256, 1281167) == pytest.approx([0.1], rel=1e-6)
  assert model.learning_rate_warmup(1024, 1281167) is None


def test_alexnet_cifar_learning_rate():
  # Divided by 10 every 100 epochs: 100 * 50000 // 128 = 39062 steps.
  model = models.create_model('alexnet', 'cifar10')
  assert _lr_at(
    model, [0, 39061, 39062, 2 * 39062], 128, 50000
  ) == pytest.approx([0.1, 0.1, 0.01, 0.001])
