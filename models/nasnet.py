"""NASNet-A (Zoph et al. 2017, arXiv:1707.07012): mobile and large.

The searched normal and reduction cells (figure 4 of the paper, encoded as in
TF-slim's nasnet, which the classic harness's model followed): each cell
starts from the current input h and the previous cell's output p (both
projected to the cell's width F), appends five states, each the sum of two
operations on earlier states, and concatenates a fixed subset of the states
(all but h in a normal cell, the last four in a reduction cell).
Separable operations are two (ReLU - separable conv - BN) layers; 'none' is
the identity (or a ReLU-1x1 conv-BN where shapes differ). An input from a
cell of twice the resolution is brought down by a "factorised reduction"
(two offset 1x1 convolutions on stride-2 subsamples, concatenated).

  * nasnet (NASNet-A 4 @ 1056): 224x224, N = 4 normal cells per stack,
    F = 44, stem 32 filters.
  * nasnetlarge (NASNet-A 6 @ 4032): 331x331, N = 6, F = 168, stem 96
    filters, and the first normal cell after a reduction takes as its p the
    output from one cell earlier than the reduction's input (slim's
    skip_reduction_layer_input).

Two stem reduction cells (widths F/4, F/2) follow a 3x3/2 convolution; the
two reduction cells in the body double F. Final ReLU and global average
pool; `Model.build` adds the classifier.

As the classic harness built it: its NasnetModel / NasnetLargeModel /
NasnetCifarModel called TF-slim's build_nasnet_* without `num_classes` and
outside slim's nasnet arg scope, so
  * every convolution (the separable ones too) kept slim's defaults: a bias
    and a ReLU (conv - bias - ReLU - BN), Glorot-uniform kernels; the batch
    norms kept slim's too: no gamma, decay 0.999, epsilon 0.001 (one bias
    per BN channel replaces the gamma: the parameter count is the paper's);
  * there is no auxiliary head (slim builds it only with num_classes) and
    no dropout (slim returns at the global pool without num_classes);
  * under --use_fp16 the separable convolutions and their batch norms
    compute in float32 (slim's _stacked_separable_conv casts).

Deviation, on purpose, for a throughput benchmark: no drop-path (stochastic
cell-branch dropping; the classic used keep 0.7 for the large model, 0.6 on
cifar10, none for mobile): a regulariser that adds only element-wise work.
"""

import collections

import tensorflow as tf

from models import initializers
from models.model import Model

Cell = collections.namedtuple('Cell', ['operations', 'inputs', 'outputs'])

# Operation pairs (left, right), the state each reads, and the states
# concatenated into the cell's output. State 0 is the projected current input
# h, state 1 the projected previous output p, states 2-6 the pair sums.
NORMAL_CELL = Cell(
  operations=(
    'sep5x5',
    'sep3x3',
    'sep5x5',
    'sep3x3',
    'avg3x3',
    'none',
    'avg3x3',
    'avg3x3',
    'sep3x3',
    'none',
  ),
  inputs=(0, 1, 1, 1, 0, 1, 1, 1, 0, 0),
  outputs=(1, 2, 3, 4, 5, 6),
)
REDUCTION_CELL = Cell(
  operations=(
    'sep5x5',
    'sep7x7',
    'max3x3',
    'sep7x7',
    'avg3x3',
    'sep5x5',
    'none',
    'avg3x3',
    'sep3x3',
    'max3x3',
  ),
  inputs=(0, 1, 0, 1, 0, 1, 3, 2, 2, 0),
  outputs=(3, 4, 5, 6),
)


def _height(net, x):
  return int(x.shape[1 if net.data_format == 'NHWC' else 2])


def _conv(net, x, filters, kernel_size=1, strides=1, padding='SAME'):
  """Convolution - bias - ReLU: slim.conv2d's defaults, which the classic
  harness's NASNet never overrode."""
  return net.conv(
    filters,
    kernel_size,
    strides,
    padding,
    activation='relu',
    use_bias=True,
    kernel_init=initializers.glorot_uniform(),
    input_layer=x,
  )


def _conv_bn(net, x, filters, kernel_size=1, strides=1, padding='SAME'):
  """Convolution - bias - ReLU - BN (see `_conv`)."""
  return net.batch_norm(
    input_layer=_conv(net, x, filters, kernel_size, strides, padding)
  )


def _relu_conv1x1_bn(net, x, filters, stride=1):
  """ReLU - 1x1 conv - BN: the projection used wherever widths differ."""
  return _conv_bn(net, net.relu(input_layer=x), filters, 1, stride)


