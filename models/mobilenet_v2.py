"""MobileNet v2 (Sandler et al. 2018, arXiv:1801.04381, Table 2), width 1.0.

A 3x3/2 convolution (32), 17 inverted-residual bottlenecks, a 1x1
convolution to 1280, global average pooling and the classifier. A bottleneck
expands with a 1x1 convolution (factor t, skipped for t = 1), filters with a
3x3 depthwise convolution (both BN - ReLU6), projects back with a linear 1x1
convolution + BN, and adds its input when the stride is 1 and the width is
unchanged. Batch norm has a gamma (decay 0.997, epsilon 0.001, as TF-slim's
mobilenet_v2).

With `tf_slim` (the classic `mobilenet`), the network the classic harness
built from TF-slim's mobilenet_v2 under its training_scope: every kernel
drawn from a normal truncated at two standard deviations with stddev 0.09,
and slim's own logits layer -- dropout (keep 0.8, training only), a 1x1
convolution with bias to 1001 outputs -- between the pooling and the
classifier, which the classic shared head added on top (1001 -> classes).
"""

import tensorflow as tf

from models import initializers
from models.mobilenet import conv_bn_relu6
from models.mobilenet import depthwise_bn
from models.model import Model

# Table 2: (expansion t, output channels c, repeats n, first stride s).
_BOTTLENECKS = (
  (1, 16, 1, 1),
  (6, 24, 2, 2),
  (6, 32, 3, 2),
  (6, 64, 4, 2),
  (6, 96, 3, 1),
  (6, 160, 3, 2),
  (6, 320, 1, 1),
)

# TF-slim mobilenet training_scope's weights_initializer stddev (not
# rescaled for the truncation).
_SLIM_STDDEV = 0.09
# slim's mobilenet() logits width: its num_classes default, which the classic
# MobilenetModel never overrode.
_SLIM_LOGITS = 1001
# slim's Dropout in the Logits scope: keep_prob 0.8.
_SLIM_DROPOUT_RATE = 0.2


def inverted_residual(net, expansion, filters, stride, kernel_init=None):
  """Expand (1x1) - depthwise 3x3 - project (linear 1x1) [+ input]."""
  x = net.top_layer
  in_channels = net.top_size
  with net.scope('bottleneck'):
    if expansion != 1:
      conv_bn_relu6(net, in_channels * expansion, 1, kernel_init=kernel_init)
    depthwise_bn(net, stride, kernel_init=kernel_init)
    y = net.conv(
      filters,
      1,
      batch_norm=True,
      use_bias=False,
      activation=None,
      kernel_init=kernel_init,
    )
    if stride == 1 and in_channels == filters:
      # Linear bottlenecks: the sum has no activation after it.
      y = net.set_top(tf.add(x, y))
    return y


class MobileNetV2(Model):
  """MobileNet v2 for 224x224 ImageNet; `tf_slim`: as the classic harness
  built it (see the module docstring)."""

  batch_norm_config = dict(batch_norm_decay=0.997, batch_norm_epsilon=0.001)

  def __init__(self, *model_args, tf_slim):
    super().__init__(*model_args)
    self.tf_slim = tf_slim
    # slim named its batch norms 'BatchNorm', which the classic harness's
    # L2 filter (names containing 'batchnorm') never caught.
    self.l2_decays_batch_norm = tf_slim

  def body(self, net):
    init = None
    if self.tf_slim:
      init = initializers.truncated_normal(_SLIM_STDDEV)
    conv_bn_relu6(net, 32, 3, 2, kernel_init=init)
    for expansion, filters, repeats, stride in _BOTTLENECKS:
      for i in range(repeats):
        inverted_residual(
          net, expansion, filters, stride if i == 0 else 1, kernel_init=init
        )
    conv_bn_relu6(net, 1280, 1, kernel_init=init)
    net.spatial_mean()
    if self.tf_slim:
      # slim's 1x1 convolution on the pooled 1x1 map is this affine layer.
      net.dropout(_SLIM_DROPOUT_RATE)
      net.affine(_SLIM_LOGITS, activation=None, stddev=_SLIM_STDDEV)
