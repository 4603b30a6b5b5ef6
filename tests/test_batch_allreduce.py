"""Tests for variable_mgr/batch_allreduce.py (packing options, 16-bit transfer).

All option sets for one device count share ONE graph and one session.run.
"""

import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.device_testing import cpu_devices
from tests.device_testing import same_device
from tests.device_testing import session_config
from tf_cnn_benchmarks.config import params as params_lib  # pylint: disable=g-import-not-at-top
from variable_mgr import allreduce as ar  # pylint: disable=g-import-not-at-top
from variable_mgr import batch_allreduce as ba  # pylint: disable=g-import-not-at-top
from variable_mgr import settings as settings_lib  # pylint: disable=g-import-not-at-top

tf1 = tf.compat.v1

# A gradient list mixing dtypes, a scalar, odd sizes and runs of small ones.
GRADS = (
  ((), tf.float32),
  ((7, 3), tf.float32),
  ((5,), tf.float32),
  ((3, 3), tf.int32),
  ((4,), tf.int32),
  ((1001,), tf.float32),
  ((2,), tf.float16),
  ((6,), tf.float16),
  ((64, 33), tf.float32),
  ((3,), tf.bfloat16),
  ((9,), tf.float32),
  ((2, 2), tf.float32),
  ((1,), tf.float32),
)

# name -> (spec, keyword options)
OPTIONS = {
  'plain': ('pscpu', {}),
  'packs1': ('pscpu', {'num_packs': 1}),
  'packs2': ('pscpu', {'num_packs': 2}),
  'packs3': ('pscpu', {'num_packs': 3}),
  'small': (
    'pscpu',
    {'agg_small_grads_max_bytes': 40, 'agg_small_grads_max_group': 3},
  ),
  'small_all': ('pscpu', {'agg_small_grads_max_bytes': 1 << 20}),
  'xring_packs2': ('xring', {'num_packs': 2}),
  'rechd_small': ('rechd', {'agg_small_grads_max_bytes': 100}),
  'collective_packs3': ('collective#2', {'num_packs': 3}),
  'multi_range': ('copy:8:psgpu:1000:xring#2', {}),
  'multi_range_packs2': ('copy:8:psgpu:1000:xring#2', {'num_packs': 2}),
  'compact16': ('pscpu', {'compact_dtype': tf.float16}),
  'compact_bf16_packs2': (
    'xring',
    {'compact_dtype': tf.bfloat16, 'num_packs': 2},
  ),
  'compact16_small': (
    'shuffle#2',
    {'compact_dtype': tf.float16, 'agg_small_grads_max_bytes': 64},
  ),
}

EPS = {tf.float32: 2.0**-23, tf.float16: 2.0**-10, tf.bfloat16: 2.0**-7}


def from_params(p):
  """The BatchAllReduce of Params, through their ManagerSettings."""
  return ba.BatchAllReduce.from_settings(
    settings_lib.ManagerSettings.from_params(p)
  )


def batch_all_reduce(tower_tensors, devices, spec, **options):
  """out[i][j] = the sum of tensor j over the towers, on devices[i]."""
  if isinstance(spec, str):  # text, parsed as resolution does
    spec = ar.parse_all_reduce_spec(spec)
  return ba.BatchAllReduce(spec, **options).sum(tower_tensors, devices)


def make_values(rng, n):
  """values[i][j]: gradient j of tower i (floats in [-1, 1], small ints)."""
  values = []
  for _ in range(n):
    tower = []
    for shape, dtype in GRADS:
      if dtype.is_integer:
        tower.append(rng.integers(-1000, 1000, size=shape).astype(np.int32))
      else:
        tower.append(rng.uniform(-1, 1, shape).astype(dtype.as_numpy_dtype))
    values.append(tower)
  return values


def make_inputs(n):
  """Per-tower placeholders on the tower devices; returns (towers, phs)."""
  towers, phs = [], []
  for d in cpu_devices(n):
    with tf.device(d):
      tower_phs = [tf1.placeholder(dtype, shape) for shape, dtype in GRADS]
      towers.append([tf.identity(p) for p in tower_phs])
    phs.append(tower_phs)
  return towers, phs


