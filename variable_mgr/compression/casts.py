"""none and the 16-bit casts (fp16, bf16), with or without error feedback.

A cast sends every float32 gradient in 16 bits: each replica rounds its
gradient to the wire dtype on its own device, the manager's reduction adds
the rounded values in that dtype, and every replica casts the result back.
With error feedback (fp16_ef, bf16_ef) each replica adds what rounding lost
last step to this step's gradient before rounding, and keeps what this
rounding loses: e' = (g + e) - float32(round16(g + e)).
Other dtypes (a float16 gradient of --fp16_vars) travel as they are.
"""

from __future__ import annotations

import tensorflow as tf

from variable_mgr.compression import base

ERROR_STATE = 'error'


class NoCompression(base.Compressor):
  """Gradients travel as they are."""

  name = 'none'

  def reduce(self, tower_grads, wire):
    return wire.reduce([list(grads) for grads in tower_grads])

  def push(self, grads, device, replica, names=None):
    return list(grads)


class Cast(base.Compressor):
  """Float32 gradients travel in the catalog's 16-bit wire dtype."""

  def __init__(self, rank=None):
    super().__init__()
    self.wire_dtype = tf.as_dtype(self.declared.wire_dtype)

  def reduce(self, tower_grads, wire):
    sent, updates = [], []
    for i, grads in enumerate(tower_grads):
      names = [wire.name(j) for j in range(len(grads))]
      sent.append(
        self._compress(
          grads,
          wire.devices[i],
          (wire.first_replica + i, len(wire.devices)),
          names,
          updates,
        )
      )
    reduced = wire.reduce(sent)
    out = [
      [
        self.pull(r, g.dtype, device)
        for r, g in zip(tower_reduced, tower_grads[i])
      ]
      for i, (tower_reduced, device) in enumerate(zip(reduced, wire.devices))
    ]
    ops = base.guarded_updates(updates, wire.devices[0])
    return base.after(out, ops, wire.devices)

  def push(self, grads, device, replica, names=None):
    names = names or ['grad_%d' % j for j in range(len(grads))]
    updates = []
    # One replica per worker: the pushes' replica is the worker's index.
    sent = self._compress(grads, device, (replica, 1), names, updates)
    ops = base.guarded_updates(updates, device)
    return base.after([sent], ops, [device])[0]

  def pull(self, sent, dtype, device):
    if sent.dtype == dtype:
      return sent
    with tf.device(device):
      return tf.cast(sent, dtype)

  def _compress(self, grads, device, replica, names, updates) -> list:
    """One replica's gradients as sent; appends its error updates.

    replica: (its index in the run, replicas per worker).
    """
    sent = []
    with tf.device(device):
      for g, name in zip(grads, names):
        g = tf.convert_to_tensor(g)
        if g.dtype != tf.float32:
          sent.append(g)
          continue
        if not self.declared.error_feedback:
          sent.append(tf.cast(g, self.wire_dtype))
          continue
        error = self.replica_variable(
          replica[0], name, ERROR_STATE, g, device, per_worker=replica[1]
        )
        old = error.read_value()
        corrected = g + old
        rounded = tf.cast(corrected, self.wire_dtype)
        updates.append((error, old, corrected - tf.cast(rounded, tf.float32)))
        sent.append(rounded)
    return sent


class Fp16(Cast):
  """float32 gradients sent as float16."""

  name = 'fp16'


class Bf16(Cast):
  """float32 gradients sent as bfloat16."""

  name = 'bf16'


class Fp16ErrorFeedback(Cast):
  """float16 on the wire; each replica carries its rounding error over."""

  name = 'fp16_ef'


class Bf16ErrorFeedback(Cast):
  """bfloat16 on the wire; each replica carries its rounding error over."""

  name = 'bf16_ef'
