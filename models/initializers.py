"""Stateless, seed-addressed variable initialisers.

Every initialiser here is a function `init(shape, dtype, seed) -> Tensor`
where `seed` is an int pair. The builder derives that pair from the run seed
and the variable's *relative* name, so a variable's initial value is a pure
function of (seed, name): it does not depend on how many random ops were
created before it, on the device, or on the outer variable scope. That is what
lets several towers (or several processes) start from bit-identical weights
without broadcasting them.

Only stateless random ops are used; the builder runs them on the host CPU, so
the values cannot depend on which accelerator (or none) holds the variable.
"""

import math
from typing import Callable, Sequence

import tensorflow as tf

# init(shape, dtype, seed_pair) -> tensor of that shape and dtype.
Initializer = Callable[[Sequence[int], tf.DType, Sequence[int]], tf.Tensor]

# Standard deviation of a unit normal truncated to [-2, 2]; dividing by it
# makes a truncated normal have the requested variance (as TF's and JAX's
# variance-scaling initialisers do).
_TRUNCATED_NORMAL_STDDEV = 0.87962566103423978
TRUNCATED_NORMAL_STDDEV = _TRUNCATED_NORMAL_STDDEV
# Phi(-2): the standard normal CDF at -2.
_PHI_MINUS_2 = 0.5 * math.erfc(2.0 / math.sqrt(2.0))


def _fans(shape):
  """Returns (fan_in, fan_out) of a [in, out] or [h, w, in, out] kernel."""
  shape = [int(d) for d in shape]
  if len(shape) < 1:
    return 1, 1
  if len(shape) == 1:
    return shape[0], shape[0]
  receptive = 1
  for d in shape[:-2]:
    receptive *= d
  return shape[-2] * receptive, shape[-1] * receptive


def _seed_tensor(seed):
  return tf.constant([int(s) for s in seed], dtype=tf.int64)


def zeros() -> Initializer:
  """All zeros (biases, batch-norm beta and moving mean)."""

  def init(shape, dtype, seed):
    del seed
    return tf.zeros(shape, dtype)

  return init


def ones() -> Initializer:
  """All ones (batch-norm gamma and moving variance)."""

  def init(shape, dtype, seed):
    del seed
    return tf.ones(shape, dtype)

  return init


def constant(value: float) -> Initializer:
  """A constant fill, e.g. the 0.1 biases of the cifar AlexNet."""

  def init(shape, dtype, seed):
    del seed
    return tf.fill(shape, tf.constant(value, dtype))

  return init


def truncated_normal(stddev: float, mean: float = 0.0) -> Initializer:
  """Normal(mean, stddev) truncated at two standard deviations.

  Sampled by inverting the normal CDF on a uniform restricted to
  [Phi(-2), Phi(2)] rather than with stateless_truncated_normal's rejection
  sampler: same distribution, about twice as fast on CPU, which matters for
  the 60M-parameter models whose init runs on the CPU.
  """

  def init(shape, dtype, seed):
    u = tf.random.stateless_uniform(
      shape,
      seed=_seed_tensor(seed),
      minval=_PHI_MINUS_2,
      maxval=1.0 - _PHI_MINUS_2,
      dtype=tf.float32,
    )
    z = math.sqrt(2.0) * tf.math.erfinv(2.0 * u - 1.0)
    # Guard the float32 rounding at the ends of the interval.
    z = tf.clip_by_value(z, -2.0, 2.0)
    return tf.cast(mean + stddev * z, dtype)

  return init


def uniform(limit: float) -> Initializer:
  """Uniform on [-limit, limit)."""

  def init(shape, dtype, seed):
    return tf.random.stateless_uniform(
      shape, seed=_seed_tensor(seed), minval=-limit, maxval=limit, dtype=dtype
    )

  return init


def variance_scaling(
  scale: float = 1.0,
  mode: str = 'fan_in',
  distribution: str = 'truncated_normal',
) -> Initializer:
  """Variance scaling: Var(w) = scale / n.

  n is fan_in, fan_out or their mean, as `mode` says. The defaults (scale 1,
  fan_in, truncated normal) are what the classic harness used for every
  convolution kernel that did not ask for an explicit stddev.
  """
  if mode not in ('fan_in', 'fan_out', 'fan_avg'):
    raise ValueError('unknown variance-scaling mode %r' % (mode,))
  if distribution not in ('truncated_normal', 'normal', 'uniform'):
    raise ValueError(
      'unknown variance-scaling distribution %r' % (distribution,)
    )

  def init(shape, dtype, seed):
    fan_in, fan_out = _fans(shape)
    n = {
      'fan_in': fan_in,
      'fan_out': fan_out,
      'fan_avg': (fan_in + fan_out) / 2.0,
    }[mode]
    variance = scale / max(1.0, n)
    if distribution == 'uniform':
      return uniform(math.sqrt(3.0 * variance))(shape, dtype, seed)
    if distribution == 'normal':
      return tf.random.stateless_normal(
        shape, seed=_seed_tensor(seed), stddev=math.sqrt(variance), dtype=dtype
      )
    stddev = math.sqrt(variance) / _TRUNCATED_NORMAL_STDDEV
    return truncated_normal(stddev)(shape, dtype, seed)

  return init


def he_normal() -> Initializer:
  """He et al. 2015: truncated normal with Var = 2 / fan_in (for ReLU nets)."""
  return variance_scaling(2.0, 'fan_in', 'truncated_normal')


def glorot_uniform() -> Initializer:
  """Glorot & Bengio 2010: uniform with Var = 2 / (fan_in + fan_out)."""
  return variance_scaling(1.0, 'fan_avg', 'uniform')
