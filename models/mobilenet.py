"""MobileNet v1 (Howard et al. 2017, arXiv:1704.04861, Table 1), width 1.0.

A 3x3/2 convolution, then 13 depthwise-separable blocks (3x3 depthwise -
BN - ReLU6 - 1x1 pointwise - BN - ReLU6), global average pooling and the
classifier. ReLU6, batch norm with gamma (decay 0.9997, epsilon 0.001) and
the dropout before the classifier (keep 0.999) follow TF-slim's
mobilenet_v1, which the classic harness used.
"""

from models.model import Model

# (pointwise filters, depthwise stride) of the 13 separable blocks.
_BLOCKS = (
  (64, 1),
  (128, 2),
  (128, 1),
  (256, 2),
  (256, 1),
  (512, 2),
  (512, 1),
  (512, 1),
  (512, 1),
  (512, 1),
  (512, 1),
  (1024, 2),
  (1024, 1),
)


def conv_bn_relu6(
  net, filters, kernel_size, strides=1, *, x=None, kernel_init=None
):
  """Convolution - batch norm - ReLU6, no bias (kernel_init: as
  NetBuilder.conv's)."""
  return net.conv(
    filters,
    kernel_size,
    strides,
    batch_norm=True,
    use_bias=False,
    activation='relu6',
    kernel_init=kernel_init,
    input_layer=x,
  )


def depthwise_bn(net, strides, *, activation='relu6', kernel_init=None):
  """3x3 depthwise convolution - batch norm - activation, no bias
  (kernel_init: as NetBuilder.depthwise_conv's)."""
  return net.depthwise_conv(
    3,
    strides,
    batch_norm=True,
    use_bias=False,
    activation=activation,
    kernel_init=kernel_init,
  )


class MobileNet(Model):
  """MobileNet v1 for 224x224 ImageNet."""

  batch_norm_config = dict(batch_norm_decay=0.9997, batch_norm_epsilon=0.001)

  def body(self, net):
    conv_bn_relu6(net, 32, 3, 2)
    for filters, stride in _BLOCKS:
      with net.scope('separable'):
        depthwise_bn(net, stride)
        conv_bn_relu6(net, filters, 1)
    net.spatial_mean()
    net.dropout(0.001)
