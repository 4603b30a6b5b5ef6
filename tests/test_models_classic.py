"""Models built as the classic harness built the model of the same name:
dropout, heads, initial values, kernel orientations, and LRN's axis (where
ours deliberately differs; docs/models.md lists it)."""

import os

# NCHW convolutions / pooling on CPU need the oneDNN kernels; must be set
# before TensorFlow is imported.
os.environ.setdefault('TF_ENABLE_ONEDNN_OPTS', '1')

import math  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import models  # noqa: E402
from models import inception4  # noqa: E402
from models import initializers  # noqa: E402
from models.builder import NetBuilder  # noqa: E402
from tests.test_models import NUM_CLASSES  # noqa: E402
from tests.test_models import _images  # noqa: E402
from tests.test_models import _train_once  # noqa: E402

tf1 = tf.compat.v1
# A normal truncated at two standard deviations keeps this fraction of the
# untruncated stddev (the classic initialisers did not rescale it).
_KEPT = initializers.TRUNCATED_NORMAL_STDDEV


# --------------------------------------------------------------------------
# Dropout


def _dropouts(monkeypatch, name, dataset, image_size, is_training):
  """(the rates the build asked NetBuilder.dropout for, the number of
  stateful random ops in its graph: dropout masks are the only ones)."""
  rates = []
  original = NetBuilder.dropout

  def recording(self, rate=0.5, **kwargs):
    rates.append(rate)
    return original(self, rate, **kwargs)

  monkeypatch.setattr(NetBuilder, 'dropout', recording)
  graph = tf.Graph()
  with graph.as_default():
    models.create_model(name, dataset).build(
      _images(2, image_size, 'NHWC'),
      NUM_CLASSES[dataset],
      is_training=is_training,
    )
  masks = [op for op in graph.get_operations() if op.type == 'RandomUniform']
  return rates, len(masks)


@pytest.mark.parametrize(
  'name,dataset,image_size,rates',
  [
    # Classic OverfeatModel: cnn.dropout() (keep 0.5) after fc3072, fc4096.
    ('overfeat', 'imagenet', 231, [0.5, 0.5]),
    ('alexnet', 'imagenet', 227, [0.5, 0.5]),
    # TF-slim mobilenet's Logits/Dropout, keep_prob 0.8 (training_scope).
    ('mobilenet', 'imagenet', 64, [0.2]),
    ('mobilenet_v2', 'imagenet', 64, []),
    ('densenet40_k12', 'cifar10', 32, []),
  ],
)
def test_dropout_as_classic(monkeypatch, name, dataset, image_size, rates):
  assert _dropouts(monkeypatch, name, dataset, image_size, True) == (
    rates,
    len(rates),
  )
  # Inference builds no mask.
  assert _dropouts(monkeypatch, name, dataset, image_size, False)[1] == 0


# --------------------------------------------------------------------------
# The classic mobilenet: TF-slim's MobileNet V2


def _trainable_shapes(name, num_classes):
  graph = tf.Graph()
  with graph.as_default():
    models.create_model(name, 'imagenet').build(
      _images(2, 64, 'NHWC'), num_classes, is_training=False
    )
    return [v.shape.as_list() for v in tf1.trainable_variables()]


def test_classic_mobilenet_has_slims_logits_under_the_classifier():
  classic = _trainable_shapes('mobilenet', 1000)
  paper = _trainable_shapes('mobilenet_v2', 1000)
  assert paper[-2:] == [[1280, 1000], [1000]]
  # slim's 1x1 convolution to its own 1001 logits (with bias), then the
  # classic shared head's affine layer to the classes.
  assert classic[-4:] == [[1280, 1001], [1001], [1001, 1000], [1000]]
  assert classic[:-4] == paper[:-2]


