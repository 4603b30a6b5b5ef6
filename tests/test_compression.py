"""variable_mgr/compression against numpy references, through BatchAllReduce.

Two towers on two logical CPUs, the gradients fed: the casts equal the
reduction of the rounded gradients exactly, error feedback carries the
residual from one step to the next, and two PowerSGD steps (P = MQ,
orthogonalise, Q = M^T P, both reduced, decompressed; then warm start and
error feedback) equal a float64 numpy reference to 1e-5.
"""

import numpy as np
import pytest
import tensorflow as tf

from tests.device_testing import cpu_devices
from tests.device_testing import session_config
from tf_cnn_benchmarks.config import params as params_lib
from variable_mgr import allreduce as ar
from variable_mgr import batch_allreduce as ba
from variable_mgr import settings as settings_lib
from variable_mgr.compression import catalog
from variable_mgr.compression import powersgd
from variable_mgr.compression import registry

tf1 = tf.compat.v1

# Gradients of one tower: matrices PowerSGD compresses (a conv kernel, a
# dense one), one too small to gain, a vector, a float16 tensor.
SHAPES = (
  ((3, 3, 2, 5), tf.float32),
  ((12, 7), tf.float32),
  ((3, 2), tf.float32),
  ((7,), tf.float32),
  ((4,), tf.float16),
)
NAMES = tuple('layer%d/kernel' % j for j in range(len(SHAPES)))
RANK = 2
SPECS = ('pscpu', 'xring', 'collective')
CASTS = [n for n in registry.names() if catalog.declared(n).wire_dtype]
NP16 = {'float16': np.float16}


def test_registry_matches_the_catalog():
  assert registry.names() == list(catalog.NAMES)
  for name in registry.names():
    assert registry.create(name).name == name


def _graph(compressor, spec, num_towers=2, **options):
  """(placeholders[i][j], outputs[i][j]) of one BatchAllReduce.sum."""
  devices = cpu_devices(num_towers)
  phs, towers = [], []
  for d in devices:
    with tf.device(d):
      tower = [tf1.placeholder(dt, shape) for shape, dt in SHAPES]
    phs.append(tower)
    towers.append([tf.identity(p) for p in tower])
  reduction = ba.BatchAllReduce(
    ar.parse_all_reduce_spec(spec), compressor=compressor, **options
  )
  return phs, reduction.sum(towers, devices, names=NAMES)


def _values(rng, num_towers=2):
  return [
    [
      rng.uniform(-1, 1, shape).astype(dt.as_numpy_dtype)
      for shape, dt in SHAPES
    ]
    for _ in range(num_towers)
  ]


def _run_steps(compressor, spec, steps, num_towers=2, **options):
  """Outputs of `steps` feeds (one session: the state carries over)."""
  with tf.Graph().as_default():
    phs, out = _graph(compressor, spec, num_towers, **options)
    with tf1.Session(config=session_config(num_towers)) as sess:
      sess.run(tf1.global_variables_initializer())
      results = []
      for values in steps:
        feed = {p: v for tp, tv in zip(phs, values) for p, v in zip(tp, tv)}
        results.append(sess.run(out, feed))
      state = {v.op.name: sess.run(v) for v in compressor.state}
  return results, state


def _wire(name):
  return NP16.get(catalog.declared(name).wire_dtype, None)


@pytest.mark.parametrize('spec', SPECS)
@pytest.mark.parametrize('name', CASTS)
def test_casts_equal_the_reduction_of_rounded_gradients(name, spec):
  if _wire(name) is None:  # bfloat16: numpy has no such dtype
    wire = tf.bfloat16.as_numpy_dtype
  else:
    wire = _wire(name)
  values = _values(np.random.default_rng(1))
  (out,), _ = _run_steps(registry.create(name), spec, [values])
  for j, (_, dt) in enumerate(SHAPES):
    if dt != tf.float32:  # sent as it is
      expected = values[0][j] + values[1][j]
    else:  # two rounded addends, added once in the wire dtype
      expected = (
        (values[0][j].astype(wire) + values[1][j].astype(wire))
        .astype(wire)
        .astype(np.float32)
      )
    for i in range(2):
      assert out[i][j].dtype == dt.as_numpy_dtype
      np.testing.assert_array_equal(out[i][j], expected)


@pytest.mark.parametrize(
  'name', [n for n in CASTS if catalog.declared(n).error_feedback]
)
def test_error_feedback_carries_the_residual(name):
  wire = _wire(name) or tf.bfloat16.as_numpy_dtype
  rng = np.random.default_rng(2)
  steps = [_values(rng), _values(rng)]
  (first, second), state = _run_steps(registry.create(name), 'pscpu', steps)
  for j, (_, dt) in enumerate(SHAPES):
    if dt != tf.float32:
      continue
    errors = [np.zeros_like(steps[0][i][j]) for i in range(2)]
    for out, values in zip((first, second), steps):
      corrected = [values[i][j] + errors[i] for i in range(2)]
      rounded = [c.astype(wire) for c in corrected]
      errors = [c - r.astype(np.float32) for c, r in zip(corrected, rounded)]
      expected = (rounded[0] + rounded[1]).astype(wire).astype(np.float32)
      np.testing.assert_array_equal(out[0][j], expected)
    for i in range(2):
      stored = state['gradient_compression/replica_%d/%s/error' % (i, NAMES[j])]
      np.testing.assert_array_equal(stored, errors[i])
      assert np.abs(errors[i]).max() > 0


