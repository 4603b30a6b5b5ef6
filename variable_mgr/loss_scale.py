"""fp16 loss scaling and the inf/nan check, shared by every variable manager.

Towers differentiate `loss * scale` so that small float16 gradients do not
flush to zero; the manager reduces those scaled gradients, and this module
unscales them before the update. With automatic scaling, the reduced
gradients of every tower are checked for inf/nan after the reduction: if any
is not finite the whole update is skipped on every replica (no variable,
optimizer slot or global step moves) and the scale halves; after
`increase_every_n` finite steps in a row it doubles.

The scale and its counters are global variables, so checkpoints save them.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import tensorflow as tf

tf1 = tf.compat.v1

DEFAULT_FP16_LOSS_SCALE = 128.0


@dataclasses.dataclass(frozen=True)
class LossScaleConfig:
  """How the loss is scaled: initial value, automatic or fixed."""

  initial: float = DEFAULT_FP16_LOSS_SCALE
  auto: bool = False
  increase_every_n: int = 1000

  @classmethod
  def from_params(cls, params) -> 'LossScaleConfig | None':
    """The loss scaling a run asks for, or None (no fp16, nothing to scale)."""
    if not params.use_fp16:
      return None
    initial = params.fp16_loss_scale
    return cls(
      initial=DEFAULT_FP16_LOSS_SCALE if initial is None else initial,
      auto=params.fp16_enable_auto_loss_scale,
      increase_every_n=params.fp16_inc_loss_scale_every_n,
    )

  def describe(self) -> str:
    if self.auto:
      return '%g (auto: halves on inf/nan, doubles after %d finite steps)' % (
        self.initial,
        self.increase_every_n,
      )
    return '%g (fixed)' % self.initial


class LossScale:
  """The loss-scale variables of one graph and the ops that use them."""

  def __init__(self, config: LossScaleConfig, device: str):
    self.config = config
    with tf.device(device), tf1.variable_scope('loss_scale_state'):
      self.scale = tf1.get_variable(
        'loss_scale',
        initializer=tf.constant(config.initial, tf.float32),
        trainable=False,
        use_resource=True,
      )
      self.finite_in_a_row = tf1.get_variable(
        'finite_steps_in_a_row',
        initializer=tf.constant(0, tf.int64),
        trainable=False,
        use_resource=True,
      )
      self.skipped_steps = tf1.get_variable(
        'skipped_steps',
        initializer=tf.constant(0, tf.int64),
        trainable=False,
        use_resource=True,
      )
    self.device = device

  def scale_loss(self, loss: tf.Tensor) -> tf.Tensor:
    """The loss towers differentiate: loss * scale (float32)."""
    return loss * self.scale.read_value()

  def unscale(self, grads_and_vars):
    """Divides reduced gradients by the scale (in the gradients' dtype)."""
    inverse = 1.0 / self.scale.read_value()
    out = []
    for g, v in grads_and_vars:
      with tf.device(g.device):
        out.append((g * tf.cast(inverse, g.dtype), v))
    return out

  def all_finite(self, sites) -> tf.Tensor:
    """True iff every reduced gradient of every apply site is finite."""
    per_site = []
    for device, grads_and_vars in sites:
      with tf.device(device):
        per_site.append(
          tf.reduce_all(
            [tf.reduce_all(tf.math.is_finite(g)) for g, _ in grads_and_vars]
          )
        )
    with tf.device(self.device):
      return tf.reduce_all(per_site)

  def guarded_update(self, sites, apply_fn: Callable[[list], Sequence]):
    """Applies `apply_fn(unscaled sites)`, skipping it on inf/nan if auto.

    Returns the op that runs the (possibly skipped) update and moves the
    scale.
    """
    sites = [(device, self.unscale(gv)) for device, gv in sites]
    if not self.config.auto:
      return tf.group(*apply_fn(sites))
    finite = self.all_finite(sites)
    return self.adjust(self.apply_if(finite, lambda: apply_fn(sites)))

  def apply_if(
    self, finite: tf.Tensor, make_updates: Callable[[], Sequence]
  ) -> tf.Tensor:
    """Runs the ops `make_updates()` builds only if `finite`; returns `finite`.

    For managers whose update is split across processes: each part is
    guarded by the same decision (one all processes agree on).
    """

    def apply_and_report():
      with tf.control_dependencies(make_updates()):
        return tf.constant(True)

    # The skip is a cond_v2 branch: the optimizers' variables must be
    # resource variables (params turn them on with auto loss scaling).
    return tf.cond(finite, apply_and_report, lambda: tf.constant(False))

  def adjust(self, finite: tf.Tensor) -> tf.Operation:
    """Moves the scale after a step: halve on inf/nan, double after n finite."""
    with tf.device(self.device):
      in_a_row = tf.where(
        finite, self.finite_in_a_row.read_value() + 1, tf.constant(0, tf.int64)
      )
      grow = in_a_row >= self.config.increase_every_n
      scale = self.scale.read_value()
      new_scale = tf.where(
        finite, tf.where(grow, scale * 2.0, scale), tf.maximum(scale * 0.5, 1.0)
      )
      return tf.group(
        self.scale.assign(new_scale),
        self.finite_in_a_row.assign(
          tf.where(grow, tf.constant(0, tf.int64), in_a_row)
        ),
        self.skipped_steps.assign_add(
          tf.where(finite, tf.constant(0, tf.int64), tf.constant(1, tf.int64))
        ),
      )

  def report(self) -> dict:
    """Tensors for the results line: the final scale and the skip count."""
    return {
      'loss_scale': self.scale.read_value(),
      'skipped_steps': self.skipped_steps.read_value(),
    }
