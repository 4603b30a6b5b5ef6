"""Static FLOP and parameter counting from a built graph.

FLOPs are 2 x multiply-adds of the ops that dominate a CNN: Conv2D,
DepthwiseConv2dNative, MatMul and BatchMatMul(V2/V3). Element-wise ops (bias,
batch norm, ReLU, pooling, residual sums) are ignored: they are well under 1%
of a ResNet's work and counting them would depend on how ops get fused.
"""

import tensorflow as tf

from models import builder

tf1 = tf.compat.v1

_BATCH_MATMULS = ('BatchMatMul', 'BatchMatMulV2', 'BatchMatMulV3')
COUNTED_OP_TYPES = (
  'Conv2D',
  'DepthwiseConv2dNative',
  'MatMul',
) + _BATCH_MATMULS


def _macs_per_output(op):
  """Multiply-adds behind each output element (the reduction length)."""
  if op.type == 'Conv2D':
    kh, kw, cin, _ = _dims(op.inputs[1])  # kernel [kh, kw, in, out]
    return kh * kw * cin
  if op.type == 'DepthwiseConv2dNative':
    kh, kw, _, _ = _dims(op.inputs[1])  # each output sees one input channel
    return kh * kw
  if op.type == 'MatMul':
    a = _dims(op.inputs[0])
    return a[0] if op.get_attr('transpose_a') else a[1]
  a = _dims(op.inputs[0])  # batch matmul: [..., m, k] unless adjointed
  return a[-2] if op.get_attr('adj_x') else a[-1]


def _dims(tensor):
  """Fully known static shape of `tensor` as ints, else ValueError."""
  shape = tensor.shape
  if shape.rank is None or any(d is None for d in shape.as_list()):
    raise ValueError(
      'cannot count FLOPs of %s: shape %s is not fully known'
      % (tensor.op.name, shape)
    )
  return [int(d) for d in shape.as_list()]


def count_forward_flops(ops) -> int:
  """Sums 2 x multiply-adds of the conv / matmul ops in `ops`.

  Args:
    ops: iterable of tf.Operation, e.g. `graph.get_operations()`. Ops whose
      name contains 'gradients' (the backward pass) are skipped.

  Returns:
    Forward FLOPs for the batch size the graph was built with.

  Raises:
    ValueError: a counted op has a not fully known static shape.
  """
  total = 0
  for op in ops:
    if op.type not in COUNTED_OP_TYPES or 'gradients' in op.name:
      continue
    outputs = 1
    for d in _dims(op.outputs[0]):
      outputs *= d
    total += 2 * outputs * _macs_per_output(op)
  return total


def flops_per_image_of(logits) -> int | None:
  """Forward FLOPs per image of the graph that computes `logits`.

  Counts the conv / matmul ops `logits` depends on (an auxiliary head's
  own ops, the backward pass and other towers are not among them) and
  divides by the static batch size, so a built training tower gives the
  figure model_stats would build a whole inference graph for. None when a
  shape is not static.
  """
  batch = logits.shape[0] if logits.shape.rank else None
  if batch is None:
    return None
  seen, stack = set(), [logits.op]
  while stack:
    op = stack.pop()
    if op not in seen:
      seen.add(op)
      stack.extend(t.op for t in op.inputs)
  try:
    return count_forward_flops(seen) // int(batch)
  except ValueError:  # a counted op of unknown shape
    return None


def _build_inference(model, num_classes, data_format):
  size = model.image_size
  shape = [1, size, size, 3] if data_format == 'NHWC' else [1, 3, size, size]
  images = tf.zeros(shape, tf.float32)
  return model.build(
    images, num_classes, is_training=False, data_format=data_format
  )


def _trainable_count(variables):
  return sum(int(v.shape.num_elements()) for v in variables)


def model_stats(model, num_classes, data_format='NHWC'):
  """(trainable parameters, forward FLOPs per image) from one build.

  Builds `model` once, at batch 1 and for inference (so no auxiliary head
  and no dropout), in a fresh graph. Batch-norm moving statistics are not
  counted as parameters.
  """
  graph = tf.Graph()
  # Nothing runs this graph: its variables need no initial values.
  with graph.as_default(), builder.placeholder_initial_values():
    _build_inference(model, num_classes, data_format)
    params = _trainable_count(tf1.trainable_variables())
  return params, count_forward_flops(graph.get_operations())


def model_flops_per_image(model, num_classes, data_format='NHWC') -> int:
  """Forward FLOPs for one image: builds `model` at batch 1 (inference)
  in a fresh graph and counts it."""
  return model_stats(model, num_classes, data_format)[1]


def model_param_count(model, num_classes) -> int:
  """Number of trainable parameters (batch-norm moving statistics excluded)."""
  return model_stats(model, num_classes)[0]