def factorized_reduction(net, x, filters, stride=2):
  """Halves the resolution without losing every other pixel: two 1x1
  convolutions (F/2 each) on stride-2 subsamples offset by one pixel,
  concatenated, then BN. With stride 1 just a 1x1 conv + BN."""
  if stride == 1:
    return _conv_bn(net, x, filters)
  with net.scope('factorized_reduction'):
    path1 = _conv(net, net.avg_pool(1, stride, input_layer=x), filters // 2)
    # Shift by one pixel: pad one row/column at the end, drop the first.
    if net.data_format == 'NHWC':
      shifted = net.pad_spatial(x, 0, 1)[:, 1:, 1:, :]
    else:
      shifted = net.pad_spatial(x, 0, 1)[:, :, 1:, 1:]
    path2 = _conv(
      net,
      net.avg_pool(1, stride, input_layer=shifted),
      filters - filters // 2,
    )
    net.concat([path1, path2])
    return net.batch_norm()


def _separable_stack(net, x, kernel, stride, filters):
  """Two (ReLU - separable conv - bias - ReLU - BN) layers.

  In float32 when the network computes in float16, as the classic
  (nasnet_utils._stacked_separable_conv) did; the result is cast back.
  """
  dtype = x.dtype
  compute_dtype = tf.float32 if dtype == tf.float16 else dtype
  with net.computing_in(compute_dtype):
    x = tf.cast(x, compute_dtype)  # the identity unless float16
    for _ in range(2):
      x = net.separable_conv(
        filters,
        kernel,
        stride,
        activation='relu',
        use_bias=True,
        kernel_init=initializers.glorot_uniform(),
        input_layer=net.relu(input_layer=x),
      )
      x = net.batch_norm()
      stride = 1
  return net.set_top(tf.cast(x, dtype))


def _apply(net, x, operation, stride, filters):
  """One cell operation on state `x`."""
  in_channels = int(x.shape[net.channel_axis])
  if operation.startswith('sep'):
    return _separable_stack(net, x, int(operation[3]), stride, filters)
  if operation == 'none':
    if stride > 1 or in_channels != filters:
      return _relu_conv1x1_bn(net, x, filters, stride)
    return x
  pool = net.avg_pool if operation.startswith('avg') else net.max_pool
  x = pool(3, stride, 'SAME', input_layer=x)
  if in_channels != filters:
    x = _conv_bn(net, x, filters)
  return x


def cell(net, x, prev, spec, filters, stride):
  """Builds one normal (stride 1) or reduction (stride 2) cell."""
  with net.scope('cell'):
    # Bring p to h's resolution and the cell's width.
    if prev is None:
      prev = x
    elif _height(net, prev) != _height(net, x):
      prev = factorized_reduction(net, net.relu(input_layer=prev), filters)
    elif int(prev.shape[net.channel_axis]) != filters:
      prev = _relu_conv1x1_bn(net, prev, filters)
    states = [_relu_conv1x1_bn(net, x, filters), prev]
    for i in range(0, 10, 2):
      pair = []
      for j in (i, i + 1):
        source = spec.inputs[j]
        # Only the cell's inputs are strided; new states are already
        # at the output resolution.
        pair.append(
          _apply(
            net,
            states[source],
            spec.operations[j],
            stride if source < 2 else 1,
            filters,
          )
        )
      states.append(pair[0] + pair[1])
    final_height = _height(net, states[-1])
    outputs = []
    for index in spec.outputs:
      state = states[index]
      if _height(net, state) != final_height:
        state = factorized_reduction(net, state, filters)
      elif int(state.shape[net.channel_axis]) != filters:
        state = factorized_reduction(net, state, filters, stride=1)
      outputs.append(state)
    return net.concat(outputs)


class NASNet(Model):
  """NASNet-A for ImageNet."""

  # slim.batch_norm's defaults (the classic never entered slim's nasnet
  # arg scope, whose decay 0.9997 and gamma it therefore did not use).
  batch_norm_config = dict(
    batch_norm_decay=0.999, batch_norm_epsilon=0.001, batch_norm_scale=False
  )
  # slim named their batch norms '*_bn' / 'BatchNorm', which the classic
  # harness's L2 filter (names containing 'batchnorm') never caught.
  l2_decays_batch_norm = True

  def __init__(
    self,
    *model_args,
    cells_per_stack,
    filters,
    stem_filters,
    skip_reduction_input,
  ):
    super().__init__(*model_args)
    self.cells_per_stack = cells_per_stack
    self.filters = filters
    self.stem_filters = stem_filters
    self.skip_reduction_input = skip_reduction_input

  def stem(self, net) -> list:
    """The stem's outputs: [None, conv, reduction cell 1, reduction cell 2]."""
    x = _conv_bn(net, net.top_layer, self.stem_filters, 3, 2, 'VALID')
    outputs = [None, x]
    for scale in (4, 2):  # two stem reduction cells, widths F/4 and F/2
      x = cell(net, x, outputs[-2], REDUCTION_CELL, self.filters // scale, 2)
      outputs.append(x)
    return outputs

  def body(self, net):
    outputs = self.stem(net)
    x = outputs[-1]
    filters = self.filters
    for stack in range(3):
      if stack > 0:
        filters *= 2
        before = outputs[-2]
        x = cell(net, x, outputs[-2], REDUCTION_CELL, filters, 2)
        outputs.append(x)
      for i in range(self.cells_per_stack):
        # The large model's first normal cell after a reduction skips
        # the reduction's input and reads the cell before it.
        if stack > 0 and i == 0 and self.skip_reduction_input:
          prev = before
        else:
          prev = outputs[-2]
        x = cell(net, x, prev, NORMAL_CELL, filters, 1)
        outputs.append(x)
    net.relu(input_layer=x)
    net.spatial_mean()


class NASNetCifar(NASNet):
  """NASNet-A 6 @ 768 for 32x32 CIFAR-10 (the classic cifar10 nasnet).

  Stem: one 3x3 stride-1 convolution of 3 x F filters, no reduction cells.
  """

  def stem(self, net) -> list:
    return [None, _conv_bn(net, net.top_layer, self.stem_filters, 3)]
