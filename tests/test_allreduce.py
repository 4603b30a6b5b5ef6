"""Tests for variable_mgr/allreduce.py: spec grammar and exact sums.

Every algorithm x shape x dtype for one device count goes into ONE graph and
one session.run, so the whole matrix stays fast on two CPU cores. Results are
compared against numpy inside that graph (only the error scalars come back),
which keeps the large [256, 1024] case cheap to check on every device.
"""

import dataclasses
import socket
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.device_testing import cpu_devices
from tests.device_testing import same_device
from tests.device_testing import session_config
from variable_mgr import allreduce as ar  # pylint: disable=g-import-not-at-top
from variable_mgr import collective_keys as ck  # pylint: disable=g-import-not-at-top

tf1 = tf.compat.v1


def all_reduce_text(tensors, devices, text, **kwargs):
  """ar.all_reduce with the spec given as text, parsed as resolution does."""
  spec = ar.parse_all_reduce_spec(text) if isinstance(text, str) else text
  return ar.all_reduce(tensors, devices, spec, **kwargs)


# 8 devices takes as long as 1-4 together and checks nothing they do not
# (the default suite's time budget): slow.
DEVICE_COUNTS = (1, 2, 3, 4, pytest.param(8, marks=pytest.mark.slow))
SHAPES = ((), (7, 3), (1001,), (256, 1024))
DTYPES = (tf.float32, tf.float16, tf.bfloat16, tf.int32)
# Every CPU algorithm and a multi-range spec whose ranges catch different
# SHAPES run with every dtype; each #N meaning runs with a float and an int
# dtype (splitting does not depend on the dtype, and the ring/halving #N
# variants are the bulk of the graph).
SPECS = ar.algorithm_names(cpu_only=True) + (
  'copy:20:pscpu#2:1000:xring#2:1K:rechd',
)
# Every CPU algorithm's #2 (from the registry), and #3 where an odd count
# takes another path.
SHARDED_SPECS = tuple('%s#2' % n for n in ar.algorithm_names(cpu_only=True)) + (
  'pscpu#3',
  'shuffle#3',
  'xring#3',
  'hierarchical_copy#3',
)
SHARDED_DTYPES = (tf.float32, tf.int32)


def sum_tolerance(dtype, n):
  """Bound on |computed - exact| for n addends in [-1, 1] (0 for ints).

  At most n-1 roundings, each <= eps/2 of a partial sum <= n.
  """
  if dtype.is_integer:
    return 0.0
  eps = {tf.float32: 2.0**-23, tf.float16: 2.0**-10, tf.bfloat16: 2.0**-7}
  return n * n * eps[dtype] / 2


def random_values(rng, shape, dtype):
  """Inputs exactly representable in `dtype` (floats in [-1, 1])."""
  if dtype.is_integer:
    return rng.integers(-1000, 1000, size=shape).astype(np.int32)
  return rng.uniform(-1, 1, size=shape).astype(dtype.as_numpy_dtype)


class MatrixGraph:
  """Builds many all-reduces into one graph and checks them in one run."""

  def __init__(self, n, seed=0):
    self.n = n
    self.devices = cpu_devices(n)
    self.rng = np.random.default_rng(seed)
    self.graph = tf.Graph()
    self.feeds = {}
    self.inputs = {}  # (shape, dtype) -> per-device tensors
    self.expected = {}  # (shape, dtype) -> float64 placeholder of the sum
    self.checks = []  # (label, error tensor, tolerance)
    self.misplaced = []

  def _inputs(self, shape, dtype):
    key = (shape, dtype)
    if key not in self.inputs:
      values = [random_values(self.rng, shape, dtype) for _ in self.devices]
      tensors = []
      for d, v in zip(self.devices, values):
        with tf.device(d):
          ph = tf1.placeholder(dtype, shape)
          tensors.append(tf.identity(ph))
        self.feeds[ph] = v
      total = tf1.placeholder(tf.float64, shape)
      self.feeds[total] = np.sum([v.astype(np.float64) for v in values], 0)
      self.inputs[key], self.expected[key] = tensors, total
    return self.inputs[key]

  def add(self, label, reduce_fn, shape, dtype):
    """Adds reduce_fn(inputs, devices) and the checks of its outputs."""
    outputs = reduce_fn(self._inputs(shape, dtype), self.devices)
    tag = f'{label} {dtype.name}{list(shape)}'
    for i, (out, d) in enumerate(zip(outputs, self.devices)):
      if not same_device(out.device, d):
        self.misplaced.append(f'{tag} dev{i}: on {out.device!r}')
      if out.dtype != dtype or out.shape != shape:
        self.misplaced.append(f'{tag} dev{i}: got {out.dtype.name}{out.shape}')
    # One error per device, from a single stacked comparison (few ops).
    stacked = tf.cast(tf.stack(outputs), tf.float64)
    diff = tf.reshape(
      tf.abs(stacked - self.expected[(shape, dtype)]), [self.n, -1]
    )
    self.checks.append(
      (tag, tf.reduce_max(diff, axis=1), sum_tolerance(dtype, self.n))
    )

  def failures(self):
    """Runs every check in one session call; returns failing labels."""
    with tf1.Session(graph=self.graph, config=session_config(self.n)) as sess:
      errors = sess.run([e for _, e, _ in self.checks], self.feeds)
    failed = [
      f'{tag} dev{i}: error {err} > {tol}'
      for (tag, _, tol), per_device in zip(self.checks, errors)
      for i, err in enumerate(per_device)
      if err > tol
    ]
    return self.misplaced + failed


