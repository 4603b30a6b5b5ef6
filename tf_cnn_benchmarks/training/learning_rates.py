"""Learning-rate schedules with the classic flags' meanings.

The schedule of a training run, from the classic flags:

  --piecewise_learning_rate_schedule='LR0;E1;LR1;...;En;LRn': LR0 until epoch
    E1, LR1 from E1 until E2, ...; LRn from En on. Epoch E starts at global
    step int(E * steps_per_epoch) (classic: a boundary of int(E * steps) - 1
    for tf.train.piecewise_constant, whose value changes after it).
  --init_learning_rate [--num_epochs_per_decay --learning_rate_decay_factor]:
    init * factor ** floor(step / int(steps_per_epoch * epochs_per_decay)).
  neither: the model's own schedule; --resnet_base_lr replaces the base (the
    rate at a global batch of 256) of the ImageNet ResNets' schedule.
  --minimum_learning_rate floors any of these (classic: the decay only),
    but never a warm-up ramp: neither the flags' below nor the one the
    ImageNet ResNets' own schedule opens with (classic floored neither).
  --num_learning_rate_warmup_epochs=W (with --init_learning_rate or a
    piecewise schedule): init * step / int(W * steps_per_epoch) before that
    step, where init is --init_learning_rate or LR0 (not floored, as classic).

steps_per_epoch is examples_per_epoch / images_per_step (a float), where
images_per_step are the images one increment of the global step stands for:
every worker's batch when the workers step together (an epoch counts the
whole cluster's images), one worker's when each moves the shared step alone.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Optional

import tensorflow as tf

from models import resnet
from models import schedules as model_schedules
from tf_cnn_benchmarks.config import schedules

tf1 = tf.compat.v1


@dataclasses.dataclass(frozen=True)
class ScheduleConfig:
  """The schedule flags of a run (classic meanings, see the module doc)."""

  init_learning_rate: Optional[float] = None
  num_epochs_per_decay: float = 0
  learning_rate_decay_factor: float = 0
  minimum_learning_rate: float = 0
  piecewise: Optional[schedules.Piecewise] = None
  warmup_epochs: float = 0
  resnet_base_lr: Optional[float] = None

  @classmethod
  def from_params(cls, params) -> 'ScheduleConfig':
    text = params.piecewise_learning_rate_schedule
    return cls(
      init_learning_rate=params.init_learning_rate,
      num_epochs_per_decay=params.num_epochs_per_decay,
      learning_rate_decay_factor=params.learning_rate_decay_factor,
      minimum_learning_rate=params.minimum_learning_rate,
      piecewise=schedules.parse_piecewise(text) if text else None,
      warmup_epochs=params.num_learning_rate_warmup_epochs,
      resnet_base_lr=params.resnet_base_lr,
    )

  @property
  def warmup_target(self) -> Optional[float]:
    """The rate a --num_learning_rate_warmup_epochs ramp climbs to."""
    if self.init_learning_rate is not None:
      return self.init_learning_rate
    return self.piecewise.values[0] if self.piecewise else None


def uses_resnet_base_lr(model) -> bool:
  """Whether the model's own schedule is built on --resnet_base_lr."""
  return isinstance(model, resnet.ResNet)


def _step(global_step):
  return tf.cast(global_step, tf.int64)


def _own_schedule_model(config, model):
  """The model whose own schedule runs: --resnet_base_lr as its base."""
  if config.resnet_base_lr is not None and uses_resnet_base_lr(model):
    model = copy.copy(model)  # the same schedule on another base
    model.default_learning_rate = config.resnet_base_lr
  return model


def _runs_own_schedule(config) -> bool:
  return config.piecewise is None and config.init_learning_rate is None


def _schedule(config, model, global_step, images_per_step, examples):
  """The schedule before the warm-up ramp (and before the floor)."""
  steps_per_epoch = examples / images_per_step
  if config.piecewise is not None:
    return model_schedules.piecewise_constant(
      global_step,
      config.piecewise.boundaries(steps_per_epoch),
      list(config.piecewise.values),
    )
  if config.init_learning_rate is None:
    return _own_schedule_model(config, model).learning_rate(
      global_step, images_per_step, examples
    )
  if config.num_epochs_per_decay > 0 and config.learning_rate_decay_factor > 0:
    return model_schedules.staircase_exponential_decay(
      global_step,
      config.init_learning_rate,
      max(1, int(steps_per_epoch * config.num_epochs_per_decay)),
      config.learning_rate_decay_factor,
    )
  return config.init_learning_rate


def _warmup_ramp(config, model, images_per_step, examples):
  """(steps, peak) of the ramp that opens the schedule, or None.

  The flags' ramp (--num_learning_rate_warmup_epochs), or the one the
  model's own schedule opens with (the ImageNet ResNets' 5 epochs).
  """
  target = config.warmup_target
  if config.warmup_epochs > 0 and target is not None:
    return int(examples / images_per_step * config.warmup_epochs), target
  if not _runs_own_schedule(config):
    return None
  own_warmup = getattr(model, 'learning_rate_warmup', None)
  if own_warmup is None:  # a duck-typed model without the hook
    return None
  return _own_schedule_model(config, model).learning_rate_warmup(
    images_per_step, examples
  )


def learning_rate(
  config: ScheduleConfig,
  model,
  global_step,
  images_per_step: int,
  examples_per_epoch: int,
) -> tf.Tensor:
  """The learning rate of the step `global_step` is at: a float32 scalar.

  images_per_step: the images one increment of global_step stands for.
  """
  # Not 'learning_rate': the summary of that name would become learning_rate_1.
  with tf1.name_scope('learning_rate_schedule'):
    lr = tf.cast(
      _schedule(
        config, model, global_step, images_per_step, examples_per_epoch
      ),
      tf.float32,
    )
    if config.minimum_learning_rate:
      lr = tf.maximum(lr, tf.constant(config.minimum_learning_rate, tf.float32))
    # The ramp goes on after the floor: a warm-up starts from 0 whatever
    # the minimum, as in the classic harness.
    ramp = _warmup_ramp(config, model, images_per_step, examples_per_epoch)
    if ramp is not None and ramp[0] > 0:
      warmup_steps, peak = ramp
      step = _step(global_step)
      rising = peak * tf.cast(step, tf.float32) / float(warmup_steps)
      lr = tf.where(step < warmup_steps, rising, lr)
    return tf.identity(lr, name='value')


def images_per_global_step(
  batch_size: int,
  towers_per_worker: int,
  num_graphs: int,
  each_worker_moves_step: bool,
) -> int:
  """The images one increment of the global step stands for.

  num_graphs: graphs stepping together (workers, or 1 for one controller
  graph); each_worker_moves_step: every worker applies its own update and
  moves the shared global step alone (asynchronous ps training).
  """
  if each_worker_moves_step:
    return batch_size * towers_per_worker
  return batch_size * towers_per_worker * num_graphs
