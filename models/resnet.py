"""ResNet for ImageNet: bottleneck (50 and up) or basic (18, 34) blocks,
versions v1, v1.5, v2.

  * v1 (He et al. 2015, arXiv:1512.03385): post-activation; a downsampling
    block strides in its first 1x1 convolution. The classic default.
  * v1.5: v1 with the stride moved to the 3x3 convolution (fb.resnet.torch;
    Goyal et al. 2017, arXiv:1706.02677). Same parameters, ~6% more FLOPs.
  * v2 (He et al. 2016, arXiv:1603.05027): pre-activation (BN-ReLU before
    each convolution, a final BN-ReLU after the last block).

The first block of each stage has a projection shortcut (1x1 conv); stage
widths 256/512/1024/2048 with bottlenecks of a quarter of that (basic
blocks: 64/128/256/512). `ResNet` (the classic resnet* names) follows the
classic tf_cnn_benchmarks models, including their v2 quirks: a BN-ReLU
stem followed by the first block's own pre-activation, and the stride in a
bottleneck's 1x1. `OfficialResNet` (the classic official_resnet* names)
follows the TF official models' r1 resnet_model.py that the classic harness
imported: v1 strides in the 3x3 (v1.5 here), v2 has a bare stem conv and
strides in the 3x3, basic-block nets project in stage 1 too (64 -> 64),
batch norm decays at 0.997, and the L2 term covers batch-norm gamma/beta.
"""

import tensorflow as tf

from models import initializers
from models import schedules
from models.model import Model

# Bottleneck width of each stage; the block output is 4x wider.
_STAGE_WIDTHS = (64, 128, 256, 512)
_LAYER_COUNTS = {
  18: (2, 2, 2, 2),
  34: (3, 4, 6, 3),
  50: (3, 4, 6, 3),
  101: (3, 4, 23, 3),
  152: (3, 8, 36, 3),
  200: (3, 24, 36, 3),
}
# Depths built from basic (two 3x3) blocks rather than bottlenecks.
_BASIC_BLOCK_DEPTHS = (18, 34)


def _shortcut(net, x, depth, stride, *, project, batch_norm):
  """x itself, or a 1x1 projection of it (the first block of a stage).

  Only a stage's first block strides or changes the width, and it always
  projects, so an identity shortcut never needs subsampling.
  """
  if not project:
    return x
  return net.conv(
    depth,
    1,
    stride,
    activation=None,
    batch_norm=batch_norm,
    use_bias=False,
    input_layer=x,
  )


def _preactivated(net, depth, stride, project):
  """(BN-ReLU of the top layer, the v2 shortcut). An identity shortcut
  carries the un-normalised input; a projection reads the pre-activation
  (both as in the paper)."""
  x = net.top_layer
  preact = net.relu(input_layer=net.batch_norm(input_layer=x))
  shortcut = _shortcut(
    net,
    preact if project else x,
    depth,
    stride,
    project=project,
    batch_norm=False,
  )
  return preact, shortcut


def bottleneck_v1(net, depth, bottleneck, stride, *, project, stride_in_3x3):
  """1x1 -> 3x3 -> 1x1, each conv-BN, ReLU after the residual sum.

  `stride_in_3x3` selects v1.5 (stride in the 3x3) over v1 (in the 1x1).
  """
  x = net.top_layer
  shortcut = _shortcut(net, x, depth, stride, project=project, batch_norm=True)
  stride_1x1, stride_3x3 = (1, stride) if stride_in_3x3 else (stride, 1)
  net.conv(bottleneck, 1, stride_1x1, batch_norm=True, input_layer=x)
  net.conv(bottleneck, 3, stride_3x3, 'FIXED', batch_norm=True)
  residual = net.conv(depth, 1, 1, activation=None, batch_norm=True)
  return net.set_top(tf.nn.relu(shortcut + residual))


def bottleneck_v2(net, depth, bottleneck, stride, *, project, stride_in_3x3):
  """Pre-activation bottleneck: BN-ReLU, then 1x1 -> 3x3 -> 1x1, plain sum.

  The stride is in the 1x1 (the classic resnet*_v2) or, with
  `stride_in_3x3`, in the 3x3 (the official *_v2).
  """
  preact, shortcut = _preactivated(net, depth, stride, project)
  stride_1x1, stride_3x3 = (1, stride) if stride_in_3x3 else (stride, 1)
  net.conv(bottleneck, 1, stride_1x1, batch_norm=True, input_layer=preact)
  net.conv(bottleneck, 3, stride_3x3, 'FIXED', batch_norm=True)
  residual = net.conv(depth, 1, 1, activation=None, use_bias=False)
  return net.set_top(shortcut + residual)


def basic_block_v1(net, depth, stride, *, project):
  """3x3 -> 3x3, each conv-BN, ReLU after the residual sum."""
  x = net.top_layer
  shortcut = _shortcut(net, x, depth, stride, project=project, batch_norm=True)
  net.conv(depth, 3, stride, 'FIXED', batch_norm=True, input_layer=x)
  residual = net.conv(depth, 3, 1, 'FIXED', activation=None, batch_norm=True)
  return net.set_top(tf.nn.relu(shortcut + residual))


def basic_block_v2(net, depth, stride, *, project):
  """Pre-activation basic block: BN-ReLU, then 3x3 -> 3x3, plain sum."""
  preact, shortcut = _preactivated(net, depth, stride, project)
  net.conv(depth, 3, stride, 'FIXED', batch_norm=True, input_layer=preact)
  residual = net.conv(depth, 3, 1, 'FIXED', activation=None, use_bias=False)
  return net.set_top(shortcut + residual)


