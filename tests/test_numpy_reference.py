"""Losses of the local managers against a numpy simulation of the same training.

For a linear model, every optimizer, parameter_server and replicated with 1, 2
and 3 towers must produce the losses a float64 numpy simulation of full-batch
training on the same global batch produces (gradients are the mean over towers).
"""

import numpy as np
import pytest
import tensorflow as tf

from tests import helpers
from tests import testing_models
from tests.helpers import LINEAR_ON_CPU
from tf_cnn_benchmarks.inputs import inputs

tf1 = tf.compat.v1

SEED = 1234
PER_DEVICE_BATCH = 4
STEPS = 5
WEIGHT_DECAY = 0.01
NUM_CLASSES = 10
LEARNING_RATES = {
  'sgd': 0.5,
  'momentum': 0.1,
  'plain_momentum': 0.1,
  'rmsprop': 0.05,
  'adam': 0.05,
}


def synthetic_global_batch(count):
  size = testing_models.LINEAR_IMAGE_SIZE
  with tf.Graph().as_default():
    images, labels = inputs.synthetic_examples(
      SEED, 0, count, [size, size, 3], NUM_CLASSES
    )
    with tf1.Session() as sess:
      return sess.run([images, labels])


class NumpyOptimizer:
  """The update rules of the tf.compat.v1.train optimizers, in float64."""

  def __init__(self, name, lr):
    self.name, self.lr, self.t, self.state = name, lr, 0, {}

  def step(self, key, var, grad):
    s = self.state.setdefault(
      key,
      {
        'm': np.zeros_like(var),
        'v': np.zeros_like(var),
        'ms': np.ones_like(var),
      },
    )  # v1 RMSProp: ms starts at 1
    if self.name == 'sgd':
      return var - self.lr * grad
    if self.name == 'momentum':  # Nesterov, the classic meaning
      s['m'] = 0.9 * s['m'] + grad
      return var - self.lr * (grad + 0.9 * s['m'])
    if self.name == 'plain_momentum':
      s['m'] = 0.9 * s['m'] + grad
      return var - self.lr * s['m']
    if self.name == 'rmsprop':
      s['ms'] = 0.9 * s['ms'] + 0.1 * grad * grad
      s['m'] = 0.9 * s['m'] + self.lr * grad / np.sqrt(s['ms'] + 1.0)
      return var - s['m']
    if self.name == 'adam':
      b1, b2, eps = 0.9, 0.999, 1e-8
      lr_t = self.lr * np.sqrt(1 - b2**self.t) / (1 - b1**self.t)
      s['m'] = b1 * s['m'] + (1 - b1) * grad
      s['v'] = b2 * s['v'] + (1 - b2) * grad * grad
      return var - lr_t * s['m'] / (np.sqrt(s['v']) + eps)
    raise ValueError(self.name)


def simulate(optimizer, num_towers):
  images, labels = synthetic_global_batch(PER_DEVICE_BATCH * num_towers)
  x = images.reshape(len(images), -1).astype(np.float64)
  onehot = np.eye(NUM_CLASSES)[labels]
  w, b = testing_models.linear_initial_weights(x.shape[1], NUM_CLASSES)
  opt = NumpyOptimizer(optimizer, LEARNING_RATES[optimizer])
  losses = []
  for _ in range(STEPS):
    logits = x @ w + b
    logits -= logits.max(axis=1, keepdims=True)
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    xent = -np.mean(np.log((probs * onehot).sum(axis=1)))
    losses.append(xent + WEIGHT_DECAY * 0.5 * ((w * w).sum() + (b * b).sum()))
    dlogits = (probs - onehot) / len(x)
    grad_w = x.T @ dlogits + WEIGHT_DECAY * w
    grad_b = dlogits.sum(axis=0) + WEIGHT_DECAY * b
    opt.t += 1
    w, b = opt.step('w', w, grad_w), opt.step('b', b, grad_b)
  return np.array(losses)


def run_losses(optimizer, num_towers, variable_update):
  testing_models.ensure_registered()
  result = helpers.run_in_process(
    **LINEAR_ON_CPU,
    num_gpus=num_towers,
    batch_size=PER_DEVICE_BATCH,
    variable_update=variable_update,
    optimizer=optimizer,
    init_learning_rate=LEARNING_RATES[optimizer],
    weight_decay=WEIGHT_DECAY,
    num_batches=STEPS - 1,
    num_warmup_batches=1,
    tf_random_seed=SEED,
  )
  return np.array(result.losses)


@pytest.mark.parametrize(
  'optimizer', ['sgd', 'momentum', 'plain_momentum', 'rmsprop', 'adam']
)
@pytest.mark.parametrize('variable_update', ['parameter_server', 'replicated'])
@pytest.mark.parametrize('num_towers', [1, 2, 3])
def test_losses_match_numpy(optimizer, variable_update, num_towers):
  expected = simulate(optimizer, num_towers)
  actual = run_losses(optimizer, num_towers, variable_update)
  assert len(actual) == STEPS
  # The losses must actually move, or the comparison proves nothing.
  assert abs(expected[-1] - expected[0]) > 1e-3
  np.testing.assert_allclose(actual, expected, rtol=1e-5)
