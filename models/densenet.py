"""DenseNets for CIFAR-10 (Huang et al. 2016, arXiv:1608.06993, Table 2).

DenseNet (L, k): a 3x3 16-filter stem, three dense blocks of (L - 4) / 3
layers, each layer BN-ReLU-3x3 conv adding k channels that are concatenated
to its input; between blocks a transition (BN-ReLU-1x1 conv keeping the width,
2x2 average pool); a final BN-ReLU and global average pooling. The plain
(not -BC) variant, as in the classic harness: no bottlenecks, no compression,
no dropout.

Layout follows the classic tf_cnn_benchmarks model, including two of its
choices: convolutions carry a bias (there is no batch norm right after them),
and the transition convolution is followed by a ReLU. So do the initial
kernels: the dense and transition convolutions draw from a normal truncated
at two standard deviations with stddev sqrt(2 / (9 n)), n the convolution's
output width (k for a dense layer, the full width for a 1x1 transition), not
rescaled for the truncation; the stem keeps the builder's default.
"""

import math

from models import initializers
from models.model import Model


def _classic_init(width):
  """The classic harness's DenseNet kernel init: truncated normal with
  stddev sqrt(2 / (9 width)). The 9 is a 3x3 kernel's area, which the
  classic kept for the 1x1 transition too, whose initial weights are hence
  a third of He's over the output fan."""
  return initializers.truncated_normal(math.sqrt(2.0 / (9 * width)))


class CifarDenseNet(Model):
  """DenseNet (L, k) for 32x32 CIFAR-10."""

  # 0.1, divided by 10 at epochs 150 and 225 (of 300), as in the paper,
  # and once more after epoch 300, as the classic harness did.
  epoch_schedule = ((150, 225, 300), (0.1, 0.01, 0.001, 0.0001))

  def __init__(self, *model_args, depth, growth_rate):
    if (depth - 4) % 3:
      raise ValueError('DenseNet depth must be 3n + 4, got %s' % depth)
    super().__init__(*model_args)
    self.layers_per_block = (depth - 4) // 3
    self.growth_rate = growth_rate

  def _dense_layer(self, net):
    x = net.top_layer
    with net.scope('dense'):
      y = net.relu(input_layer=net.batch_norm(input_layer=x))
      # Scaled by the output fan (9 k), not the concatenated input, which
      # keeps growing along the block.
      y = net.conv(
        self.growth_rate,
        3,
        activation=None,
        input_layer=y,
        kernel_init=_classic_init(self.growth_rate),
      )
      return net.concat([x, y])

  def _transition(self, net):
    width = net.top_size
    with net.scope('transition'):
      net.relu(input_layer=net.batch_norm())
      net.conv(width, 1, kernel_init=_classic_init(width))
      return net.avg_pool(2, 2)

  def body(self, net):
    net.conv(16, 3, activation=None)
    for block in range(3):
      for _ in range(self.layers_per_block):
        self._dense_layer(net)
      if block < 2:
        self._transition(net)
    net.relu(input_layer=net.batch_norm())
    net.spatial_mean()
