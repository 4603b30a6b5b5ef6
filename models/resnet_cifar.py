"""CIFAR-10 ResNets (He et al. 2015 section 4.2; v2 from He et al. 2016).

Depth 6n + 2: a 3x3 16-filter stem, three stages of n basic blocks (two 3x3
convolutions) with 16, 32 and 64 filters, global average pooling, classifier.
Downsampling blocks use the parameter-free "option A" shortcut: subsample by
the stride and zero-pad the new channels. Layout follows the classic
tf_cnn_benchmarks models, including two of its choices: the v1 stem is conv-BN
without a ReLU, and strided 3x3 convolutions use SAME padding.
"""

import tensorflow as tf

from models.model import Model

_STAGE_WIDTHS = (16, 32, 64)


def basic_block(net, depth, stride, *, pre_activation):
  """Two 3x3 convolutions plus an identity / option-A shortcut."""
  x = net.top_layer
  in_channels = int(x.shape[net.channel_axis])
  if in_channels != depth:
    shortcut = net.avg_pool(1, stride, input_layer=x)
    pad = (depth - in_channels) // 2
    shortcut = net.pad_channels(shortcut, pad, depth - in_channels - pad)
  else:
    shortcut = x
  if pre_activation:
    x = net.relu(input_layer=net.batch_norm(input_layer=x))
  net.conv(depth, 3, stride, batch_norm=True, input_layer=x)
  if pre_activation:
    residual = net.conv(depth, 3, 1, activation=None, use_bias=False)
    return net.set_top(shortcut + residual)
  residual = net.conv(depth, 3, 1, activation=None, batch_norm=True)
  return net.set_top(tf.nn.relu(shortcut + residual))


class CifarResNet(Model):
  """ResNet-(6n+2) for 32x32 CIFAR-10."""

  # 0.1, then 0.01 / 0.001 / 0.0002 after epochs 82 / 123 / 300.
  epoch_schedule = ((82, 123, 300), (0.1, 0.01, 0.001, 0.0002))

  def __init__(self, *model_args, depth, version):
    if (depth - 2) % 6:
      raise ValueError('CIFAR ResNet depth must be 6n + 2, got %s' % depth)
    if version not in ('v1', 'v2'):
      raise ValueError('unknown ResNet version %r' % (version,))
    super().__init__(*model_args)
    self.blocks_per_stage = (depth - 2) // 6
    self.version = version

  def body(self, net):
    v2 = self.version == 'v2'
    net.conv(16, 3, 1, batch_norm=True, activation='relu' if v2 else None)
    for stage, width in enumerate(_STAGE_WIDTHS):
      for i in range(self.blocks_per_stage):
        stride = 2 if stage > 0 and i == 0 else 1
        with net.scope('block'):
          basic_block(net, width, stride, pre_activation=v2)
    if v2:
      net.batch_norm()
      net.relu()
    net.spatial_mean()