@pytest.mark.parametrize('n', DEVICE_COUNTS)
def test_every_algorithm_sums_on_every_device(n):
  matrix = MatrixGraph(n, seed=n)
  cases = [(spec, dtype) for spec in SPECS for dtype in DTYPES]
  cases += [(spec, dtype) for spec in SHARDED_SPECS for dtype in SHARDED_DTYPES]
  with matrix.graph.as_default():
    for spec, dtype in cases:
      for shape in SHAPES:
        matrix.add(
          spec, lambda ts, ds, s=spec: all_reduce_text(ts, ds, s), shape, dtype
        )
  assert len(matrix.checks) == len(cases) * len(SHAPES)
  failures = matrix.failures()
  assert not failures, '\n'.join(failures[:40])


def test_registry_calls_directly():
  """The registered functions themselves follow the documented signature."""
  matrix = MatrixGraph(3)
  with matrix.graph.as_default():
    for name in ar.algorithm_names(cpu_only=True):
      matrix.add(
        name,
        lambda ts, ds, f=ar.ALGORITHMS[name]: f(ts, ds, 2),
        (5, 2),
        tf.float32,
      )
  assert not matrix.failures()


def test_checker_catches_a_wrong_sum():
  matrix = MatrixGraph(2)
  with matrix.graph.as_default():
    matrix.add(
      'double',
      lambda ts, ds: [t * 2 for t in all_reduce_text(ts, ds, 'copy')],
      (3,),
      tf.float32,
    )
    matrix.add(
      'elsewhere',
      lambda ts, ds: all_reduce_text(ts, ds[::-1], 'copy'),
      (3,),
      tf.int32,
    )
  failures = matrix.failures()
  assert any(f.startswith('double') for f in failures)
  assert any(f.startswith('elsewhere') and 'on ' in f for f in failures)


def test_outputs_identical_across_devices():
  """Every device gets bitwise the same sum (no per-device re-summing)."""
  n = 4
  g = tf.Graph()
  rng = np.random.default_rng(7)
  values = [rng.standard_normal(1001).astype(np.float32) for _ in range(n)]
  with g.as_default():
    inputs = []
    for d, v in zip(cpu_devices(n), values):
      with tf.device(d):
        inputs.append(tf.constant(v))
    outs = {
      s: all_reduce_text(inputs, cpu_devices(n), s)
      for s in SPECS + SHARDED_SPECS
    }
  with tf1.Session(graph=g, config=session_config(n)) as sess:
    results = sess.run(outs)
  for spec, per_device in results.items():
    for r in per_device[1:]:
      np.testing.assert_array_equal(r, per_device[0], err_msg=spec)


# --------------------------------------------------------------------------
# Size ranges and hybrid (intra/inter) specs


def _algorithm_scopes(outputs):
  return {o.op.name.split('/')[0] for o in outputs}


