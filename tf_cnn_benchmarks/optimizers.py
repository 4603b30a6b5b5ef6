"""Optimizers and learning-rate schedules, from explicit arguments."""

from __future__ import annotations

import dataclasses
from typing import Callable

import tensorflow as tf

tf1 = tf.compat.v1


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
  """Which optimizer, and its hyper-parameters (classic flag meanings)."""

  name: str = 'sgd'
  momentum: float = 0.9
  rmsprop_decay: float = 0.9
  rmsprop_momentum: float = 0.9
  rmsprop_epsilon: float = 1.0
  adam_beta1: float = 0.9
  adam_beta2: float = 0.999
  adam_epsilon: float = 1e-8

  @classmethod
  def from_params(cls, params) -> 'OptimizerConfig':
    hyper = {
      f.name: getattr(params, f.name)
      for f in dataclasses.fields(cls)
      if f.name != 'name'
    }
    return cls(name=params.optimizer, **hyper)


def optimizer_factory(
  config: OptimizerConfig, learning_rate
) -> Callable[[], tf1.train.Optimizer]:
  """A function making a fresh optimizer (one per apply site)."""

  def make():
    if config.name == 'sgd':
      return tf1.train.GradientDescentOptimizer(learning_rate)
    if config.name in ('momentum', 'plain_momentum'):
      # Classic --optimizer=momentum is Nesterov momentum.
      return tf1.train.MomentumOptimizer(
        learning_rate, config.momentum, use_nesterov=config.name == 'momentum'
      )
    if config.name == 'rmsprop':
      return tf1.train.RMSPropOptimizer(
        learning_rate,
        decay=config.rmsprop_decay,
        momentum=config.rmsprop_momentum,
        epsilon=config.rmsprop_epsilon,
      )
    if config.name == 'adam':
      return tf1.train.AdamOptimizer(
        learning_rate,
        beta1=config.adam_beta1,
        beta2=config.adam_beta2,
        epsilon=config.adam_epsilon,
      )
    raise ValueError('unknown optimizer %r' % config.name)

  return make


def exponential_decay(
  init_learning_rate: float,
  global_step,
  *,
  decay_steps: int,
  decay_factor: float,
  minimum: float = 0.0,
):
  """init_lr * factor^floor(step / decay_steps), floored at `minimum`."""
  lr = tf1.train.exponential_decay(
    init_learning_rate, global_step, decay_steps, decay_factor, staircase=True
  )
  return tf.maximum(lr, minimum) if minimum else lr


def learning_rate(
  params, model, global_step, global_batch_size: int, examples_per_epoch: int
):
  """The learning rate: --init_learning_rate (with decay) or the model's."""
  if params.init_learning_rate is None:
    return model.learning_rate(
      global_step, global_batch_size, examples_per_epoch
    )
  if params.num_epochs_per_decay > 0 and params.learning_rate_decay_factor > 0:
    steps_per_epoch = examples_per_epoch / global_batch_size
    return exponential_decay(
      params.init_learning_rate,
      global_step,
      decay_steps=max(1, int(steps_per_epoch * params.num_epochs_per_decay)),
      decay_factor=params.learning_rate_decay_factor,
      minimum=params.minimum_learning_rate,
    )
  return params.init_learning_rate


def gradient_clip(params):
  """The clip build_train_op applies to the reduced gradients, or None.

  --gradient_clip=c clips each element to [-c, c] (the classic meaning, on the
  reduced gradients before the update); --gradient_clip_norm=n clips their
  global norm.
  """
  if params.gradient_clip_norm is not None:
    return params.gradient_clip_norm
  if params.gradient_clip is None:
    return None
  limit = params.gradient_clip

  def clip_each_element(grads_and_vars):
    with tf.name_scope('clip_grads'):
      return [
        (tf.clip_by_value(g, -limit, limit), v) for g, v in grads_and_vars
      ]

  return clip_each_element
