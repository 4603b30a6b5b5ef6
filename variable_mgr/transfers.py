"""Packed transfers: many small tensors between two tasks as one tensor.

Every tensor that crosses from one task to another is its own RPC, with its
own fixed cost on both sides (gRPC framing, a thread hop, a copy). A model's
gradients and variables are a few dozen to a few hundred tensors, most of them
small (biases, batch-norm parameters), so in a cluster on one host these
fixed costs take CPU from the towers. Packing concatenates the flattened
tensors of each (source, destination, dtype) group on the source, sends the
one tensor, and splits it back on the destination: exact, and one RPC per
group.
"""

from __future__ import annotations

import tensorflow as tf


def _packable(tensor) -> bool:
  return isinstance(tensor, tf.Tensor) and tensor.shape.is_fully_defined()


def packed_transfer(tensors, sources, destinations) -> list:
  """tensors[i], made on sources[i], as a tensor on destinations[i].

  Tensors with the same source, destination and dtype travel as one packed
  tensor; a tensor alone in its group, or of unknown shape (or not a dense
  tensor), is returned as it is (TensorFlow moves it on its own).
  """
  tensors = list(tensors)
  groups = {}
  for i, (tensor, src, dst) in enumerate(zip(tensors, sources, destinations)):
    if _packable(tensor) and src != dst:
      groups.setdefault((src, dst, tensor.dtype), []).append(i)
  out = list(tensors)
  for (src, dst, _), members in groups.items():
    if len(members) < 2:
      continue
    with tf.device(src):
      packed = tf.concat([tf.reshape(tensors[i], [-1]) for i in members], 0)
    with tf.device(dst):
      parts = tf.split(
        packed, [tensors[i].shape.num_elements() for i in members], 0
      )
      for i, part in zip(members, parts):
        out[i] = tf.reshape(part, tensors[i].shape)
  return out


class PackedReads:
  """The values of many variables, read on one device in packed transfers.

  Each variable is read on its own device and the reads cross to
  `destination` packed (see packed_transfer), so a step costs one transfer
  per (source, dtype) instead of one per variable. A packed value is a copy:
  an update of its variable later in the step leaves it alone.
  """

  def __init__(self, variables, destination: str, pack: bool = True):
    """pack=False: each value crosses on its own (one RPC per variable).

    The reads are made here, under the caller's control dependencies.
    """
    variables = list(variables)
    self.graph = tf.compat.v1.get_default_graph()
    reads = []
    for var in variables:
      with tf.device(var.device):
        reads.append(var.read_value())
    if pack:
      values = packed_transfer(
        reads, [v.device for v in variables], [destination] * len(variables)
      )
    else:
      values = reads
    with tf.device(destination):  # a value packed with none crosses once too
      values = [
        x if x.device == destination else tf.identity(x) for x in values
      ]
    self._values = {v.op.name: x for v, x in zip(variables, values)}

  def active(self) -> bool:
    """Whether these reads belong to the graph being built."""
    return tf.compat.v1.get_default_graph() is self.graph

  def value(self, var):
    """`var`'s value on the destination, or `var` itself if it was not read."""
    return self._values.get(var.op.name, var)
