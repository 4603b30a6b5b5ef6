"""Synthetic inputs, held on each tower's device.

Global example j of a step is the same whatever the number of towers: tower i
holds examples [i*B, (i+1)*B) of the global batch. Each example is drawn from a
stateless generator seeded by (seed, j), so its value depends on nothing else.
The images live in a local (non-trainable, not checkpointed) variable on the
tower's device, initialised once: no host-to-device copy happens per step.
"""

from __future__ import annotations

import tensorflow as tf

tf1 = tf.compat.v1


def synthetic_examples(
  seed: int, start: int, count: int, image_shape, num_classes: int
):
  """Images (uniform in [-1, 1)) and labels of examples [start, start+count).

  image_shape is the shape of one image in its data format, e.g. [H, W, C].
  """

  def one_example(j):
    # map_fn's body is a function graph: the caller's jit_scope does not
    # reach it, so it says itself that XLA must not draw these numbers.
    with tf.xla.experimental.jit_scope(compile_ops=False):
      return _one_example(j)

  def _one_example(j):
    image = tf.random.stateless_uniform(
      image_shape, seed=tf.stack([seed, j]), minval=-1.0, maxval=1.0
    )
    label = tf.random.stateless_uniform(
      [],
      seed=tf.stack([seed + 1, j]),
      minval=0,
      maxval=num_classes,
      dtype=tf.int32,
    )
    return image, label

  indices = tf.range(start, start + count, dtype=tf.int32)
  return tf.map_fn(
    one_example,
    indices,
    fn_output_signature=(
      tf.TensorSpec(image_shape, tf.float32),
      tf.TensorSpec([], tf.int32),
    ),
  )


def image_shape(image_size: int, depth: int, data_format: str) -> list[int]:
  """Shape of one image in `data_format`."""
  if data_format == 'NCHW':
    return [depth, image_size, image_size]
  return [image_size, image_size, depth]


def tower_synthetic_batch(
  tower_index: int,
  batch_size: int,
  *,
  image_size: int,
  depth: int,
  num_classes: int,
  data_format: str,
  seed: int,
):
  """(images, labels) of one tower, read from local variables on its device.

  Call under the tower's device scope.
  """
  with tf1.name_scope('synthetic_input_%d' % tower_index):
    images, labels = synthetic_examples(
      seed,
      tower_index * batch_size,
      batch_size,
      image_shape(image_size, depth, data_format),
      num_classes,
    )
    images_var = tf1.Variable(
      images,
      trainable=False,
      name='images',
      collections=[tf1.GraphKeys.LOCAL_VARIABLES],
    )
    # int64: TensorFlow registers no GPU kernel for an int32 variable
    # (VariableV2, VarHandleOp), so int32 labels could not stay on a GPU.
    labels_var = tf1.Variable(
      tf.cast(labels, tf.int64),
      trainable=False,
      name='labels',
      collections=[tf1.GraphKeys.LOCAL_VARIABLES],
    )
    return images_var.read_value(), labels_var.read_value()
