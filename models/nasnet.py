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
two reduction cells in the body double F. Final ReLU, global average pool,
dropout 0.5, classifier.

Deviations, on purpose, for a throughput benchmark:
  * no drop-path (stochastic cell-branch dropping; slim used keep 0.7 for
    the large model, 1.0 -- i.e. none -- for mobile): a regulariser that
    adds only element-wise work;
  * the auxiliary head (on the cell before the second reduction, as in
    slim: 5x5/3 avg pool - 1x1 conv 128 - conv 768 over the whole map -
    classifier) is built, like slim's, only when training. Parameter and
    FLOP counts are of the inference network, without it.
"""

import collections

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


def _project(net, x, filters, stride=1):
  """1x1 conv - BN (no bias, no activation)."""
  return net.conv(
    filters,
    1,
    stride,
    activation=None,
    batch_norm=True,
    use_bias=False,
    input_layer=x,
  )


def _conv1x1_bn(net, x, filters, stride=1):
  """ReLU - 1x1 conv - BN: the projection used wherever widths differ."""
  return _project(net, net.relu(input_layer=x), filters, stride)


def factorized_reduction(net, x, filters, stride=2):
  """Halves the resolution without losing every other pixel: two 1x1
  convolutions (F/2 each) on stride-2 subsamples offset by one pixel,
  concatenated, then BN. With stride 1 just a 1x1 conv + BN."""
  if stride == 1:
    return _project(net, x, filters)
  with net.scope('factorized_reduction'):
    path1 = net.avg_pool(1, stride, input_layer=x)
    path1 = net.conv(
      filters // 2, 1, activation=None, use_bias=False, input_layer=path1
    )
    # Shift by one pixel: pad one row/column at the end, drop the first.
    if net.data_format == 'NHWC':
      shifted = net.pad_spatial(x, 0, 1)[:, 1:, 1:, :]
    else:
      shifted = net.pad_spatial(x, 0, 1)[:, :, 1:, 1:]
    path2 = net.avg_pool(1, stride, input_layer=shifted)
    path2 = net.conv(
      filters - filters // 2,
      1,
      activation=None,
      use_bias=False,
      input_layer=path2,
    )
    net.concat([path1, path2])
    return net.batch_norm()


def _apply(net, x, operation, stride, filters):
  """One cell operation on state `x`."""
  in_channels = int(x.shape[net.channel_axis])
  if operation.startswith('sep'):
    kernel = int(operation[3])
    for _ in range(2):
      x = net.relu(input_layer=x)
      x = net.separable_conv(
        filters,
        kernel,
        stride,
        activation=None,
        batch_norm=True,
        use_bias=False,
        input_layer=x,
      )
      stride = 1
    return x
  if operation == 'none':
    if stride > 1 or in_channels != filters:
      return _conv1x1_bn(net, x, filters, stride)
    return x
  pool = net.avg_pool if operation.startswith('avg') else net.max_pool
  x = pool(3, stride, 'SAME', input_layer=x)
  if in_channels != filters:
    x = _project(net, x, filters)
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
      prev = _conv1x1_bn(net, prev, filters)
    states = [_conv1x1_bn(net, x, filters), prev]
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


def auxiliary_head(net, x):
  """Features of the auxiliary classifier (training only); keeps the top."""
  top = net.top_layer
  with net.scope('aux'):
    y = net.relu(input_layer=x)
    y = net.avg_pool(5, 3, input_layer=y)
    y = net.conv(128, 1, batch_norm=True, use_bias=False, input_layer=y)
    y = net.conv(
      768,
      _height(net, y),
      padding='VALID',
      batch_norm=True,
      use_bias=False,
      input_layer=y,
    )
    features = net.flatten(input_layer=y)
  net.set_top(top)
  return features


class NASNet(Model):
  """NASNet-A for ImageNet."""

  batch_norm_config = dict(batch_norm_decay=0.9997, batch_norm_epsilon=0.001)

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
    x = net.conv(
      self.stem_filters,
      3,
      2,
      'VALID',
      activation=None,
      batch_norm=True,
      use_bias=False,
    )
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
      if stack == 1:
        aux_input = x
    net.relu(input_layer=x)
    net.spatial_mean()
    net.dropout(0.5)
    # Built last, so that the trunk's layer numbering (hence its variable
    # names) is the same with and without the head.
    return auxiliary_head(net, aux_input) if net.is_training else None


class NASNetCifar(NASNet):
  """NASNet-A 6 @ 768 for 32x32 CIFAR-10 (the classic cifar10 nasnet).

  Stem: one 3x3 stride-1 convolution of 3 x F filters, no reduction cells.
  """

  def stem(self, net) -> list:
    x = net.conv(
      self.stem_filters, 3, 1, activation=None, batch_norm=True, use_bias=False
    )
    return [None, x]