def test_range_picks_algorithm_by_element_count():
  spec = ar.parse_all_reduce_spec('copy:20:pscpu:1000:xring:1K:rechd')
  assert [
    spec.alg_for(k).intra for k in (1, 20, 21, 1000, 1001, 1024, 1025)
  ] == ['copy', 'copy', 'pscpu', 'pscpu', 'xring', 'xring', 'rechd']
  g = tf.Graph()
  with g.as_default():
    for shape, alg in (
      ((), 'copy'),
      ((7, 3), 'pscpu'),
      ((1001,), 'xring'),
      ((256, 1024), 'rechd'),
    ):
      ts = [tf.zeros(shape) for _ in range(2)]
      outs = all_reduce_text(ts, cpu_devices(2), spec)
      assert _algorithm_scopes(outs) == {f'allreduce_{alg}'}, shape


def test_hybrid_spec_with_one_worker_is_intra_only():
  g = tf.Graph()
  with g.as_default():
    ts = [tf.zeros([4]) for _ in range(3)]
    outs = all_reduce_text(ts, cpu_devices(3), 'xring/pscpu')
  assert _algorithm_scopes(outs) == {'allreduce_xring'}
  assert not [op for op in g.get_operations() if 'pscpu' in op.name]


def test_group_by_worker():
  devices = [
    '/job:worker/task:1/device:GPU:0',
    '/job:worker/task:0/gpu:0',
    '/job:worker/replica:0/task:1/device:GPU:1',
    '/cpu:0',
    '/gpu:1',
    '/job:worker/task:0/gpu:1',
  ]
  assert ar.group_by_worker(devices) == [[0, 2], [1, 5], [3, 4]]


def _free_port():
  with socket.socket() as s:
    s.bind(('localhost', 0))
    return s.getsockname()[1]


@pytest.fixture(scope='module')
def two_workers():
  """Two in-process gRPC workers with two CPUs each (never stopped: TF
  servers cannot be shut down, they go away with the test process)."""
  cluster = tf.train.ClusterSpec(
    {'worker': [f'localhost:{_free_port()}' for _ in range(2)]}
  )
  servers = []
  for task in range(2):
    config = session_config(2)
    config.experimental.collective_group_leader = '/job:worker/replica:0/task:0'
    servers.append(
      tf.distribute.Server(
        cluster, job_name='worker', task_index=task, config=config, start=True
      )
    )
  return servers[0].target


@pytest.mark.parametrize(
  'spec',
  [
    'pscpu/xring',
    'xring#2/pscpu',
    'copy/rechd',
    'psgpu/copy#2',
    'hierarchical_copy/shuffle',
    'collective/pscpu',
    'xring/collective',
  ],
)
def test_two_level_reduction_across_workers(two_workers, spec):
  devices = [
    f'/job:worker/replica:0/task:{t}/device:CPU:{c}'
    for t in range(2)
    for c in range(2)
  ]
  rng = np.random.default_rng(3)
  values = [
    rng.integers(-50, 50, size=(5, 3)).astype(np.int32) for _ in devices
  ]
  g = tf.Graph()
  with g.as_default():
    inputs = []
    for d, v in zip(devices, values):
      with tf.device(d):
        inputs.append(tf.constant(v))
    outs = all_reduce_text(inputs, devices, spec)
  intra, inter = spec.split('/')
  scopes = {op.name.split('/')[0] for op in g.get_operations()}
  assert f'allreduce_{intra.split("#")[0]}' in scopes
  assert f'allreduce_{inter.split("#")[0]}' in scopes
  for o, d in zip(outs, devices):
    assert same_device(o.device, d)
  with tf1.Session(two_workers, graph=g, config=session_config(2)) as sess:
    results = sess.run(outs)
  for r in results:
    np.testing.assert_array_equal(r, np.sum(values, 0))


# --------------------------------------------------------------------------
# Collective keys and NCCL


def _const_input(op, index):
  return int(tf.make_ndarray(op.inputs[index].op.get_attr('value')))


def test_collective_keys_unique_per_graph_and_stable_per_group():
  g = tf.Graph()
  with g.as_default():
    ts = [tf.zeros([3]) for _ in range(3)]
    a = all_reduce_text(ts, cpu_devices(3), 'collective')
    b = all_reduce_text(ts, cpu_devices(3), 'collective')
    c = all_reduce_text(ts[:2], cpu_devices(2), 'collective')
  group = [_const_input(x[0].op, 2) for x in (a, b, c)]
  instance = [_const_input(x[0].op, 3) for x in (a, b, c)]
  assert group[0] == group[1] != group[2]
  assert len(set(instance)) == 3
  assert ck.keys_for_graph(g) is ck.keys_for_graph(g)
  assert ck.keys_for_graph(g) is not ck.keys_for_graph(tf.Graph())


