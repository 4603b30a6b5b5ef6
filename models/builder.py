"""NetBuilder: a small sequential layer builder on raw `tf.nn` ops.

The builder keeps a "top" tensor (`top_layer`) and its channel/feature
count (`top_size`); each layer method reads the top, appends one layer and
makes the result the new top. Branching models (residual blocks) pass
`input_layer=` explicitly and read `top_layer` back.

Variables:
  * are created with `tf.compat.v1.get_variable` in one variable scope per
    layer (`conv0/kernel`, `conv0/biases`, `affine0/weights`, ...);
  * are always float32 and cast to the compute dtype where they are read, so
    16-bit compute still trains float32 master weights;
  * get initial values that depend only on (seed, name relative to the scope
    the builder was created in) -- see `initializers`.

Batch norm uses `tf.compat.v1.nn.fused_batch_norm`. Its moving statistics
are updated by explicit assign ops gathered in `builder.update_ops` (never
the global UPDATE_OPS collection), so a multi-tower driver can decide which
tower's statistics to keep.
"""

import collections
import contextlib
import contextvars
import zlib

import tensorflow as tf

from models import initializers

tf1 = tf.compat.v1

_16BIT = (tf.float16, tf.bfloat16)

# The global index of the tower being built (see `random_stream`).
_STREAM = contextvars.ContextVar('random_stream', default=0)


@contextlib.contextmanager
def random_stream(index: int):
  """Builders made inside draw the random masks of global tower `index`.

  Dropout's op seed is derived from (seed, index, layer name): every tower
  (and every worker's) draws its own mask, tower w*T+t of a cluster the
  mask of a local run's tower w*T+t, and a run stays reproducible. Without
  this context the index is 0.
  """
  token = _STREAM.set(int(index))
  try:
    yield
  finally:
    _STREAM.reset(token)


# False while building variables whose initial values are never used.
_INITIAL_VALUES = contextvars.ContextVar('initial_values', default=True)


@contextlib.contextmanager
def placeholder_initial_values():
  """Variables made inside start at zeros instead of their initial values.

  For a replica its variable manager overwrites after initialisation (with
  replica 0's values) and for a graph built only to be counted: the seeded
  initial values cost graph ops, start-up time and a random draw per
  parameter, and nothing would read them.
  """
  token = _INITIAL_VALUES.set(False)
  try:
    yield
  finally:
    _INITIAL_VALUES.reset(token)


def _not_xla_compiled():
  """Ops made inside are never XLA-compiled (explicit _XlaCompile=False)."""
  if tf.executing_eagerly():  # jit_scope exists only in graph mode
    return contextlib.nullcontext()
  return tf.xla.experimental.jit_scope(compile_ops=False)


def _pair(value):
  """Returns (a, b) from an int or a 2-sequence."""
  if isinstance(value, int):
    return value, value
  a, b = value
  return int(a), int(b)


def _depthwise_variance_scaling(shape, dtype, seed):
  """Variance scaling for a [kh, kw, in, multiplier] depthwise kernel.

  The generic fan computation would take `in` as part of the fan-in, but a
  depthwise output only sees kh * kw inputs.
  """
  kh, kw, _, _ = [int(d) for d in shape]
  stddev = (1.0 / (kh * kw)) ** 0.5 / initializers.TRUNCATED_NORMAL_STDDEV
  return initializers.truncated_normal(stddev)(shape, dtype, seed)


