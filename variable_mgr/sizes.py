"""Byte counts and even splits, one rule for every manager.

`num_bytes` sizes variables for the greedy placer (parameter_server's
devices, the ps copies of distributed_replicated and hybrid), the ps
partition threshold (--ps_partition_threshold_bytes) and the hybrid threshold
(--hybrid_threshold_bytes), and gradients for small-gradient packing
(--agg_small_grads_max_bytes, whose shapes are always fully known).

A shape that is not fully known counts 0 bytes. A size nobody knows must
not make a variable look big: the thresholds leave such a variable where
small ones go (partitioning needs a known first dimension anyway), and the
placer still gives it the least-loaded device, only without adding to that
device's load. The benchmark's models only make fully known variables.
"""

from __future__ import annotations

import tensorflow as tf


def num_bytes(shape, dtype) -> int:
  """Bytes of a tensor of `shape` and `dtype` (0 if the shape is not known).

  Args:
    shape: anything tf.TensorShape takes (a TensorShape, a list, a shape
      attribute proto, None).
    dtype: anything tf.as_dtype takes (reference dtypes count as their base).
  """
  shape = tf.TensorShape(shape)
  if not shape.is_fully_defined():
    return 0
  return shape.num_elements() * tf.as_dtype(dtype).size


def even_sizes(total: int, parts: int) -> list:
  """`total` split into `parts` sizes that differ by at most one.

  The larger sizes come first: even_sizes(7, 3) == [3, 2, 2].
  """
  base, extra = divmod(total, parts)
  return [base + 1 if i < extra else base for i in range(parts)]


def requested_shape(getter_kwargs) -> tf.TensorShape:
  """The shape a variable getter is asked for (the initializer's if none)."""
  shape = getter_kwargs.get('shape')
  initializer = getter_kwargs.get('initializer')
  if shape is None and hasattr(initializer, 'shape'):
    shape = initializer.shape
  return tf.TensorShape(shape)


def requested_bytes(getter_kwargs) -> int:
  """Bytes of the variable a getter is asked for (see num_bytes)."""
  return num_bytes(
    requested_shape(getter_kwargs), getter_kwargs.get('dtype') or tf.float32
  )