def test_classic_mobilenet_kernels_are_slims_initial_values():
  """training_scope's weights_initializer: truncated normal, stddev 0.09,
  for every convolution (depthwise and slim's logits included)."""
  graph = tf.Graph()
  with graph.as_default():
    models.create_model('mobilenet', 'imagenet').build(
      _images(2, 64, 'NHWC'), 1001, is_training=False
    )
    kernels = [v for v in tf1.trainable_variables() if v.shape.ndims == 4]
    slim_logits = [v for v in tf1.trainable_variables() if v.shape.ndims == 2]
    init = tf1.global_variables_initializer()
  with tf1.Session(graph=graph) as sess:
    sess.run(init)
    values = sess.run(kernels + slim_logits[:1])
  # 52 convolutions: the stem, 17 bottlenecks (the first without its
  # expansion: 2 + 16 * 3), the 1x1 to 1280.
  assert len(values) == 52 + 1
  for value in values:
    assert value.std() == pytest.approx(0.09 * _KEPT, rel=0.1)
    assert np.abs(value).max() <= 2 * 0.09 * 1.0001


def test_classic_mobilenet_trains_one_step():
  result = _train_once(
    models.create_model('mobilenet', 'imagenet'), image_size=64
  )
  assert np.isfinite(result['loss0']) and np.isfinite(result['loss1'])
  assert result['loss1'] != result['loss0']
  assert all(g is not None for g, _ in result['grads_and_vars'])


# --------------------------------------------------------------------------
# DenseNet initial kernels


def test_densenet_kernels_are_the_classic_truncated_normal():
  """Classic densenet_model.py: stddev sqrt(2 / (9 k)) for the 3x3 dense
  convolutions and sqrt(2 / (9 width)) for the 1x1 transitions, truncated
  at 2 stddev and not rescaled."""
  graph = tf.Graph()
  with graph.as_default():
    models.create_model('densenet40_k12', 'cifar10').build(
      _images(2, 32, 'NHWC'), 10, is_training=False
    )
    kernels = [v for v in tf1.trainable_variables() if v.shape.ndims == 4]
    init = tf1.global_variables_initializer()
  with tf1.Session(graph=graph) as sess:
    sess.run(init)
    values = sess.run(kernels)
  dense = [v for v in values if v.shape[:2] == (3, 3) and v.shape[2] != 3]
  transitions = [v for v in values if v.shape[:2] == (1, 1)]
  assert len(dense) == 36
  # Input widths 16 + 12 * 12 and 160 + 12 * 12.
  assert [v.shape for v in transitions] == [(1, 1, 160, 160), (1, 1, 304, 304)]
  pooled = np.concatenate([v.ravel() for v in dense])
  stddev = math.sqrt(2 / (9 * 12))
  assert pooled.std() == pytest.approx(stddev * _KEPT, rel=0.02)
  assert np.abs(pooled).max() <= 2 * stddev * 1.0001
  for value in transitions:
    stddev = math.sqrt(2 / (9 * value.shape[-1]))
    assert value.std() == pytest.approx(stddev * _KEPT, rel=0.03)
    assert np.abs(value).max() <= 2 * stddev * 1.0001


# --------------------------------------------------------------------------
# Inception-v4's asymmetric kernels


def _branch_kernels(block, channels, side):
  """For each input of the concat that `block` returns, the kernel shapes
  of the convolutions on its path from the block's input, in order."""
  graph = tf.Graph()
  with graph.as_default():
    net = NetBuilder(tf.zeros([1, side, side, channels]), is_training=False)
    start = net.top_layer.op.name
    joined = block(net)
  assert joined.op.type == 'ConcatV2'
  branches = []
  for tensor in joined.op.inputs[:-1]:  # the last input is the axis
    shapes, op = [], tensor.op
    while op.name != start:
      if op.type == 'Conv2D':
        shapes.append(tuple(op.inputs[1].shape.as_list()))
      op = op.inputs[0].op
    branches.append(shapes[::-1])
  return branches