def feed_dict(phs, values):
  return {p: v for tp, tv in zip(phs, values) for p, v in zip(tp, tv)}


def tolerance(dtype, n, options):
  """Bound on |computed - exact| for n addends in [-1, 1]: at most n-1
  roundings of partial sums <= n, plus one cast of each addend and of the
  result when compact_dtype squeezes float32."""
  if dtype.is_integer:
    return 0.0
  eps = EPS[dtype]
  compact = options.get('compact_dtype')
  if compact is not None and dtype == tf.float32:
    eps = EPS[compact]
  return (n * n + 2 * n) * eps / 2


def exact_sums(values):
  n = len(values)
  return [
    np.sum([values[i][j].astype(np.float64) for i in range(n)], 0)
    for j in range(len(GRADS))
  ]


@pytest.mark.parametrize('n', (1, 2, 3, 4))
def test_every_option_gives_the_sums(n):
  rng = np.random.default_rng(n)
  values = make_values(rng, n)
  g = tf.Graph()
  with g.as_default():
    towers, phs = make_inputs(n)
    results = {}
    for name, (spec, options) in OPTIONS.items():
      out = batch_all_reduce(towers, cpu_devices(n), spec, **options)
      check_structure(name, out, n)
      results[name] = out
  with tf1.Session(graph=g, config=session_config(n)) as sess:
    got = sess.run(results, feed_dict(phs, values))
  want = exact_sums(values)
  problems = []
  for name, per_tower in got.items():
    options = OPTIONS[name][1]
    for i, tower in enumerate(per_tower):
      for j, (value, (_, dtype)) in enumerate(zip(tower, GRADS)):
        err = np.max(np.abs(value.astype(np.float64) - want[j]), initial=0)
        if err > tolerance(dtype, n, options):
          problems.append(f'{name} tower {i} grad {j}: error {err}')
  assert not problems, '\n'.join(problems[:30])
  # Packing must not change the values: every packed variant matches the
  # unpacked one, bitwise for int32. Floats get the rounding tolerance: the
  # same pscpu add_n can round differently at different buffer offsets
  # (oneDNN's sum kernel, and Eigen's 16-bit vector path, pick their
  # summation path by alignment), so bitwise float equality is not stable
  # from run to run even though the math is the same.
  for name in ('packs1', 'packs2', 'packs3', 'small', 'small_all'):
    for i in range(n):
      for j, (_, dtype) in enumerate(GRADS):
        np.testing.assert_allclose(
          got[name][i][j].astype(np.float64),
          got['plain'][i][j].astype(np.float64),
          rtol=0,
          atol=2 * tolerance(dtype, n, {}),
          err_msg=f'{name} {i} {j}',
        )


def check_structure(name, out, n):
  assert len(out) == n, name
  for i, tower in enumerate(out):
    assert len(tower) == len(GRADS), name
    for t, (shape, dtype) in zip(tower, GRADS):
      assert t.dtype == dtype and t.shape == shape, (name, t)
      assert same_device(t.device, cpu_devices(n)[i]), (name, t.device)


def count_ops(graph, op_type):
  return sum(op.type == op_type for op in graph.get_operations())


@pytest.mark.parametrize(
  'options,expected_reductions',
  [
    ({}, len(GRADS)),
    ({'num_packs': 1}, 4),  # one pack per dtype: f32, i32, f16, bf16
    ({'num_packs': 2}, 8),
    # <= 40 bytes, runs of <= 3: [0] [1] [2] [3,4] [5] [6,7] [8] [9]
    # [10,11,12] (runs stop at big tensors and dtype changes).
    ({'agg_small_grads_max_bytes': 40, 'agg_small_grads_max_group': 3}, 9),
  ],
)
def test_packing_reduces_fewer_tensors(options, expected_reductions):
  g = tf.Graph()
  with g.as_default():
    towers, _ = make_inputs(2)
    batch_all_reduce(towers, cpu_devices(2), 'copy', **options)
  # 'copy' makes exactly one AddN per reduction.
  assert count_ops(g, 'AddN') == expected_reductions


