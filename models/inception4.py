"""Inception v4 (Szegedy et al. 2016, arXiv:1602.07261, figures 3-9).

Stem to 35x35x384, four Inception-A, Reduction-A (k, l, m, n = 192, 224,
256, 384) to 17x17x1024, seven Inception-B, Reduction-B to 8x8x1536, three
Inception-C, average pooling, dropout (keep 0.8) and the classifier.
Convolutions are conv - batch norm (no gamma, epsilon 0.001) - ReLU, as in
inception3. No auxiliary head (the paper's v4 figure has none; neither did
the classic harness).
"""

from models.inception3 import conv_bn
from models.model import Model


def _chain(net, x, layers):
  for layer in layers:
    x = conv_bn(net, *layer, x=x)
  return x


def stem(net):
  """299x299x3 -> 35x35x384 (figure 3)."""
  conv_bn(net, 32, 3, 2, 'VALID')  # 149
  conv_bn(net, 32, 3, 1, 'VALID')  # 147
  x = conv_bn(net, 64, 3)
  x = net.concat(
    [net.max_pool(3, 2, input_layer=x), conv_bn(net, 96, 3, 2, 'VALID', x=x)]
  )  # 73x73x160
  x = net.concat(
    [
      _chain(net, x, [(64, 1), (96, 3, 1, 'VALID')]),
      _chain(
        net, x, [(64, 1), (64, (7, 1)), (64, (1, 7)), (96, 3, 1, 'VALID')]
      ),
    ]
  )  # 71x71x192
  return net.concat(
    [conv_bn(net, 192, 3, 2, 'VALID', x=x), net.max_pool(3, 2, input_layer=x)]
  )  # 35x35x384


def _branch(net, x, layers):
  """One branch of an Inception module on x: 'max' alone is a 3x3 stride-2
  max pool; a leading 'avg' pools 3x3 (stride 1, SAME) before the chain of
  conv_bn layers that follows."""
  if layers == ('max',):
    return net.max_pool(3, 2, input_layer=x)
  if layers[0] == 'avg':
    x = net.avg_pool(3, 1, 'SAME', input_layer=x)
    layers = layers[1:]
  return _chain(net, x, layers)


def _module(net, scope, branches):
  """The branches (see `_branch`) on the top layer, concatenated."""
  x = net.top_layer
  with net.scope(scope):
    return net.concat([_branch(net, x, layers) for layers in branches])


# The modules of figures 4, 7, 5 and 8: each branch's conv_bn layers as
# (filters, kernel[, stride, padding]); a kernel (h, w), in the classic
# harness's orientations (1x7 first in Inception-B's long branch).
_BLOCK_A = (
  ('avg', (96, 1)),
  ((96, 1),),
  ((64, 1), (96, 3)),
  ((64, 1), (96, 3), (96, 3)),
)
_REDUCTION_A = (
  ('max',),
  ((384, 3, 2, 'VALID'),),
  ((192, 1), (224, 3), (256, 3, 2, 'VALID')),
)
_BLOCK_B = (
  ('avg', (128, 1)),
  ((384, 1),),
  ((192, 1), (224, (1, 7)), (256, (7, 1))),
  ((192, 1), (192, (1, 7)), (224, (7, 1)), (224, (1, 7)), (256, (7, 1))),
)
_REDUCTION_B = (
  ('max',),
  ((192, 1), (192, 3, 2, 'VALID')),
  ((256, 1), (256, (1, 7)), (320, (7, 1)), (320, 3, 2, 'VALID')),
)


def block_a(net):
  """Inception-A (figure 4): 35x35x384 -> 35x35x384."""
  return _module(net, 'block_a', _BLOCK_A)


def reduction_a(net):
  """Reduction-A (figure 7): 35x35x384 -> 17x17x1024."""
  return _module(net, 'reduction_a', _REDUCTION_A)


def block_b(net):
  """Inception-B (figure 5): 17x17x1024 -> 17x17x1024."""
  return _module(net, 'block_b', _BLOCK_B)


def reduction_b(net):
  """Reduction-B (figure 8): 17x17x1024 -> 8x8x1536."""
  return _module(net, 'reduction_b', _REDUCTION_B)


def block_c(net):
  """Inception-C (figure 6): 8x8x1536 -> 8x8x1536."""
  x = net.top_layer
  with net.scope('block_c'):
    single = _chain(net, x, [(384, 1)])
    double = _chain(net, x, [(384, 1), (448, (1, 3)), (512, (3, 1))])
    # The classic harness's order: after the 1x3 / 3x1 pair on `single`,
    # the 3x1 on `double` comes before its 1x3.
    return net.concat(
      [
        _chain(net, net.avg_pool(3, 1, 'SAME', input_layer=x), [(256, 1)]),
        _chain(net, x, [(256, 1)]),
        conv_bn(net, 256, (1, 3), x=single),
        conv_bn(net, 256, (3, 1), x=single),
        conv_bn(net, 256, (3, 1), x=double),
        conv_bn(net, 256, (1, 3), x=double),
      ]
    )


class Inception4(Model):
  """Inception v4 for 299x299 ImageNet."""

  batch_norm_config = dict(
    batch_norm_decay=0.999, batch_norm_epsilon=0.001, batch_norm_scale=False
  )

  def body(self, net):
    stem(net)
    for _ in range(4):
      block_a(net)
    reduction_a(net)
    for _ in range(7):
      block_b(net)
    reduction_b(net)
    for _ in range(3):
      block_c(net)
    net.avg_pool(8, 1)
    net.flatten()
    net.dropout(0.2)
