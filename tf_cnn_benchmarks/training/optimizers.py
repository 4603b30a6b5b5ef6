"""Optimizers, the learning rate (learning_rates.py) and gradient clipping."""

from __future__ import annotations

import dataclasses
from typing import Callable

import tensorflow as tf

from tf_cnn_benchmarks.training import learning_rates

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
) -> Callable[..., tf1.train.Optimizer]:
  """A function making a fresh optimizer (one per apply site).

  make(learning_rate=T) reads the rate from T instead: a copy of the rate on
  the device that applies (see hybrid's ps-held updates).
  """
  default_rate = learning_rate

  def make(learning_rate=None):
    if learning_rate is None:
      learning_rate = default_rate
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


def learning_rate(
  params, model, global_step, images_per_step: int, examples_per_epoch: int
) -> tf.Tensor:
  """The run's learning rate (float32 scalar); see learning_rates.py.

  images_per_step: the images one increment of global_step stands for.
  """
  return learning_rates.learning_rate(
    learning_rates.ScheduleConfig.from_params(params),
    model,
    global_step,
    images_per_step,
    examples_per_epoch,
  )


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