def test_compact_dtype_sends_16_bits():
  g = tf.Graph()
  with g.as_default():
    towers, _ = make_inputs(2)
    out = batch_all_reduce(
      towers, cpu_devices(2), 'copy', compact_dtype=tf.bfloat16
    )
  sums = [op for op in g.get_operations() if op.type == 'AddN']
  float32_grads = sum(dtype == tf.float32 for _, dtype in GRADS)
  assert (
    sum(op.outputs[0].dtype == tf.bfloat16 for op in sums) == float32_grads + 1
  )  # + the bf16 gradient itself
  assert [t.dtype for t in out[0]] == [dtype for _, dtype in GRADS]


def small(shape, dtype=tf.float32):
  return tf.zeros(shape, dtype)


def test_small_tensor_groups():
  with tf.Graph().as_default():
    tensors = [
      small([2]),
      small([3]),
      small([100]),
      small([1]),
      small([1]),
      small([1], tf.int32),
      small([1], tf.int32),
      small([1]),
      small([2]),
      small([2]),
      small([2]),
      small([2]),
    ]
    # max 16 bytes = 4 float32; runs broken by big tensors and dtype changes.
    assert ba.small_tensor_groups(tensors, 16, 3) == [
      [0, 1],
      [2],
      [3, 4],
      [5, 6],
      [7, 8, 9],
      [10, 11],
    ]
    assert ba.small_tensor_groups(tensors, 16, 1) == [[k] for k in range(12)]
    assert ba.small_tensor_groups(tensors, 0, 10) == [[k] for k in range(12)]


def test_bad_options():
  with tf.Graph().as_default():
    towers, _ = make_inputs(2)
    with pytest.raises(ValueError, match='not both'):
      batch_all_reduce(
        towers,
        cpu_devices(2),
        'copy',
        num_packs=2,
        agg_small_grads_max_bytes=10,
      )
    with pytest.raises(ValueError, match='compact_dtype'):
      batch_all_reduce(towers, cpu_devices(2), 'copy', compact_dtype=tf.int32)
    with pytest.raises(ValueError, match='same shapes'):
      batch_all_reduce([towers[0], towers[1][:-1]], cpu_devices(2), 'copy')
    with pytest.raises(ValueError, match='towers'):
      batch_all_reduce(towers, cpu_devices(3), 'copy')


def test_merge_scope_groups_gradients_under_one_name_scope():
  g = tf.Graph()
  with g.as_default():
    towers, _ = make_inputs(2)
    batch_all_reduce(towers, cpu_devices(2), 'copy', merge_scope=5)
  scopes = {
    op.name.split('/')[0] for op in g.get_operations() if op.type == 'AddN'
  }
  # 13 gradients in groups of 5: three name scopes, one AddN per gradient.
  assert scopes == {'allreduce_0', 'allreduce_1', 'allreduce_2'}
  assert count_ops(g, 'AddN') == len(GRADS)


@pytest.mark.parametrize(
  'precision,compact_flag,want',
  [
    (dict(use_fp16=True), True, tf.float16),
    (dict(use_bf16=True), True, tf.bfloat16),
    ({}, True, None),  # float32: nothing to compact to
    (dict(use_fp16=True), False, None),  # --nocompact_gradient_transfer
  ],
)
def test_compact_dtype_is_the_16_bit_compute_dtype(
  precision, compact_flag, want
):
  p = params_lib.Params(compact_gradient_transfer=compact_flag, **precision)
  assert from_params(p).compact_dtype == want


def test_from_settings_and_describe():
  p = params_lib.Params(
    all_reduce_spec='xring#2',
    gradient_repacking=3,
    allreduce_merge_scope=4,
    use_bf16=True,
  )
  all_reduce = from_params(p)
  assert all_reduce.merge_scope == 4 and all_reduce.num_packs == 3
  assert all_reduce.describe() == 'xring#2 (repacking 3, sent as bfloat16)'
  small_packs = ba.BatchAllReduce(
    agg_small_grads_max_bytes=64, agg_small_grads_max_group=3
  )
  assert small_packs.describe() == 'copy (small-gradient packs <= 64 bytes x 3)'
  # No spec: the classic default (tests/test_classic_reductions.py).
  default = from_params(params_lib.Params()).describe()
  assert default == 'copy to the CPU (classic default)'


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q'] + sys.argv[1:]))
