"""DenseNets for CIFAR-10 (Huang et al. 2016, arXiv:1608.06993, Table 2).

DenseNet (L, k): a 3x3 16-filter stem, three dense blocks of (L - 4) / 3
layers, each layer BN-ReLU-3x3 conv adding k channels that are concatenated
to its input; between blocks a transition (BN-ReLU-1x1 conv keeping the width,
2x2 average pool); a final BN-ReLU and global average pooling. The plain
(not -BC) variant, as in the classic harness: no bottlenecks, no compression,
no dropout.

Layout follows the classic tf_cnn_benchmarks model, including two of its
choices: convolutions carry a bias (there is no batch norm right after them),
and the transition convolution is followed by a ReLU.
"""

from models import initializers
from models.model import Model


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
      # He init over the *output* fan (variance 2 / (9 k)), the classic
      # harness's choice: the concatenated input keeps growing, and a
      # fan-in scaling would shrink the later layers' initial outputs.
      y = net.conv(
        self.growth_rate,
        3,
        activation=None,
        input_layer=y,
        kernel_init=initializers.variance_scaling(2.0, 'fan_out'),
      )
      return net.concat([x, y])

  def _transition(self, net):
    width = net.top_size
    with net.scope('transition'):
      net.relu(input_layer=net.batch_norm())
      net.conv(
        width, 1, kernel_init=initializers.variance_scaling(2.0, 'fan_out')
      )
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