def test_caller_allocator_is_used():
  keys = ck.CollectiveKeys(instance_key_start=500)
  g = tf.Graph()
  with g.as_default():
    ts = [tf.zeros([3]) for _ in range(2)]
    out = all_reduce_text(
      ts, cpu_devices(2), 'collective', collective_keys=keys
    )
  assert _const_input(out[0].op, 2) == keys.get_group_key(['/cpu:1', '/cpu:0'])
  assert _const_input(out[0].op, 3) == 500
  assert keys.get_instance_key() == 501
  assert ck.keys_for_graph(g).get_instance_key() == 1  # default one untouched


def test_group_keys_agree_across_graphs():
  """Same devices, same key in any graph (servers remember group keys)."""
  a, b = ck.CollectiveKeys(), ck.CollectiveKeys()
  assert a.get_group_key(['/cpu:0', '/cpu:1']) == b.get_group_key(
    ['/device:CPU:1', '/device:CPU:0']
  )
  assert a.get_group_key(['/cpu:0', '/cpu:1']) != a.get_group_key(
    ['/cpu:0', '/cpu:2']
  )
  assert 0 < a.get_group_key(['/cpu:0']) < 2**31


gpus_visible = bool(tf.config.list_physical_devices('GPU'))


@pytest.mark.skipif(gpus_visible, reason='needs a machine without GPUs')
@pytest.mark.parametrize(
  'devices,spec',
  [
    (['/cpu:0', '/cpu:1'], 'nccl'),
    (['/gpu:0', '/gpu:1'], 'nccl'),
    (['/gpu:0'], 'nccl#2'),
    (['/cpu:0', '/cpu:1'], 'pscpu:16:nccl'),
  ],
)
def test_nccl_unavailable_at_build_time(devices, spec):
  g = tf.Graph()
  with g.as_default():
    ts = [tf.zeros([64]) for _ in devices]
    with pytest.raises(ar.AllReduceUnavailableError) as info:
      all_reduce_text(ts, devices, spec)
  message = str(info.value)
  assert '\n' not in message
  assert 'nccl' in message and 'pscpu' in message and 'xring' in message


def test_nccl_with_cpu_devices_refused_even_if_gpus_exist():
  with tf.Graph().as_default():
    with pytest.raises(ar.AllReduceUnavailableError, match='non-GPU'):
      ar.ALGORITHMS['nccl']([tf.zeros([2])] * 2, ['/cpu:0', '/gpu:0'], 1)


def test_all_reduce_takes_a_parsed_spec_only():
  with tf.Graph().as_default():
    with pytest.raises(TypeError, match='parsed spec'):
      ar.all_reduce([tf.zeros([2])] * 2, cpu_devices(2), 'copy')


def test_registry_refuses_duplicates():
  with pytest.raises(ValueError, match='already registered'):
    ar.register_algorithm('xring')(lambda tensors, devices, num_shards: [])
  # The classic algorithms are all there (a new one adds to the set without
  # editing this test).
  assert set(ar.algorithm_names()) >= {
    'copy',
    'pscpu',
    'psgpu',
    'xring',
    'rechd',
    'shuffle',
    'collective',
    'nccl',
    'hierarchical_copy',
  }
  assert 'nccl' not in ar.algorithm_names(cpu_only=True)


def test_bad_inputs():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='2 tensors for 3 devices'):
      all_reduce_text([tf.zeros([2])] * 2, cpu_devices(3), 'copy')
    with pytest.raises(ValueError, match='differ'):
      all_reduce_text([tf.zeros([2]), tf.zeros([3])], cpu_devices(2), 'copy')
    with pytest.raises(ValueError, match='distinct'):
      all_reduce_text([tf.zeros([2])] * 2, ['/cpu:0', '/cpu:0'], 'collective')


# --------------------------------------------------------------------------
# Spec grammar

A = ar.AlgSpec
R = ar.SpecRange