class NetBuilder:
  """Builds a CNN layer by layer on `tf.nn` ops, in NHWC or NCHW."""

  def __init__(
    self,
    images,
    *,
    is_training,
    data_format='NHWC',
    compute_dtype=tf.float32,
    seed=1234,
    batch_norm_decay=0.9,
    batch_norm_epsilon=1e-5,
    batch_norm_scale=True,
  ):
    """Starts a network whose first top layer is `images`.

    Args:
      images: float tensor in `data_format` layout; cast to compute_dtype.
      is_training: selects batch statistics vs moving statistics in batch
        norm and enables dropout.
      data_format: 'NHWC' or 'NCHW'.
      compute_dtype: tf.float32, tf.float16 or tf.bfloat16.
      seed: int; with a variable's relative name it fixes the initial value.
      batch_norm_decay, batch_norm_epsilon: defaults for `batch_norm`
        (0.9 / 1e-5 are what the classic ResNets used).
      batch_norm_scale: default for `batch_norm(scale=)`: whether batch
        norm learns a gamma (the Inceptions, as in the classic harness,
        do not: the following ReLU-conv makes it redundant).
    """
    if data_format not in ('NHWC', 'NCHW'):
      raise ValueError(
        'data_format must be NHWC or NCHW, got %r' % (data_format,)
      )
    compute_dtype = tf.as_dtype(compute_dtype)
    if compute_dtype not in (tf.float32,) + _16BIT:
      raise ValueError('unsupported compute dtype %s' % compute_dtype.name)
    self.is_training = bool(is_training)
    self.data_format = data_format
    self.channel_axis = 3 if data_format == 'NHWC' else 1
    self.compute_dtype = compute_dtype
    self.seed = int(seed)
    self.stream = _STREAM.get()
    self.batch_norm_decay = batch_norm_decay
    self.batch_norm_epsilon = batch_norm_epsilon
    self.batch_norm_scale = bool(batch_norm_scale)
    # Variable names are taken relative to this scope, so the same model
    # built under 'v0/', 'tower_1/' or no scope gets the same initial values.
    self._root = tf1.get_variable_scope().name
    self._counts = collections.defaultdict(int)
    self.update_ops = []
    self.top_layer = tf.cast(images, compute_dtype)
    self.top_size = int(self.top_layer.shape[self.channel_axis])

  # ----------------------------------------------------------------- helpers

  def set_top(self, tensor):
    """Makes `tensor` the top layer; `top_size` is its channel (4-D)
    or feature (2-D) count."""
    self.top_layer = tensor
    axis = self.channel_axis if tensor.shape.rank == 4 else -1
    self.top_size = int(tensor.shape[axis])
    return tensor

  def _unique(self, kind):
    """Returns 'kind<N>' with a per-kind counter: conv0, conv1, ..."""
    name = '%s%d' % (kind, self._counts[kind])
    self._counts[kind] += 1
    return name

  @contextlib.contextmanager
  def scope(self, kind):
    """Opens a uniquely numbered variable scope, e.g. for a residual block."""
    with tf1.variable_scope(self._unique(kind)) as scope:
      yield scope

  def relative_name(self, name):
    """Full name of variable `name` in the current scope, minus the root."""
    scope = tf1.get_variable_scope().name
    full = '%s/%s' % (scope, name) if scope else name
    if self._root and full.startswith(self._root + '/'):
      return full[len(self._root) + 1 :]
    return full

  def seed_for(self, name):
    """The stateless seed pair for variable `name` in the current scope."""
    digest = zlib.crc32(self.relative_name(name).encode('utf-8')) & 0x7FFFFFFF
    return (self.seed, digest)

  def variable(self, name, shape, init, *, trainable=True):
    """Creates a float32 variable whose initial value is fixed by (seed, name).

    Returns the variable itself; use `read` to get it in compute dtype.
    """
    if tf1.get_variable_scope().reuse is True:
      # The variable exists (a tower sharing another's variables): its
      # initial value would never run, so do not build it.
      return tf1.get_variable(
        name, shape, dtype=tf.float32, trainable=trainable
      )
    if not _INITIAL_VALUES.get():  # see placeholder_initial_values
      return tf1.get_variable(
        name,
        shape,
        dtype=tf.float32,
        initializer=tf1.zeros_initializer(),
        trainable=trainable,
      )
    # Stateless random ops promise the same numbers only on the same kind
    # of device, so every initial value is generated on the host CPU and
    # copied to wherever the variable lives. It is built here, not in a
    # callable initializer, because get_variable colocates a callable's
    # ops with the variable.
    # Never XLA-compiled either (--xla, --xla_compile): XLA's stateless
    # random ops draw other numbers than TensorFlow's kernels.
    with tf.device('/device:CPU:0'), _not_xla_compiled():
      value = init(shape, tf.float32, self.seed_for(name))
    return tf1.get_variable(
      name, dtype=tf.float32, initializer=value, trainable=trainable
    )

  @contextlib.contextmanager
  def computing_in(self, dtype):
    """Layers built inside compute in `dtype` (their variables are read in
    it); the caller casts their inputs to `dtype` and their outputs back.
    """
    saved = self.compute_dtype
    self.compute_dtype = tf.as_dtype(dtype)
    try:
      yield
    finally:
      self.compute_dtype = saved

  def read(self, var):
    """Casts a float32 variable to the compute dtype (the cast's gradient
    flows back to the float32 variable)."""
    if self.compute_dtype == tf.float32:
      return var
    return tf.cast(var, self.compute_dtype)

  def _nd(self, h, w):
    """A 4-vector (ksize / strides) with (h, w) in the spatial slots."""
    return [1, h, w, 1] if self.data_format == 'NHWC' else [1, 1, h, w]

  def _activate(self, x, activation):
    if activation in (None, 'linear'):
      return x
    if activation == 'relu':
      return tf.nn.relu(x)
    if activation == 'relu6':
      return tf.nn.relu6(x)
    if activation == 'tanh':
      return tf.nn.tanh(x)
    raise ValueError('unknown activation %r' % (activation,))

  def _fixed_pad(self, x, kh, kw):
    """Pads (k-1) pixels split begin/end, independent of the input size.

    Strided 'SAME' convolutions pad depending on the input size (and pad
    more at the end); ResNets pad a fixed amount so the result is the same
    for any input size and any framework.
    """
    ph, pw = kh - 1, kw - 1
    pads = [[0, 0], [ph // 2, ph - ph // 2], [pw // 2, pw - pw // 2]]
    if self.data_format == 'NHWC':
      pads = [pads[0], pads[1], pads[2], [0, 0]]
    else:
      pads = [pads[0], [0, 0], pads[1], pads[2]]
    return tf.pad(x, pads)

  # ------------------------------------------------------------------ layers

  def conv(
    self,
    filters,
    kernel_size,
    strides=1,
    padding='SAME',
    *,
    activation='relu',
    batch_norm=False,
    use_bias=True,
    bias_init=0.0,
    kernel_init=None,
    input_layer=None,
  ):
    """2-D convolution, then bias or batch norm, then activation.

    Args:
      filters: output channels.
      kernel_size, strides: int or (h, w).
      padding: 'SAME', 'VALID', or 'FIXED' (pad (k-1) split evenly, then
        VALID, when strided; SAME when not -- the ResNet convention).
      activation: 'relu', 'relu6', 'tanh', or None / 'linear'.
      batch_norm: follow the conv with batch norm instead of a bias.
      use_bias: add a bias when there is no batch norm.
      bias_init: initial bias value.
      kernel_init: an `initializers` function; default variance scaling
        (scale 1, fan_in, truncated normal), as the classic harness used.
      input_layer: input tensor; default the top layer.
    """
    x, in_channels = self._input_and_channels(input_layer)
    kh, kw = _pair(kernel_size)
    kernel_init = kernel_init or initializers.variance_scaling()
    with tf1.variable_scope(self._unique('conv')):
      kernel = self.variable(
        'kernel', [kh, kw, in_channels, filters], kernel_init
      )
      y = self._spatial(tf.nn.conv2d, x, kernel, (kh, kw), strides, padding)
      y = self._finish(y, filters, batch_norm, use_bias, bias_init, activation)
    return self.set_top(y)

  def _input_and_channels(self, input_layer):
    """(the layer's input: input_layer or the top layer, its channels)."""
    x = self.top_layer if input_layer is None else input_layer
    return x, int(x.shape[self.channel_axis])

  def _spatial(self, op, x, kernel, kernel_size, strides, padding):
    """op (conv2d or depthwise_conv2d) of x and the kernel's value, with
    'FIXED' padding resolved (see `conv`)."""
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(strides)
    x, padding = self._resolve_padding(x, padding, kh, kw, sh, sw)
    return op(
      x,
      self.read(kernel),
      strides=self._nd(sh, sw),
      padding=padding,
      data_format=self.data_format,
    )

  def _finish(self, y, channels, batch_norm, use_bias, bias_init, activation):
    """Bias or batch norm, then activation, in the current variable scope."""
    if batch_norm:
      y = self.batch_norm(y)
    elif use_bias:
      biases = self.variable(
        'biases', [channels], initializers.constant(bias_init)
      )
      y = tf.nn.bias_add(y, self.read(biases), data_format=self.data_format)
    return self._activate(y, activation)

  def depthwise_conv(
    self,
    kernel_size,
    strides=1,
    padding='SAME',
    *,
    depth_multiplier=1,
    activation='relu',
    batch_norm=False,
    use_bias=True,
    bias_init=0.0,
    kernel_init=None,
    input_layer=None,
  ):
    """Depthwise 2-D convolution (`tf.nn.depthwise_conv2d`): each input
    channel gets its own `depth_multiplier` filters, no mixing.

    Arguments as for `conv` ('FIXED' padding included); the output has
    in_channels * depth_multiplier channels. The default kernel init is
    variance scaling over the per-channel fan-in (kh * kw).
    """
    x, in_channels = self._input_and_channels(input_layer)
    kh, kw = _pair(kernel_size)
    kernel_init = kernel_init or _depthwise_variance_scaling
    with tf1.variable_scope(self._unique('dwconv')):
      kernel = self.variable(
        'depthwise_kernel', [kh, kw, in_channels, depth_multiplier], kernel_init
      )
      y = self._spatial(
        tf.nn.depthwise_conv2d, x, kernel, (kh, kw), strides, padding
      )
      channels = in_channels * depth_multiplier
      y = self._finish(y, channels, batch_norm, use_bias, bias_init, activation)
    return self.set_top(y)

  def separable_conv(
    self,
    filters,
    kernel_size,
    strides=1,
    padding='SAME',
    *,
    depth_multiplier=1,
    activation='relu',
    batch_norm=False,
    use_bias=True,
    bias_init=0.0,
    kernel_init=None,
    input_layer=None,
  ):
    """Depthwise convolution straight into a 1x1 pointwise one (no
    normalisation or activation in between), then bias or batch norm and
    activation: the NASNet "separable" op.

    Built as two ops (DepthwiseConv2dNative + Conv2D), so FLOP counting
    sees both. `kernel_init` (an `initializers` function) initialises both
    kernels; by default the depthwise one as `depthwise_conv`'s and the
    pointwise one as `conv`'s.
    """
    x, in_channels = self._input_and_channels(input_layer)
    kh, kw = _pair(kernel_size)
    with tf1.variable_scope(self._unique('sepconv')):
      depthwise = self.variable(
        'depthwise_kernel',
        [kh, kw, in_channels, depth_multiplier],
        kernel_init or _depthwise_variance_scaling,
      )
      pointwise = self.variable(
        'pointwise_kernel',
        [1, 1, in_channels * depth_multiplier, filters],
        kernel_init or initializers.variance_scaling(),
      )
      y = self._spatial(
        tf.nn.depthwise_conv2d, x, depthwise, (kh, kw), strides, padding
      )
      y = self._spatial(tf.nn.conv2d, y, pointwise, 1, 1, 'VALID')
      y = self._finish(y, filters, batch_norm, use_bias, bias_init, activation)
    return self.set_top(y)

  def _resolve_padding(self, x, padding, kh, kw, sh, sw):
    """Applies 'FIXED' padding (see `conv`); returns (x, tf padding)."""
    if padding != 'FIXED':
      return x, padding
    if sh > 1 or sw > 1:
      return self._fixed_pad(x, kh, kw), 'VALID'
    return x, 'SAME'

  def concat(self, tensors):
    """Concatenates 4-D tensors along the channel axis; becomes the top
    (the join of an Inception module or a DenseNet layer)."""
    return self.set_top(tf.concat(list(tensors), axis=self.channel_axis))

  def batch_norm(
    self, input_layer=None, *, decay=None, epsilon=None, scale=None
  ):
    """Fused batch norm over the channel axis.

    Training normalises with batch statistics and appends two assign ops
    (moving mean and variance, `m <- m - (1 - decay) * (m - batch)`) to
    `self.update_ops`; inference normalises with the moving statistics.
    `decay` / `epsilon` / `scale` (learn a gamma) default to the
    builder's settings.
    gamma/beta and the statistics stay float32 while x may be 16-bit:
    fused_batch_norm computes in float32 internally, which keeps
    16-bit batch norm numerically sane.
    """
    x = self.top_layer if input_layer is None else input_layer
    decay = self.batch_norm_decay if decay is None else decay
    epsilon = self.batch_norm_epsilon if epsilon is None else epsilon
    scale = self.batch_norm_scale if scale is None else scale
    channels = int(x.shape[self.channel_axis])
    with tf1.variable_scope(self._unique('batchnorm')):
      beta = self.variable('beta', [channels], initializers.zeros())
      if scale:
        gamma = self.variable('gamma', [channels], initializers.ones())
      else:
        gamma = tf.ones([channels], tf.float32)
      moving_mean = self.variable(
        'moving_mean', [channels], initializers.zeros(), trainable=False
      )
      moving_variance = self.variable(
        'moving_variance', [channels], initializers.ones(), trainable=False
      )
      if self.is_training:
        y, mean, variance = tf1.nn.fused_batch_norm(
          x,
          gamma,
          beta,
          epsilon=epsilon,
          data_format=self.data_format,
          is_training=True,
        )
        # No stop_gradient: the updates are not between the loss and the
        # variables, so no gradient passes through them anyway, and each
        # extra op is start-up time in every tower's graph.
        self.update_ops.append(self._moving_average(moving_mean, mean, decay))
        self.update_ops.append(
          self._moving_average(moving_variance, variance, decay)
        )
      else:
        y, _, _ = tf1.nn.fused_batch_norm(
          x,
          gamma,
          beta,
          mean=moving_mean.read_value(),
          variance=moving_variance.read_value(),
          epsilon=epsilon,
          data_format=self.data_format,
          is_training=False,
        )
    return self.set_top(y)

  @staticmethod
  def _moving_average(var, value, decay):
    """Returns the op doing `var -= (1 - decay) * (var - value)`."""
    # `var` itself, not var.read_value(): a reference variable's value is
    # then the one snapshot every reader shares (one op fewer per update).
    delta = (var - value) * (1.0 - decay)
    # read_value=False returns the assign op itself (resource and ref
    # variables alike) rather than a re-read of the new value.
    return var.assign_sub(delta, read_value=False)

  def max_pool(
    self, pool_size, strides=2, padding='VALID', *, input_layer=None
  ):
    """Max pooling; `pool_size` / `strides` are int or (h, w)."""
    return self._pool(
      tf.nn.max_pool2d, 'mpool', pool_size, strides, padding, input_layer
    )

  def avg_pool(
    self, pool_size, strides=2, padding='VALID', *, input_layer=None
  ):
    """Average pooling; `pool_size` / `strides` are int or (h, w)."""
    return self._pool(
      tf.nn.avg_pool2d, 'apool', pool_size, strides, padding, input_layer
    )

  def _pool(self, fn, kind, pool_size, strides, padding, input_layer):
    x = self.top_layer if input_layer is None else input_layer
    kh, kw = _pair(pool_size)
    sh, sw = _pair(strides)
    y = fn(
      x,
      ksize=self._nd(kh, kw),
      strides=self._nd(sh, sw),
      padding=padding,
      data_format=self.data_format,
      name=self._unique(kind),
    )
    return self.set_top(y)

  def lrn(
    self, depth_radius=5, bias=1.0, alpha=1.0, beta=0.5, *, input_layer=None
  ):
    """Local response normalisation across channels.

    tf.nn.lrn only accepts NHWC and (on GPU) float32, so the layer
    transposes and casts around it as needed.
    """
    x = self.top_layer if input_layer is None else input_layer
    with tf.name_scope(self._unique('lrn')):
      y = tf.cast(x, tf.float32)
      if self.data_format == 'NCHW':
        y = tf.transpose(y, [0, 2, 3, 1])
      y = tf.nn.local_response_normalization(y, depth_radius, bias, alpha, beta)
      if self.data_format == 'NCHW':
        y = tf.transpose(y, [0, 3, 1, 2])
      y = tf.cast(y, self.compute_dtype)
    return self.set_top(y)

  def affine(
    self,
    units,
    *,
    activation='relu',
    stddev=None,
    bias_init=0.0,
    input_layer=None,
    kernel_init=None,
  ):
    """Fully connected layer on a [batch, features] input.

    The default weight init (no `kernel_init`) is a truncated normal with
    stddev sqrt(2 / fan_in) before a ReLU and sqrt(1 / fan_in) otherwise,
    the classic harness's choice.
    """
    x = self.top_layer if input_layer is None else input_layer
    fan_in = int(x.shape[-1])
    if kernel_init is None:
      if stddev is None:
        gain = 2.0 if activation == 'relu' else 1.0
        stddev = (gain / fan_in) ** 0.5
      kernel_init = initializers.truncated_normal(stddev)
    with tf1.variable_scope(self._unique('affine')):
      weights = self.variable('weights', [fan_in, units], kernel_init)
      biases = self.variable(
        'biases', [units], initializers.constant(bias_init)
      )
      y = tf.nn.bias_add(
        tf.linalg.matmul(x, self.read(weights)), self.read(biases)
      )
      y = self._activate(y, activation)
    return self.set_top(y)

  def dropout(self, rate=0.5, *, input_layer=None):
    """Dropout at `rate` when training; the identity otherwise."""
    x = self.top_layer if input_layer is None else input_layer
    name = self._unique('dropout')
    if self.is_training and rate > 0:
      # A fresh mask every step needs a stateful op; its op-level seed,
      # derived from (seed, global tower index, relative name), keeps runs
      # reproducible and gives every tower its own masks.
      seed_name = '%d/%d/%s' % (
        self.seed,
        self.stream,
        self.relative_name(name),
      )
      op_seed = zlib.crc32(seed_name.encode())
      x = tf.nn.dropout(x, rate=rate, seed=op_seed & 0x7FFFFFFF, name=name)
    return self.set_top(x)

  def reshape(self, shape, *, input_layer=None):
    """Reshapes the top layer (e.g. `[-1, features]`)."""
    x = self.top_layer if input_layer is None else input_layer
    y = tf.reshape(x, shape)
    return self.set_top(y)

  def flatten(self, *, input_layer=None):
    """Flattens to [batch, features] (features in the layout's order)."""
    x = self.top_layer if input_layer is None else input_layer
    features = 1
    for d in x.shape[1:]:
      features *= int(d)
    return self.reshape([-1, features], input_layer=x)

  def spatial_mean(self, *, input_layer=None):
    """Global average pool to [batch, channels]."""
    x = self.top_layer if input_layer is None else input_layer
    axes = [1, 2] if self.data_format == 'NHWC' else [2, 3]
    y = tf.reduce_mean(x, axes, name=self._unique('spatial_mean'))
    return self.set_top(y)

  def relu(self, *, input_layer=None):
    """ReLU of the top layer (or `input_layer`); becomes the top."""
    x = self.top_layer if input_layer is None else input_layer
    return self.set_top(tf.nn.relu(x))

  def pad_spatial(self, x, before, after):
    """Zero-pads height and width by `before` / `after` pixels."""
    pads = [[0, 0]] * 4
    for axis in (1, 2) if self.data_format == 'NHWC' else (2, 3):
      pads[axis] = [before, after]
    return tf.pad(x, pads)

  def pad_channels(self, x, before, after):
    """Zero-pads the channel axis (the CIFAR ResNet 'option A' shortcut)."""
    pads = [[0, 0]] * 4
    pads[self.channel_axis] = [before, after]
    return tf.pad(x, pads)