def test_inception4_block_b_orientations_as_classic():
  """Classic inception_v4_b: cols ... [192 1x1, 192 1x7, 224 7x1, 224 1x7,
  256 7x1] (the builder's conv takes height, then width)."""
  assert _branch_kernels(inception4.block_b, 16, 5) == [
    [(1, 1, 16, 128)],
    [(1, 1, 16, 384)],
    [(1, 1, 16, 192), (1, 7, 192, 224), (7, 1, 224, 256)],
    [
      (1, 1, 16, 192),
      (1, 7, 192, 192),
      (7, 1, 192, 224),
      (1, 7, 224, 224),
      (7, 1, 224, 256),
    ],
  ]


def test_inception4_block_c_orientations_and_order_as_classic():
  """Classic inception_v4_c: 448 1x3 then 512 3x1, and the 3x1 output of
  that branch before its 1x3."""
  double = [(1, 1, 32, 384), (1, 3, 384, 448), (3, 1, 448, 512)]
  assert _branch_kernels(inception4.block_c, 32, 3) == [
    [(1, 1, 32, 256)],
    [(1, 1, 32, 256)],
    [(1, 1, 32, 384), (1, 3, 384, 256)],
    [(1, 1, 32, 384), (3, 1, 384, 256)],
    double + [(3, 1, 512, 256)],
    double + [(1, 3, 512, 256)],
  ]


# --------------------------------------------------------------------------
# LRN: across channels in both layouts (a deliberate difference)


def _lrn_across_last_axis(x, radius, bias, alpha, beta):
  squares = x.astype(np.float64) ** 2
  out = np.empty(x.shape, np.float64)
  depth = x.shape[-1]
  for c in range(depth):
    window = squares[..., max(0, c - radius) : min(depth, c + radius + 1)]
    out[..., c] = x[..., c] / (bias + alpha * window.sum(-1)) ** beta
  return out


def test_lrn_normalises_across_channels_in_nchw_too():
  """The classic builder applied tf.nn.lrn to NCHW tensors as they were,
  normalising across the width; ours normalises across channels."""
  lrn = dict(depth_radius=2, bias=1.0, alpha=0.5, beta=0.75)
  x = np.random.RandomState(0).uniform(0.5, 2.0, (2, 4, 5, 6))  # NHWC
  x = x.astype(np.float32)
  expected = _lrn_across_last_axis(x, 2, 1.0, 0.5, 0.75)
  nchw = x.transpose(0, 3, 1, 2)
  graph = tf.Graph()
  with graph.as_default():
    ours = {
      'NHWC': NetBuilder(tf.constant(x), is_training=False).lrn(**lrn),
      'NCHW': NetBuilder(
        tf.constant(nchw), is_training=False, data_format='NCHW'
      ).lrn(**lrn),
    }
    classic = tf.nn.local_response_normalization(tf.constant(nchw), **lrn)
  with tf1.Session(graph=graph) as sess:
    values, classic = sess.run([ours, classic])
  np.testing.assert_allclose(values['NHWC'], expected, rtol=1e-5)
  np.testing.assert_allclose(
    values['NCHW'].transpose(0, 2, 3, 1), expected, rtol=1e-5
  )
  assert np.abs(classic.transpose(0, 2, 3, 1) - expected).max() > 0.01


@pytest.mark.parametrize(
  'name,dataset,decayed',
  [
    ('official_resnet50', 'imagenet', True),
    ('nasnet', 'imagenet', True),
    ('nasnetlarge', 'imagenet', True),
    ('nasnet', 'cifar10', True),
    ('mobilenet', 'imagenet', True),
    ('mobilenet_v2', 'imagenet', False),
    ('resnet50', 'imagenet', False),
    ('inception3', 'imagenet', False),
    ('resnet20', 'cifar10', False),
  ],
)
def test_l2_covers_batch_norm_where_the_classic_filter_missed_it(
  name, dataset, decayed
):
  """The classic L2 term skipped variables whose name held 'batchnorm' (its
  own builder's); slim's ('BatchNorm', '*_bn') and the official models'
  ('batch_normalization') were decayed."""
  model = models.create_model(name, dataset)
  assert model.l2_decays_batch_norm is decayed
