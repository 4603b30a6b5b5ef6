"""NASNet as the classic harness built it (models/tf1_only/nasnet_model.py
there): TF-slim's cells outside slim's nasnet arg scope and without
num_classes. Small networks, so these run in the fast suite."""

import os

# NCHW convolutions / pooling on CPU need the oneDNN kernels; must be set
# before TensorFlow is imported.
os.environ.setdefault('TF_ENABLE_ONEDNN_OPTS', '1')

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import models  # noqa: E402
from models import nasnet  # noqa: E402
from models.builder import NetBuilder  # noqa: E402
from tests.test_models import _images  # noqa: E402

tf1 = tf.compat.v1


def _normal_cell(compute_dtype=tf.float32):
  """One normal cell, F = 8, on an h of 12 and a p of 20 channels (8x8)."""
  x = tf.random.stateless_uniform([2, 8, 8, 12], seed=(1, 2))
  prev = tf.random.stateless_uniform([2, 8, 8, 20], seed=(3, 4))
  net = NetBuilder(
    x,
    is_training=True,
    compute_dtype=compute_dtype,
    **nasnet.NASNet.batch_norm_config,
  )
  prev = tf.cast(prev, compute_dtype)
  out = nasnet.cell(net, net.top_layer, prev, nasnet.NORMAL_CELL, 8, 1)
  return net, out


def _batch_norm_ops(graph):
  return [op for op in graph.get_operations() if op.type == 'FusedBatchNormV3']


def _conv_bias_relu(tensor):
  """Whether `tensor` is ReLU(bias_add(...)) or a concat of such."""
  op = tensor.op
  if op.type == 'ConcatV2':
    return all(_conv_bias_relu(t) for t in op.inputs[:-1])
  return op.type == 'Relu' and op.inputs[0].op.type == 'BiasAdd'


def test_cell_convolutions_have_bias_and_relu_and_batch_norm_no_gamma():
  """slim.conv2d / separable_conv2d defaults (classic nasnet_utils.py: no
  arg scope): conv - bias - ReLU - slim.batch_norm (no gamma)."""
  graph = tf.Graph()
  with graph.as_default():
    _normal_cell()
    names = [v.op.name for v in tf1.trainable_variables()]
    params = sum(v.shape.num_elements() for v in tf1.trainable_variables())
    bn_ops = _batch_norm_ops(graph)
  # 2 projections (1x1 of p: 20->8, of h: 12->8) and 5 two-layer separable
  # ops (two 5x5, three 3x3), each layer depthwise k*k*8 + pointwise 8*8 +
  # bias 8 + BN beta 8:
  #   (20*8 + 16) + (12*8 + 16) + 2*2*(25*8 + 64 + 16) + 3*2*(9*8 + 64 + 16)
  assert params == 176 + 112 + 1120 + 912 == 2320
  assert not [n for n in names if n.endswith('gamma')]
  assert len([n for n in names if n.endswith('/biases')]) == 12
  assert len([n for n in names if n.endswith('/beta')]) == 12
  assert len(bn_ops) == 12
  assert all(_conv_bias_relu(op.inputs[0]) for op in bn_ops)
  assert all(op.get_attr('epsilon') == pytest.approx(0.001) for op in bn_ops)


def test_cell_batch_norm_decay_is_slims_default():
  """slim.batch_norm's decay 0.999 (not the nasnet arg scope's 0.9997)."""
  graph = tf.Graph()
  with graph.as_default():
    net, _ = _normal_cell()
    bn = _batch_norm_ops(graph)[0]
    scope = bn.name.rsplit('/', 1)[0]
    (moving_mean,) = [
      v for v in tf1.global_variables() if v.op.name == scope + '/moving_mean'
    ]
    init = tf1.global_variables_initializer()
  with tf1.Session(graph=graph) as sess:
    sess.run(init)
    batch_mean, _ = sess.run([bn.outputs[1], net.update_ops])
    moved = sess.run(moving_mean)
  assert np.all(batch_mean >= 0) and batch_mean.max() > 0  # after a ReLU
  np.testing.assert_allclose(moved, (1 - 0.999) * batch_mean, rtol=1e-5)


