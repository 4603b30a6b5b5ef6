"""MobileNet v2 (Sandler et al. 2018, arXiv:1801.04381, Table 2), width 1.0.

A 3x3/2 convolution (32), 17 inverted-residual bottlenecks, a 1x1
convolution to 1280, global average pooling and the classifier. A bottleneck
expands with a 1x1 convolution (factor t, skipped for t = 1), filters with a
3x3 depthwise convolution (both BN - ReLU6), projects back with a linear 1x1
convolution + BN, and adds its input when the stride is 1 and the width is
unchanged. Batch norm has a gamma (decay 0.997, epsilon 0.001, as TF-slim's
mobilenet_v2).
"""

import tensorflow as tf

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


def inverted_residual(net, expansion, filters, stride):
  """Expand (1x1) - depthwise 3x3 - project (linear 1x1) [+ input]."""
  x = net.top_layer
  in_channels = net.top_size
  with net.scope('bottleneck'):
    if expansion != 1:
      conv_bn_relu6(net, in_channels * expansion, 1)
    depthwise_bn(net, stride)
    y = net.conv(filters, 1, batch_norm=True, use_bias=False, activation=None)
    if stride == 1 and in_channels == filters:
      # Linear bottlenecks: the sum has no activation after it.
      y = net.set_top(tf.add(x, y))
    return y


class MobileNetV2(Model):
  """MobileNet v2 for 224x224 ImageNet."""

  batch_norm_config = dict(batch_norm_decay=0.997, batch_norm_epsilon=0.001)

  def body(self, net):
    conv_bn_relu6(net, 32, 3, 2)
    for expansion, filters, repeats, stride in _BOTTLENECKS:
      for i in range(repeats):
        inverted_residual(net, expansion, filters, stride if i == 0 else 1)
    conv_bn_relu6(net, 1280, 1)
    net.spatial_mean()
