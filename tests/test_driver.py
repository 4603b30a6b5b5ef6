"""The driver with the local managers: equivalences, replicas, placement."""

import io
import re

import numpy as np
import pytest
import tensorflow as tf

from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.inputs import inputs
from tf_cnn_benchmarks.platform import devices

tf1 = tf.compat.v1


def make(**kw):
  base = dict(
    device='cpu',
    num_warmup_batches=0,
    num_batches=4,
    display_every=100,
    init_learning_rate=0.05,
  )
  base.update(kw)
  return params_lib.make_params(**base)


def losses_of(**kw):
  return np.array(
    benchmark_cnn.run_benchmark(make(**kw), out=io.StringIO()).losses
  )


class Session:
  """Builds a run's graph and opens a session on it, initialised."""

  def __init__(self, p, post_init=True):
    self.bench = benchmark_cnn.BenchmarkCNN(p, out=io.StringIO())
    self.built = self.bench.build()
    self.sess = tf1.Session(
      graph=self.built.graph,
      config=devices.session_config(p.device, p.num_gpus),
    )
    self.sess.run(self.built.init_ops)
    if post_init and self.built.post_init_ops:
      self.sess.run(self.built.post_init_ops)

  def step(self, n=1):
    for _ in range(n):
      self.sess.run(self.built.step_op)

  def values(self, prefix):
    with self.built.graph.as_default():
      variables = [
        v for v in tf1.global_variables() if v.op.name.startswith(prefix)
      ]
    return {
      v.op.name[len(prefix) :]: val
      for v, val in zip(variables, self.sess.run(variables))
    }

  def close(self):
    self.sess.close()


@pytest.mark.parametrize('variable_update', ['parameter_server', 'replicated'])
@pytest.mark.parametrize(
  'model,data_name,lr',
  [('lenet', 'imagenet', 0.005), ('trivial', 'cifar10', 0.002)],
)
def test_one_tower_double_batch_equals_two_towers(
  model, data_name, lr, variable_update
):
  # Learning rates small enough that training is not chaotic: float32
  # rounding differences between the two reductions must stay small.
  common = dict(
    model=model,
    data_name=data_name,
    variable_update=variable_update,
    optimizer='sgd',
    num_batches=5,
    init_learning_rate=lr,
  )
  one = losses_of(num_gpus=1, batch_size=16, **common)
  two = losses_of(num_gpus=2, batch_size=8, **common)
  assert abs(one[-1] - one[0]) > 1e-3  # it trains
  np.testing.assert_allclose(two, one, rtol=1e-5)


def test_replicas_equal_v0_after_post_init_and_after_training():
  p = make(
    model='lenet', variable_update='replicated', num_gpus=3, batch_size=4
  )
  run = Session(p, post_init=False)
  # Scramble the other replicas, so the post-init copy has work to do.
  with run.built.graph.as_default():
    scramble = [
      v.assign(tf.ones_like(v) * 7.0)
      for v in tf1.global_variables()
      if v.op.name.startswith(('v1/', 'v2/'))
    ]
  run.sess.run(scramble)
  run.sess.run(run.built.post_init_ops)
  v0 = run.values('v0/')
  assert v0
  for i in (1, 2):
    for name, value in run.values('v%d/' % i).items():
      np.testing.assert_array_equal(value, v0[name], err_msg=name)
  run.step(3)
  v0_after = run.values('v0/')
  assert any(not np.array_equal(v0_after[k], v0[k]) for k in v0)  # it trained
  for i in (1, 2):
    for name, value in run.values('v%d/' % i).items():
      np.testing.assert_allclose(
        value, v0_after[name], rtol=1e-6, atol=1e-7, err_msg=name
      )
  run.close()


def test_independent_towers_train_on_their_own_data():
  common = dict(model='lenet', variable_update='independent', batch_size=4)
  two = Session(make(num_gpus=2, **common))
  one = Session(make(num_gpus=1, **common))
  two.step(3)
  one.step(3)
  v0_two, v1_two, v0_one = (
    two.values('v0/'),
    two.values('v1/'),
    one.values('v0/'),
  )
  for name, value in v0_one.items():
    np.testing.assert_allclose(v0_two[name], value, rtol=1e-6, err_msg=name)
  assert any(not np.allclose(v1_two[k], v0_two[k]) for k in v0_two)
  two.close()
  one.close()


def _device_index(device_string):
  spec = tf.DeviceSpec.from_string(device_string)
  return spec.device_type, spec.device_index


