"""Gradient accumulation (--gradient_accumulation_steps=K), for every manager.

An update is K micro-steps. Each runs every tower's forward and backward
pass; the first K-1 (the micro-step op) add each tower's gradients to
buffers, the K-th (the update op) hands the manager

    (buffer + this micro-step's gradient) / K

per tower and variable, exactly where the tower's own gradient went
before, then zeroes the buffers. The manager reduces, checks (fp16 loss
scale), clips and applies that as it would one step's gradients, so the
reduction, compression, the loss-scale check and the global step happen
once per update, whatever the strategy; the learning rate means the same
(the mean of K micro-batches' mean gradients is the mean gradient of their
union when the micro-batches are equal in size).

The buffers, the reported loss's buffer and the count of micro-steps done
are non-trainable resource variables outside every tower's variable scope
(managers copy, share or place only what is under a tower's scope), each
buffer on its tower's device. They are global variables, so a checkpoint
holds them: one taken between micro-steps resumes where it stopped (the
step loop reads `micro_steps_done` and runs only the micro-steps left).
In a cluster of a graph per worker each worker's are named by its task
('gradient_accumulation_worker_W/...') and registered as its own state, so
the chief's checkpoint holds every worker's (worker_state.py).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import tensorflow as tf

from variable_mgr import worker_state

tf1 = tf.compat.v1

SCOPE = 'gradient_accumulation'


@dataclasses.dataclass(frozen=True)
class AccumulatedStep:
  """The two fetch sets' parts the accumulation adds to a graph.

  tower_grads: per tower, the (gradient, variable) pairs the update hands
    the manager: the mean of the update's K micro-steps' gradients.
  loss: the mean of the K micro-steps' losses (the update's reported loss).
  micro_ops: what a micro-step runs besides the towers: the additions to
    the buffers and the count.
  """

  tower_grads: list
  loss: tf.Tensor
  micro_ops: tuple


class GradientAccumulation:
  """The buffers and the micro-step count of one graph."""

  def __init__(self, steps: int, device: str, worker: int | None = None):
    """steps: K (>= 2); device: where the count and the loss buffer live
    (this process's CPU); worker: this worker's task index in a cluster
    whose workers build a graph each (their variables share one
    checkpoint), else None."""
    if steps < 2:
      raise ValueError('gradient accumulation needs at least 2 micro-steps')
    self.steps = steps
    self.device = device
    self._worker = worker
    self._scope = scope_of(worker)
    with tf.device(device), tf1.variable_scope(self._scope):
      counter = _zeros_variable('micro_steps_done', [], tf.int64)
      loss_sum = _zeros_variable('loss_sum', [], tf.float32)
    self.counter, self.loss_sum = self._own(counter), self._own(loss_sum)
    self._buffers: list = []
    self._index = None

  def micro_index(self) -> tf.Tensor:
    """The micro-step this run is (0 .. K-1): ONE read of the count.

    The synthetic inputs pick their slice of the update's examples with it.
    """
    if self._index is None:
      with tf.control_dependencies(None), tf.device(self.device):
        self._index = self.counter.read_value()
    return self._index

  def micro_steps_done(self) -> tf.Tensor:
    """The count of micro-steps done (0 after an update), for a resume."""
    with tf.device(self.device):
      return tf.identity(self.counter.read_value(), name='micro_steps_done')

  def build(
    self, tower_grads: Sequence, loss: tf.Tensor, tower_devices: Sequence
  ) -> AccumulatedStep:
    """Buffers for every tower's gradients; the micro-step's and update's
    parts (see AccumulatedStep)."""
    per_tower, micro_ops = [], []
    for index, grads_and_vars in enumerate(tower_grads):
      out = []
      with tf.device(tower_devices[index]):
        for g, v in grads_and_vars:
          g = tf.convert_to_tensor(g)
          buffer = self._buffer(index, g, v)
          micro_ops.append(buffer.assign_add(g, read_value=False))
          mean = (buffer.read_value() + g) / tf.cast(self.steps, g.dtype)
          out.append((mean, v))
      per_tower.append(out)
    with tf.device(self.device):
      loss = tf.cast(loss, tf.float32)
      micro_ops.append(self.loss_sum.assign_add(loss, read_value=False))
      mean_loss = (self.loss_sum.read_value() + loss) / float(self.steps)
      # Counted after the additions, which read the count through the
      # synthetic inputs' slice.
      with tf.control_dependencies(micro_ops):
        count = self.counter.assign_add(1, read_value=False)
    return AccumulatedStep(per_tower, mean_loss, tuple(micro_ops) + (count,))

  def reset(self, after: Sequence) -> tf.Operation:
    """Zeroes every buffer, the loss sum and the count after `after`."""
    with tf.control_dependencies(list(after)):
      ops = []
      for buffer in self._buffers:
        with tf.device(buffer.device):
          ops.append(buffer.assign(tf.zeros_like(buffer), read_value=False))
      with tf.device(self.device):
        ops.append(self.loss_sum.assign(0.0, read_value=False))
        ops.append(self.counter.assign(0, read_value=False))
      return tf.group(*ops, name='accumulation_reset')

  def variables(self) -> list:
    """Every variable of the accumulation (to initialise and save)."""
    return [self.counter, self.loss_sum, *self._buffers]

  def savable_variables(self) -> dict:
    """Checkpoint name -> variable: their own names."""
    return {v.op.name: v for v in self.variables()}

  def _buffer(self, index: int, g: tf.Tensor, v) -> tf.Variable:
    # Tower index and the variable's full name: unique in every manager
    # (parameter_server's towers share one variable, replicated's have a
    # copy each).
    name = '%s/tower_%d/%s' % (self._scope, index, v.op.name)
    buffer = self._own(_zeros_variable(name, g.shape, g.dtype.base_dtype))
    self._buffers.append(buffer)
    return buffer

  def _own(self, var: tf.Variable) -> tf.Variable:
    """`var`, registered as this worker's own state (in a cluster)."""
    if self._worker is not None:
      if not var.op.name.startswith(self._scope + '/'):
        raise ValueError('%s is outside %s' % (var.op.name, self._scope))
      relative = var.op.name[len(self._scope) :]
      worker_state.register(var, lambda w: scope_of(w) + relative)
    return var


def scope_of(worker: int | None) -> str:
  """The accumulation's scope in worker `worker`'s graph (None: local)."""
  return SCOPE if worker is None else '%s_worker_%d' % (SCOPE, worker)


def _zeros_variable(name: str, shape, dtype) -> tf.Variable:
  """A non-trainable resource variable of zeros (saved with the globals)."""
  return tf1.get_variable(
    name,
    shape=shape,
    dtype=dtype,
    initializer=tf1.zeros_initializer(),
    trainable=False,
    use_resource=True,
  )
