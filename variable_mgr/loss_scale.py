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
    # The verdicts (bool tensors) of the guarded updates this graph built.
    self._verdicts = []
    self._step_value = None

  def step_value(self) -> tf.Tensor:
    """The scale this step uses: ONE read, shared by every user.

    The towers' scaling, the unscaling and the reported norm all see the
    same value, and the scale's update (adjust) depends on it through the
    verdict, so it lands after every use.
    """
    if self._step_value is None:
      # Outside any caller's control scope or branch: usable everywhere.
      with tf.control_dependencies(None), tf.device(self.device):
        self._step_value = self.scale.read_value()
    return self._step_value

  def scale_loss(self, loss: tf.Tensor) -> tf.Tensor:
    """The loss towers differentiate: loss * scale (float32)."""
    return loss * self.step_value()

  def unscale(self, grads_and_vars):
    """Divides reduced gradients by the scale (in the gradients' dtype)."""
    inverse = 1.0 / self.step_value()
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

  def record_verdict(self, finite: tf.Tensor) -> None:
    """Notes the verdict on this step's gradients (see guard_statistics)."""
    if not any(finite is seen for seen in self._verdicts):
      self._verdicts.append(finite)

  def apply_if(
    self,
    finite: tf.Tensor,
    make_updates: Callable[[], Sequence],
    record: bool = True,
  ) -> tf.Tensor:
    """Runs the ops `make_updates()` builds only if `finite`; returns `finite`.

    For managers whose update is split across processes: each part is
    guarded by the same decision (one all processes agree on). record: the
    verdict is this step's (not a delayed one's, see relaxed).
    """

    def apply_and_report():
      with tf.control_dependencies(make_updates()):
        return tf.constant(True)

    if record:
      self.record_verdict(finite)

    # The skip is a cond_v2 branch: the optimizers' variables must be
    # resource variables (params turn them on with auto loss scaling).
    return tf.cond(finite, apply_and_report, lambda: tf.constant(False))

  def step_verdict(self) -> tf.Tensor:
    """True iff this step's update is applied: every recorded verdict holds.

    Only after a guarded update (or a verdict received from the process
    that applies it) was recorded.
    """
    if not self._verdicts:
      raise ValueError('no verdict recorded on this step yet')
    if len(self._verdicts) == 1:
      return self._verdicts[0]
    with tf.device(self.device):
      return tf.reduce_all(tf.stack(self._verdicts))

  def guard_statistics(
    self, stat_updates: Sequence, finite: tf.Tensor | None = None
  ) -> list:
    """`stat_updates` (batch-norm moving statistics) under the step's guard.

    A skipped step must move no variable: the statistics' assign ops are
    built again inside a branch that runs only if the step's gradients were
    finite (an inf/nan forward pass would otherwise poison them for good).
    A process that does not apply the update itself (a non-chief worker of
    a synchronous ps mode) records the verdict it receives from the one
    that does. Returns them unchanged without automatic scaling.

    finite: the verdict to guard them on instead of the step's (a
    gradient-accumulation micro-step's own, which applies nothing).
    """
    if not self.config.auto or not stat_updates:
      return list(stat_updates)
    if finite is None and not self._verdicts:
      raise ValueError(
        'automatic loss scaling: the statistics of a step whose verdict '
        'this process never learns cannot be guarded'
      )
    if finite is None:
      finite = self.step_verdict()

    def updates():
      return [_rebuild_assign(op) for op in stat_updates]

    return [
      tf.cond(
        finite,
        lambda: _after(updates(), True),
        lambda: tf.constant(False),
        name='guarded_statistics',
      )
    ]

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


# Resource-variable assign ops and the raw op that builds each again.
_ASSIGN_OPS = {
  'AssignVariableOp': tf.raw_ops.AssignVariableOp,
  'AssignAddVariableOp': tf.raw_ops.AssignAddVariableOp,
  'AssignSubVariableOp': tf.raw_ops.AssignSubVariableOp,
}


def _rebuild_assign(op: tf.Operation) -> tf.Operation:
  """The same assign as `op` (variable handle, value), built here."""
  make = _ASSIGN_OPS.get(op.type)
  if make is None:
    raise ValueError(
      'cannot guard %s (a %s op): guarded statistics need resource variables'
      % (op.name, op.type)
    )
  with tf.device(op.device):
    return make(resource=op.inputs[0], value=op.inputs[1])


def _after(ops, value: bool) -> tf.Tensor:
  """The constant `value`, computed after `ops`."""
  with tf.control_dependencies(ops):
    return tf.constant(value)
