"""Learning-rate schedule pieces, as plain graph ops on the global step.

Written on `tf` math ops rather than the legacy `tf.compat.v1.train`
decay helpers so they have no Keras dependency.
"""

import tensorflow as tf


def _step(global_step):
  return tf.cast(global_step, tf.int64)


def piecewise_constant(global_step, boundaries, values):
  """`values[i]` while `boundaries[i-1] < step <= boundaries[i]`.

  `len(values) == len(boundaries) + 1`; boundaries are steps, ascending.
  (Same convention as tf.compat.v1.train.piecewise_constant.)
  """
  if len(values) != len(boundaries) + 1:
    raise ValueError('need exactly one more value than boundaries')
  step = _step(global_step)
  lr = tf.constant(values[0], tf.float32)
  for boundary, value in zip(boundaries, values[1:]):
    lr = tf.where(step > int(boundary), tf.constant(value, tf.float32), lr)
  return lr


def epoch_steps(
  global_step, examples_per_epoch, global_batch_size, epochs, values
):
  """`piecewise_constant` with its boundaries after each of `epochs`.

  An epoch counts whole batches (the classic CIFAR-10 schedules round
  examples_per_epoch / global_batch_size down before multiplying).
  """
  batches_per_epoch = int(examples_per_epoch / global_batch_size)
  boundaries = [batches_per_epoch * e for e in epochs]
  return piecewise_constant(global_step, boundaries, values)


def staircase_exponential_decay(global_step, initial, decay_steps, factor):
  """`initial * factor ** floor(step / decay_steps)`."""
  step = _step(global_step)
  exponent = tf.cast(step // max(1, int(decay_steps)), tf.float32)
  return tf.constant(initial, tf.float32) * tf.pow(
    tf.constant(factor, tf.float32), exponent
  )


def linear_warmup(global_step, warmup_steps, peak, after):
  """Ramps linearly `0 -> peak` over `warmup_steps`, then returns `after`."""
  if warmup_steps <= 0:
    return after
  step = _step(global_step)
  ramp = peak * tf.cast(step, tf.float32) / float(warmup_steps)
  return tf.where(step < int(warmup_steps), ramp, after)