VALID_SPECS = [
  ('xring', (R(None, A('xring')),)),
  ('pscpu', (R(None, A('pscpu', None, 1)),)),
  ('pscpu#4', (R(None, A('pscpu', None, 4)),)),
  ('nccl/xring', (R(None, A('nccl', 'xring')),)),
  ('nccl/xring#2', (R(None, A('nccl', 'xring', 1, 2)),)),
  ('psgpu#2/pscpu#3', (R(None, A('psgpu', 'pscpu', 2, 3)),)),
  ('pscpu:32k:xring#2', (R(32768, A('pscpu')), R(None, A('xring', None, 2)))),
  (
    'copy:100:rechd:2M:collective#2',
    (
      R(100, A('copy')),
      R(2 * 1024**2, A('rechd')),
      R(None, A('collective', None, 2)),
    ),
  ),
  (
    'shuffle:1g:hierarchical_copy:3T:psgpu',
    (
      R(1024**3, A('shuffle')),
      R(3 * 1024**4, A('hierarchical_copy')),
      R(None, A('psgpu')),
    ),
  ),
  (
    'pscpu:1K:nccl/xring#4',
    (R(1024, A('pscpu')), R(None, A('nccl', 'xring', 1, 4))),
  ),
]


@pytest.mark.parametrize('text,ranges', VALID_SPECS)
def test_parse_valid_spec(text, ranges):
  spec = ar.parse_all_reduce_spec(text)
  assert spec == ar.AllReduceSpec(ranges)
  assert ar.parse_all_reduce_spec(str(spec)) == spec  # str() round-trips
  assert spec.is_hybrid == (len(ranges) > 1 or ranges[0].alg.inter is not None)


def test_spec_properties():
  spec = ar.parse_all_reduce_spec('pscpu:32k:nccl/xring#2')
  assert spec.is_hybrid
  assert spec.algorithms == {'pscpu', 'nccl', 'xring'}
  assert str(spec) == 'pscpu:32K:nccl/xring#2'
  assert not ar.parse_all_reduce_spec('xring#3').is_hybrid
  assert ar.parse_all_reduce_spec('xring#3').algorithms == {'xring'}
  with pytest.raises(dataclasses.FrozenInstanceError):
    spec.ranges = ()


INVALID_SPECS = [
  ('', 0, 'empty spec'),
  ('foo', 0, "unknown algorithm 'foo'"),
  ('XRING', 0, 'unknown algorithm'),
  ('xring:12q:pscpu', 6, "bad limit '12q'"),
  ('xring::pscpu', 6, "bad limit ''"),
  ('xring:1.5k:pscpu', 6, 'bad limit'),
  ('pscpu:0:xring', 6, 'must be >= 1'),
  ('xring#', 6, "bad count ''"),
  ('xring#0', 6, 'must be >= 1'),
  ('xring#-1', 6, "bad count '-1'"),
  ('xring#2#3', 6, "bad count '2#3'"),
  ('pscpu:32k', 9, 'missing algorithm after the last limit'),
  (':xring', 0, 'missing algorithm'),
  ('pscpu:32k:', 10, 'missing algorithm'),
  ('pscpu:64k:xring:32k:copy', 16, 'larger than the previous limit'),
  ('nccl/xring/pscpu', 10, "more than one '/'"),
  ('nccl/', 5, 'missing algorithm name'),
  ('/xring', 0, 'missing algorithm name'),
  ('pscpu:1k:nccl/ring', 14, "unknown algorithm 'ring'"),
  ('#2', 0, 'missing algorithm name'),
]


@pytest.mark.parametrize('text,position,what', INVALID_SPECS)
def test_parse_invalid_spec(text, position, what):
  with pytest.raises(ar.AllReduceSpecError) as info:
    ar.parse_all_reduce_spec(text)
  message = str(info.value)
  assert '\n' not in message
  assert message.startswith(
    f'--all_reduce_spec={text!r}: position {position}: '
  )
  assert what in message
  assert 'grammar: ALG[#N][/ALG[#N]] or ALG:LIMIT:ALG' in message
  assert 'algorithms: copy, pscpu' in message
  assert isinstance(info.value, ValueError)


def test_error_message_example():
  with pytest.raises(ar.AllReduceSpecError) as info:
    ar.parse_all_reduce_spec('xring:12q:pscpu')
  assert str(info.value).startswith(
    "--all_reduce_spec='xring:12q:pscpu': position 6: bad limit '12q' "
    '(want digits with optional K/M/G/T); grammar: ALG[#N][/ALG[#N]] or '
    'ALG:LIMIT:ALG[:LIMIT:ALG...]; algorithms: '
  )


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q'] + sys.argv[1:]))