def test_parameter_server_places_variables_on_the_parameter_device():
  p = make(
    model='lenet',
    variable_update='parameter_server',
    num_gpus=3,
    local_parameter_device='cpu',
  )
  graph = benchmark_cnn.BenchmarkCNN(p, out=io.StringIO()).build().graph
  with graph.as_default():
    model_vars = [
      v for v in tf1.global_variables() if v.op.name.startswith('v/')
    ]
  assert model_vars
  for v in model_vars:
    assert _device_index(v.device) == ('CPU', 0), v.op.name
  tower2_convs = [
    op
    for op in graph.get_operations()
    if op.name.startswith('tower_2/') and op.type == 'Conv2D'
  ]
  assert tower2_convs
  for op in tower2_convs:
    assert _device_index(op.device) == ('CPU', 2), op.name


def test_parameter_server_spreads_variables_over_tower_devices_by_size():
  p = make(
    model='lenet',
    variable_update='parameter_server',
    num_gpus=2,
    local_parameter_device='gpu',
  )
  graph = benchmark_cnn.BenchmarkCNN(p, out=io.StringIO()).build().graph
  with graph.as_default():
    placed = {}
    for v in tf1.global_variables():
      if v.op.name.startswith('v/'):
        index = _device_index(v.device)[1]
        placed[index] = placed.get(index, 0) + v.shape.num_elements()
  assert sorted(placed) == [0, 1]


def test_replicated_places_replica_i_on_device_i():
  p = make(model='lenet', variable_update='replicated', num_gpus=3)
  graph = benchmark_cnn.BenchmarkCNN(p, out=io.StringIO()).build().graph
  with graph.as_default():
    for v in tf1.global_variables():
      name = v.op.name
      if name.startswith(('v0/', 'v1/', 'v2/')):
        assert _device_index(v.device) == ('CPU', int(name[1])), name


@pytest.mark.parametrize(
  'model,data_name', [('resnet20', 'cifar10'), ('lenet', 'imagenet')]
)
def test_initial_values_depend_only_on_the_name(model, data_name):
  """Same seed: same initial model variables whatever mode or tower count."""
  reference = None
  for variable_update, num_gpus in [
    ('parameter_server', 1),
    ('replicated', 3),
    ('independent', 2),
  ]:
    p = make(
      model=model,
      data_name=data_name,
      variable_update=variable_update,
      num_gpus=num_gpus,
      batch_size=2,
    )
    run = Session(p)
    with run.built.graph.as_default():
      saved = run.bench.manager.savable_variables()
    names = sorted(n for n in saved if n != 'global_step')
    # independent also saves towers 1.. under 'vI/NAME': each copy counts.
    values = {}
    for name, value in zip(names, run.sess.run([saved[n] for n in names])):
      values.setdefault(re.sub(r'^v\d+/', '', name), []).append(value)
    run.close()
    if reference is None:
      reference = values
      continue
    assert sorted(values) == sorted(reference)
    for name in reference:
      for value in values[name]:
        np.testing.assert_array_equal(value, reference[name][0], err_msg=name)


def test_synthetic_examples_do_not_depend_on_the_tower_count():
  with tf.Graph().as_default():
    whole = inputs.synthetic_examples(7, 0, 6, [4, 4, 3], 10)
    halves = [
      inputs.synthetic_examples(7, 3 * i, 3, [4, 4, 3], 10) for i in range(2)
    ]
    with tf1.Session() as sess:
      (w_img, w_lab), parts = sess.run([whole, halves])
  np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), w_img)
  np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), w_lab)
  assert len(np.unique(w_img.reshape(6, -1), axis=0)) == 6  # all distinct


def test_forward_only_runs_and_leaves_variables_alone():
  p = make(model='lenet', forward_only=True, num_gpus=2, batch_size=4)
  run = Session(p)
  before = run.values('v/')
  run.step(2)
  after = run.values('v/')
  for name in before:
    np.testing.assert_array_equal(after[name], before[name])
  run.close()


# ---- values, not the driver ------------------------------------------------

# The modules that may name the driver: itself, its entry points and the
# classic API adapter.
DRIVER_USERS = {
  'benchmark_cnn.py',
  '__main__.py',
  'tf_cnn_benchmarks.py',
  'config/classic_api.py',
}


def test_no_part_of_the_driver_imports_or_receives_it():
  import ast
  import pathlib

  root = pathlib.Path(benchmark_cnn.__file__).parent
  offenders = []
  for path in sorted(root.rglob('*.py')):
    name = path.relative_to(root).as_posix()
    if name in DRIVER_USERS:
      continue
    for node in ast.walk(ast.parse(path.read_text())):
      imported = []
      if isinstance(node, ast.ImportFrom):
        imported = [
          '%s.%s' % (node.module, a.name) for a in node.names if node.module
        ]
      elif isinstance(node, ast.Import):
        imported = [a.name for a in node.names]
      elif isinstance(node, ast.arg) and node.arg == 'bench':
        offenders.append('%s: parameter bench' % name)
      offenders.extend(
        '%s imports %s' % (name, m) for m in imported if 'benchmark_cnn' in m
      )
  assert offenders == []
