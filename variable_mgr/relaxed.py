"""Relaxed consistency (--variable_consistency=relaxed): updates a step late.

With strong consistency a step's updates wait for every gradient of the
step. Relaxed, the replicated manager applies the gradients reduced in the
*previous* step (zeros in the first), so the updates need not wait for this
step's reduction and overlap its computation; this step's reduced gradients
are stored for the next one.
"""

from __future__ import annotations

import contextlib
from typing import List

import tensorflow as tf

tf1 = tf.compat.v1

# A named store is its variable's name + this (see Replicated).
DELAYED_SUFFIX = '/delayed'


class OneStepDelay:
  """Holds last step's reduced values per device, to apply them a step late.

  For every tower tensor, a non-trainable LOCAL variable on that tower's
  device starts at zeros. `delayed[i][j]` reads the stored value and
  `update_op` stores the new one; each write waits for its variable's read,
  so one session.run of both sees the old value and leaves the new one.
  Initialize with tf1.local_variables_initializer().

  Attributes:
    variables: variables[i][j] stores tensor j of tower i.
    delayed: delayed[i][j] is last step's tensor j of tower i (on its device).
    update_op: stores this step's tensors.
  """

  def __init__(
    self, tower_tensors, devices, name='one_step_delay', variable_names=None
  ):
    """Stores `tower_tensors[i][j]` on `devices[i]`.

    Args:
      tower_tensors: per tower, the tensors to delay.
      devices: one device per tower.
      name: name scope of the anonymous stores (LOCAL variables).
      variable_names: None, or per tower the full names of the stores; they
        are then GLOBAL variables (checkpoints save them, so a resumed run
        applies the step its checkpoint was still holding back).
    """
    if len(tower_tensors) != len(devices):
      raise ValueError(
        'got %d towers for %d devices' % (len(tower_tensors), len(devices))
      )
    self.variables: List[List[tf.Variable]] = []
    self.delayed: List[List[tf.Tensor]] = []
    writes = []
    with tf1.name_scope(name):
      for i, (tensors, device) in enumerate(zip(tower_tensors, devices)):
        with tf.device(device):
          variables, reads = [], []
          for j, t in enumerate(tensors):
            var, read, write = _delay_one(
              tf.convert_to_tensor(t),
              'tower%d_value%d' % (i, j)
              if variable_names is None
              else variable_names[i][j],
              named=variable_names is not None,
            )
            variables.append(var)
            reads.append(read)
            writes.append(write)
        self.variables.append(variables)
        self.delayed.append(reads)
      self.update_op = tf.group(*writes, name='update')


def _delay_one(tensor, name, named=False):
  """(store variable, read of last step's value, write of `tensor`).

  named: `name` is the store's full name, and the store a GLOBAL variable.
  """
  # The store starts at zeros whatever control dependencies the caller's
  # scope holds: its initializer must run at init time.
  scope = tf1.name_scope(None) if named else contextlib.nullcontext()
  with tf.control_dependencies(None), scope:
    var = tf1.Variable(
      tf.zeros(tensor.shape, tensor.dtype),
      trainable=False,
      collections=[
        tf1.GraphKeys.GLOBAL_VARIABLES
        if named
        else tf1.GraphKeys.LOCAL_VARIABLES
      ],
      use_resource=True,
      name=name,
    )
  read = var.read_value()
  with tf.control_dependencies([read]):
    write = var.assign(tensor, read_value=False)
  return var, read, write


# Ops that pass a variable's buffer on without reading it: the reader is
# whatever consumes their output.
_PASS_THROUGH = frozenset({'Identity', 'ReadVariableOp'})


def step_ops(tensors) -> frozenset:
  """Every op the step runs to compute `tensors` (their ancestors)."""
  seen, stack = set(), [t.op for t in tensors]
  while stack:
    op = stack.pop()
    if op in seen:
      continue
    seen.add(op)
    stack.extend(t.op for t in op.inputs)
    stack.extend(op.control_inputs)
  return frozenset(seen)


def readers(variable, ops: frozenset) -> list:
  """The ops among `ops` that read `variable`'s buffer.

  A reference variable's value ('v/read') aliases its buffer, so a reader
  sees the buffer as it is when the reader runs, possibly after an update
  of the same step; a resource variable's read is a snapshot, and its
  consumers are taken too (harmless, and right in copy-on-read mode).
  """
  found, stack = [], list(variable.op.outputs)
  while stack:
    for consumer in stack.pop().consumers():
      if consumer.type in _PASS_THROUGH:
        stack.extend(consumer.outputs)
      if consumer in ops:
        found.append(consumer)
  return found


def after_reads(grads_and_vars, ops: frozenset) -> list:
  """(gradient, variable) pairs whose gradients wait for the step's reads.

  Relaxed updates apply last step's gradients and need not wait for this
  step's; but an update that lands while this step still reads its variable
  (the forward pass, the backprop through its layer, weight decay) mixes old
  and new values by thread timing, so two runs of one graph differ. Each
  update waits for its own variable's readers only, and still overlaps the
  rest of the step (the backprop below it and the reduction).
  """
  ordered = []
  for g, v in grads_and_vars:
    with tf.device(g.device), tf.control_dependencies(readers(v, ops)):
      ordered.append((tf.identity(g), v))
  return ordered