class ResNetNetwork(Model):
  """ResNet for 224x224 ImageNet: the network, whatever schedule.

  The schedule: the default learning rate (models/declared.py) at a global
  batch of BASE_BATCH_SIZE, scaled linearly with the global batch, divided
  by 10 after epochs 30, 60, 80 and 90; subclasses add a warm-up.

  The two v2 layouts (class attributes): the classic resnet*_v2 put a
  BN-ReLU after the stem conv (`v2_stem_batch_norm`) and stride a
  bottleneck in its 1x1; the official *_v2 do neither.
  """

  BASE_BATCH_SIZE = 256
  v2_stem_batch_norm = True
  v2_stride_in_3x3 = False

  def __init__(self, *model_args, depth, version):
    if version not in ('v1', 'v1.5', 'v2'):
      raise ValueError('unknown ResNet version %r' % (version,))
    super().__init__(*model_args)
    self.layer_counts = _LAYER_COUNTS[depth]
    self.version = version
    self.basic_blocks = depth in _BASIC_BLOCK_DEPTHS

  def body(self, net):
    v2 = self.version == 'v2'
    if v2 and not self.v2_stem_batch_norm:
      net.conv(64, 7, 2, 'FIXED', activation=None, use_bias=False)
    else:
      net.conv(64, 7, 2, 'FIXED', batch_norm=True)
    net.max_pool(3, 2, 'SAME')
    for stage, (blocks, width) in enumerate(
      zip(self.layer_counts, _STAGE_WIDTHS)
    ):
      for i in range(blocks):
        # The first block of stages 2-4 halves the resolution; the first
        # block of every stage has a projection shortcut (stage 1's basic
        # block too, 64 -> 64, as the official models' block_layer).
        stride = 2 if stage > 0 and i == 0 else 1
        with net.scope('block'):
          self._block(net, width, stride, project=i == 0)
    if v2:
      net.batch_norm()
      net.relu()
    net.spatial_mean()

  def _block(self, net, width, stride, *, project):
    """One residual block of a stage of `width` (bottleneck width)."""
    v2 = self.version == 'v2'
    if self.basic_blocks:
      block = basic_block_v2 if v2 else basic_block_v1
      return block(net, width, stride, project=project)
    block = bottleneck_v2 if v2 else bottleneck_v1
    stride_in_3x3 = self.v2_stride_in_3x3 if v2 else self.version == 'v1.5'
    return block(
      net,
      4 * width,
      width,
      stride,
      project=project,
      stride_in_3x3=stride_in_3x3,
    )

  def peak_learning_rate(self, global_batch_size):
    """The rate before the first decay: the base scaled to the batch."""
    return self.default_learning_rate * global_batch_size / self.BASE_BATCH_SIZE

  def decayed_learning_rate(
    self, global_step, global_batch_size, examples_per_epoch
  ):
    """The peak, /10 after epochs 30, 60, 80 and 90 (no warm-up)."""
    peak = self.peak_learning_rate(global_batch_size)
    batches_per_epoch = examples_per_epoch / global_batch_size
    boundaries = [int(batches_per_epoch * e) for e in (30, 60, 80, 90)]
    values = [peak * f for f in (1.0, 0.1, 0.01, 1e-3, 1e-4)]
    return schedules.piecewise_constant(global_step, boundaries, values)

  def learning_rate(self, global_step, global_batch_size, examples_per_epoch):
    """The decayed schedule after `learning_rate_warmup`'s ramp, if any."""
    decayed = self.decayed_learning_rate(
      global_step, global_batch_size, examples_per_epoch
    )
    warmup = self.learning_rate_warmup(global_batch_size, examples_per_epoch)
    if warmup is None:
      return decayed
    steps, peak = warmup
    return schedules.linear_warmup(global_step, steps, peak, decayed)


class ResNet(ResNetNetwork):
  """The classic resnet50/101/152 names: a 5-epoch warm-up, then decays.

  Their default learning rate is classic's 0.128 at a global batch of 256
  (He et al. used 0.1); --resnet_base_lr replaces it.
  """

  def learning_rate_warmup(self, global_batch_size, examples_per_epoch):
    """A ramp from 0 to the peak over 5 epochs (the classic schedule)."""
    batches_per_epoch = examples_per_epoch / global_batch_size
    return (
      int(batches_per_epoch * 5),
      self.peak_learning_rate(global_batch_size),
    )


class OfficialResNet(ResNetNetwork):
  """The classic official_resnet* names: the TF official models' ResNets.

  Their schedule: 0.1 at a global batch of 256 (classic: 0.0125 per 32
  images), no warm-up, /10 after epochs 30, 60, 80 and 90; --resnet_base_lr
  does not apply, as in the classic harness. Their network differs from
  the resnet* names' as the module docstring says.
  """

  # tf.layers batch norm with momentum 0.997, epsilon 1e-5, center and
  # scale (official/r1/resnet/resnet_model.py's _BATCH_NORM_DECAY/EPSILON).
  batch_norm_config = dict(batch_norm_decay=0.997, batch_norm_epsilon=1e-5)
  v2_stem_batch_norm = False
  v2_stride_in_3x3 = True
  # Their batch-norm variables were named 'batch_normalization', which the
  # classic harness's L2 filter (names containing 'batchnorm') never caught.
  l2_decays_batch_norm = True

  def classifier_init(self):
    """tf.layers.dense's default kernel, Glorot uniform: the official
    model's own classifier, not the classic harness's final layer."""
    return initializers.glorot_uniform()
