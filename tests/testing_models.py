"""Tiny models for exact tests, registered on demand under test_* names."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

import models

tf1 = tf.compat.v1

LINEAR_IMAGE_SIZE = 2  # 2x2x3 images: 12 features
LINEAR_DATASET = 'cifar10'  # 10 classes


def linear_initial_weights(num_features: int, num_classes: int):
  """Initial (weights, biases) of test_linear: a fixed, asymmetric pattern."""
  idx = np.arange(num_features * num_classes, dtype=np.float64)
  weights = 0.05 * np.sin(idx).reshape(num_features, num_classes)
  biases = 0.01 * np.cos(np.arange(num_classes, dtype=np.float64))
  return weights, biases


class LinearModel:
  """logits = flatten(images) @ W + b, with known initial values."""

  name = 'test_linear'
  dataset = LINEAR_DATASET
  image_size = LINEAR_IMAGE_SIZE
  default_batch_size = 4
  default_learning_rate = 0.1

  def build(
    self,
    images,
    num_classes,
    *,
    is_training=True,
    data_format='NHWC',
    compute_dtype=tf.float32,
    seed=1234,
  ):
    del is_training, seed
    if data_format == 'NCHW':  # flatten in NHWC order whatever the layout
      images = tf.transpose(images, [0, 2, 3, 1])
    flat = tf.reshape(images, [-1, int(np.prod(images.shape[1:]))])
    w0, b0 = linear_initial_weights(int(flat.shape[1]), num_classes)
    w = tf1.get_variable('linear/weights', initializer=w0.astype(np.float32))
    b = tf1.get_variable('linear/biases', initializer=b0.astype(np.float32))
    logits = tf.matmul(tf.cast(flat, compute_dtype), tf.cast(w, compute_dtype))
    logits += tf.cast(b, compute_dtype)
    return models.ModelOutput(logits=logits)

  def learning_rate(self, global_step, global_batch_size, examples_per_epoch):
    del global_step, global_batch_size, examples_per_epoch
    return self.default_learning_rate


def ensure_registered() -> None:
  """Registers the test models once per process."""
  if 'test_linear' not in models.names(LINEAR_DATASET):
    models.register('test_linear', LINEAR_DATASET, LinearModel)


INJECT_NAME = 'inject_to_logits'


class InjectableLinearModel(LinearModel):
  """test_linear whose logits get a fed value added: feed inf to poison a step.

  Each tower has its own placeholder (named INJECT_NAME in the tower's name
  scope), defaulting to 0.
  """

  name = 'test_injectable'

  def build(self, images, num_classes, **kwargs):
    out = super().build(images, num_classes, **kwargs)
    inject = tf1.placeholder_with_default(
      tf.constant(0.0, out.logits.dtype), [], name=INJECT_NAME
    )
    return models.ModelOutput(logits=out.logits + inject)


def ensure_injectable_registered() -> None:
  """Registers test_injectable once per process."""
  if 'test_injectable' not in models.names(LINEAR_DATASET):
    models.register('test_injectable', LINEAR_DATASET, InjectableLinearModel)


if __name__ == '__main__':
  # `python -m tests.testing_models FLAGS`: the benchmark's command line with
  # the test models registered (for tests that need a separate process).
  import sys  # pylint: disable=g-import-not-at-top

  from tf_cnn_benchmarks import __main__ as cli  # pylint: disable=g-import-not-at-top

  ensure_registered()
  sys.exit(cli.main(sys.argv))
