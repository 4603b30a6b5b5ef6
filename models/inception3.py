"""Inception v3 (Szegedy et al. 2015, arXiv:1512.00567) for 299x299 ImageNet.

Layer widths are those of the released TF model (TF-slim's inception_v3 /
keras-applications InceptionV3): a 7-convolution stem, three 35x35 modules,
a grid reduction, four 17x17 modules with factorised 7x7 convolutions, a
second reduction and two 8x8 modules with split 1x3 / 3x1 branches. Every
convolution is conv - batch norm (no gamma, epsilon 0.001, as in the classic
harness) - ReLU.

No auxiliary head: the paper's training-time classifier on the last 17x17
module is not built, as the classic harness's `inception3` never built it
(tensorflow/benchmarks, models/inception_model.py: Inceptionv3Model's
auxiliary=False, and models/model_config.py constructs it without).

As the classic harness (and the original released graph) did, the pool
branch of the last module uses max pooling, the one before it average
pooling; parameters are the same either way.
"""

from models.model import Model


def conv_bn(net, filters, kernel_size, strides=1, padding='SAME', x=None):
  """Convolution - batch norm - ReLU, the unit every Inception is made of."""
  return net.conv(
    filters,
    kernel_size,
    strides,
    padding,
    batch_norm=True,
    use_bias=False,
    input_layer=x,
  )


def _chain(net, x, layers):
  """Applies (filters, kernel[, strides, padding]) convolutions in turn."""
  for layer in layers:
    x = conv_bn(net, *layer, x=x)
  return x


def module_35(net, pool_features):
  """35x35 module (Mixed_5b-d): 1x1 | 1x1-5x5 | 1x1-3x3-3x3 | avgpool-1x1."""
  x = net.top_layer
  with net.scope('mixed35'):
    return net.concat(
      [
        _chain(net, x, [(64, 1)]),
        _chain(net, x, [(48, 1), (64, 5)]),
        _chain(net, x, [(64, 1), (96, 3), (96, 3)]),
        _chain(
          net, net.avg_pool(3, 1, 'SAME', input_layer=x), [(pool_features, 1)]
        ),
      ]
    )


def reduction_35_to_17(net):
  """Mixed_6a: 3x3/2 conv | 1x1-3x3-3x3/2 | 3x3/2 max pool -> 17x17x768."""
  x = net.top_layer
  with net.scope('mixed35to17'):
    return net.concat(
      [
        _chain(net, x, [(384, 3, 2, 'VALID')]),
        _chain(net, x, [(64, 1), (96, 3), (96, 3, 2, 'VALID')]),
        net.max_pool(3, 2, input_layer=x),
      ]
    )


def module_17(net, width):
  """17x17 module (Mixed_6b-e) with 7x7 convolutions factorised into 1x7
  and 7x1; `width` is the inner width of the factorised branches."""
  x = net.top_layer
  with net.scope('mixed17'):
    return net.concat(
      [
        _chain(net, x, [(192, 1)]),
        _chain(net, x, [(width, 1), (width, (1, 7)), (192, (7, 1))]),
        _chain(
          net,
          x,
          [
            (width, 1),
            (width, (7, 1)),
            (width, (1, 7)),
            (width, (7, 1)),
            (192, (1, 7)),
          ],
        ),
        _chain(net, net.avg_pool(3, 1, 'SAME', input_layer=x), [(192, 1)]),
      ]
    )


def reduction_17_to_8(net):
  """Mixed_7a: 1x1-3x3/2 | 1x1-1x7-7x1-3x3/2 | 3x3/2 max pool -> 8x8x1280."""
  x = net.top_layer
  with net.scope('mixed17to8'):
    return net.concat(
      [
        _chain(net, x, [(192, 1), (320, 3, 2, 'VALID')]),
        _chain(
          net, x, [(192, 1), (192, (1, 7)), (192, (7, 1)), (192, 3, 2, 'VALID')]
        ),
        net.max_pool(3, 2, input_layer=x),
      ]
    )


def module_8(net, pool):
  """8x8 module (Mixed_7b-c): the 3x3 branches end in parallel 1x3 and 3x1
  convolutions whose outputs are concatenated (2048 channels in all)."""
  x = net.top_layer
  with net.scope('mixed8'):
    branch_3x3 = _chain(net, x, [(384, 1)])
    branch_double = _chain(net, x, [(448, 1), (384, 3)])
    pooled = (net.avg_pool if pool == 'avg' else net.max_pool)(
      3, 1, 'SAME', input_layer=x
    )
    return net.concat(
      [
        _chain(net, x, [(320, 1)]),
        conv_bn(net, 384, (1, 3), x=branch_3x3),
        conv_bn(net, 384, (3, 1), x=branch_3x3),
        conv_bn(net, 384, (1, 3), x=branch_double),
        conv_bn(net, 384, (3, 1), x=branch_double),
        _chain(net, pooled, [(192, 1)]),
      ]
    )


class Inception3(Model):
  """Inception v3 as the classic harness trains it: no auxiliary head (its
  Inceptionv3Model takes auxiliary=False, and its model table never sets
  it), so `inception3` builds, computes and sends what it did there."""

  batch_norm_config = dict(
    batch_norm_decay=0.999, batch_norm_epsilon=0.001, batch_norm_scale=False
  )

  def body(self, net):
    conv_bn(net, 32, 3, 2, 'VALID')  # 149x149
    conv_bn(net, 32, 3, 1, 'VALID')  # 147x147
    conv_bn(net, 64, 3)
    net.max_pool(3, 2)  # 73x73
    conv_bn(net, 80, 1, 1, 'VALID')
    conv_bn(net, 192, 3, 1, 'VALID')  # 71x71
    net.max_pool(3, 2)  # 35x35x192
    for pool_features in (32, 64, 64):
      module_35(net, pool_features)
    reduction_35_to_17(net)  # 17x17x768
    for width in (128, 160, 160, 192):
      module_17(net, width)
    reduction_17_to_8(net)  # 8x8x1280
    module_8(net, 'avg')
    module_8(net, 'max')  # 8x8x2048
    net.avg_pool(8, 1)
    net.flatten()
    return None