def _gram_schmidt(p):
  cols = []
  for c in p.T:
    for q in cols:
      c = c - (q @ c) * q
    cols.append(c / (np.linalg.norm(c) + powersgd.EPSILON))
  return np.stack(cols, 1)


def _powersgd_reference(steps, rank):
  """float64 PowerSGD over two towers: per step, the sums per gradient."""
  errors, qs, outs = {}, {}, []
  for values in steps:
    out = []
    for j, (shape, dt) in enumerate(SHAPES):
      nmr = powersgd.matrix_shape(shape, rank)
      if nmr is None or dt != tf.float32:  # sent as it is, in its dtype
        out.append(values[0][j] + values[1][j])
        continue
      n, m, r = nmr
      q = qs.get(j, powersgd.initial_q(NAMES[j], m, r).astype(np.float64))
      ms = [
        values[i][j].astype(np.float64).reshape(n, m)
        + errors.get((i, j), np.zeros((n, m)))
        for i in range(2)
      ]
      p_hat = _gram_schmidt(sum(mi @ q for mi in ms))
      q_sum = sum(mi.T @ p_hat for mi in ms)
      approx = p_hat @ q_sum.T
      for i in range(2):
        errors[(i, j)] = ms[i] - approx / 2
      qs[j] = q_sum / 2
      out.append(approx.reshape(shape))
    outs.append(out)
  return outs, errors, qs


@pytest.mark.parametrize(
  'spec,options',
  [('pscpu', {}), ('xring', {'num_packs': 2}), ('collective', {})],
)
def test_powersgd_steps_equal_a_float64_reference(spec, options):
  rng = np.random.default_rng(3)
  steps = [_values(rng), _values(rng)]
  compressor = registry.create('powersgd', RANK)
  outs, state = _run_steps(compressor, spec, steps, **options)
  expected, errors, qs = _powersgd_reference(steps, RANK)
  worst = 0.0
  for out, ref in zip(outs, expected):
    for j in range(len(SHAPES)):
      for i in range(2):
        assert out[i][j].shape == SHAPES[j][0]
        worst = max(worst, np.abs(out[i][j] - ref[j]).max())
  assert worst < 1e-5
  for (i, j), e in errors.items():
    name = 'gradient_compression/replica_%d/%s/powersgd_error' % (i, NAMES[j])
    np.testing.assert_allclose(
      state[name], e.reshape(SHAPES[j][0]), rtol=0, atol=1e-5
    )
  for j, q in qs.items():
    for i in range(2):
      np.testing.assert_allclose(
        state['v%d/%s/powersgd_q' % (i, NAMES[j])], q, rtol=0, atol=1e-5
      )


def test_powersgd_compresses_only_what_gains():
  assert powersgd.matrix_shape((3, 3, 2, 5), 2) == (18, 5, 2)
  assert powersgd.matrix_shape((3, 2), 2) is None  # 2 * 5 >= 6
  assert powersgd.matrix_shape((7,), 2) is None
  assert powersgd.matrix_shape((100, 100), 200) is None  # rank >= min(n, m)


def test_a_non_finite_step_leaves_the_state_alone():
  rng = np.random.default_rng(4)
  good = _values(rng)
  bad = _values(rng)
  bad[1][0] = np.full_like(bad[1][0], np.inf)
  compressor = registry.create('fp16_ef')
  _, after_good = _run_steps(compressor, 'pscpu', [good])
  compressor = registry.create('fp16_ef')
  _, after_bad = _run_steps(compressor, 'pscpu', [good, bad])
  assert after_good.keys() == after_bad.keys()
  for name, value in after_good.items():
    np.testing.assert_array_equal(after_bad[name], value)


@pytest.mark.parametrize('name', registry.names())
def test_a_compressor_replaces_the_compact_transfer(name):
  """--compact_gradient_transfer keeps its classic meaning (16-bit compute:
  the all-reduce in 16 bits) without a compressor; a compressor decides
  the wire format alone (PowerSGD's factors would overflow float16)."""
  p = params_lib.make_params(
    model='trivial',
    data_name='cifar10',
    device='cpu',
    use_fp16=True,
    variable_update='replicated',
    gradient_compression=name,
  )
  compact = settings_lib.ManagerSettings.from_params(p).compact_dtype
  assert compact == ('float16' if name == 'none' else None)