def test_fp16_separable_convolutions_compute_in_float32():
  """nasnet_utils._stacked_separable_conv casts float16 to float32 around
  the separable stack; the rest of the cell stays float16."""
  graph = tf.Graph()
  with graph.as_default():
    _, out = _normal_cell(tf.float16)
    ops = graph.get_operations()
    variables = tf1.trainable_variables()
    # The casts pass gradients to every (float32) variable.
    grads = tf.gradients(tf.reduce_sum(tf.cast(out, tf.float32)), variables)
  assert variables and all(g is not None for g in grads)
  depthwise = [op for op in ops if op.type == 'DepthwiseConv2dNative']
  sep_conv = [op for op in ops if op.type == 'Conv2D' and 'sepconv' in op.name]
  other_conv = [
    op for op in ops if op.type == 'Conv2D' and 'sepconv' not in op.name
  ]
  assert len(depthwise) == len(sep_conv) == 10 and len(other_conv) == 2
  assert {op.get_attr('T') for op in depthwise + sep_conv} == {tf.float32}
  assert {op.get_attr('T') for op in other_conv} == {tf.float16}
  assert out.dtype == tf.float16


def test_builder_separable_conv_stays_in_the_compute_dtype():
  """The float32 detour is NASNet's (the classic's slim cells), not the
  builder's: other separable / depthwise layers compute in float16."""
  graph = tf.Graph()
  with graph.as_default():
    net = NetBuilder(
      _images(2, 8, 'NHWC'), is_training=True, compute_dtype=tf.float16
    )
    net.separable_conv(8, 3)
    types = {
      op.get_attr('T')
      for op in graph.get_operations()
      if op.type in ('DepthwiseConv2dNative', 'Conv2D')
    }
  assert types == {tf.float16}


def _small_nasnet_variables(is_training):
  """A NASNet with one normal cell per stack and F = 16 (the declared ones
  are slow to build): the same stem, cells and head."""
  model = nasnet.NASNet(
    'nasnet',
    'imagenet',
    64,
    2,
    0.005,
    cells_per_stack=1,
    filters=16,
    stem_filters=8,
    skip_reduction_input=False,
  )
  graph = tf.Graph()
  with graph.as_default():
    out = model.build(_images(2, 64, 'NHWC'), 1001, is_training=is_training)
    names = {v.op.name for v in tf1.trainable_variables()}
  return graph, out, names


def test_training_builds_no_auxiliary_head_and_no_dropout():
  """The classic add_inference called build_nasnet_* without num_classes:
  slim builds the auxiliary head only with num_classes (nasnet_model.py
  `num_classes and is_training`) and returns at the global pool before its
  dropout. Every convolution, the stem's and the factorised reductions'
  too, is conv - bias - ReLU - BN."""
  graph, out, trained = _small_nasnet_variables(True)
  _, _, inferred = _small_nasnet_variables(False)
  assert out.aux_logits is None
  assert trained == inferred
  op_types = {op.type for op in graph.get_operations()}
  assert not [
    t for t in op_types if 'Random' in t and not t.startswith('Stateless')
  ]
  bn_ops = _batch_norm_ops(graph)
  assert bn_ops and all(_conv_bias_relu(op.inputs[0]) for op in bn_ops)
  assert not [n for n in trained if n.endswith('gamma')]


def test_default_learning_rates_are_the_classic_ones():
  """NasnetCifarModel: 0.025; NasnetModel / NasnetLargeModel: 0.005."""
  step = tf.constant(10, tf.int64)
  rates = {
    (name, dataset): models.create_model(name, dataset).learning_rate(
      step, 32, 50_000
    )
    for name, dataset in (
      ('nasnet', 'cifar10'),
      ('nasnet', 'imagenet'),
      ('nasnetlarge', 'imagenet'),
    )
  }
  assert rates == {
    ('nasnet', 'cifar10'): 0.025,
    ('nasnet', 'imagenet'): 0.005,
    ('nasnetlarge', 'imagenet'): 0.005,
  }
