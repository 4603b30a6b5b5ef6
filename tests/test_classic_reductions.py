"""The classic spec-less reductions (issue 15, item 6) and the classic
--all_reduce_spec=collective[#N] of collective_all_reduce (issue 18)."""

import io

import numpy as np
import pytest
import tensorflow as tf

from tests import device_testing
from tests.test_distributed import launch
from tf_cnn_benchmarks import __main__ as entry
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import params as params_lib
from variable_mgr import allreduce
from variable_mgr import batch_allreduce
from variable_mgr import settings as settings_lib
from variable_mgr import topology

tf1 = tf.compat.v1

COMMON = dict(
  model='lenet',
  device='cpu',
  variable_update='replicated',
  num_gpus=4,
  batch_size=2,
  optimizer='momentum',
  init_learning_rate=0.005,
  num_batches=3,
  num_warmup_batches=1,
  display_every=100,
)


def losses(**kw):
  p = params_lib.make_params(**dict(COMMON, **kw))
  return np.array(benchmark_cnn.run_benchmark(p, out=io.StringIO()).losses)


@pytest.fixture(scope='module')
def copy_losses():
  return losses(all_reduce_spec='copy')


# ---- losses: the same training whatever the reduction's placement ------------


def test_default_reduction_trains_exactly_like_copy(copy_losses):
  assert abs(copy_losses[-1] - copy_losses[0]) > 1e-3
  np.testing.assert_array_equal(losses(), copy_losses)
  # Spread over the towers: the same add_n, another device.
  np.testing.assert_array_equal(
    losses(local_parameter_device='gpu'), copy_losses
  )


def test_hierarchical_copy_trains_like_copy(copy_losses):
  # (a+b)+(c+d) against a+b+c+d: equal up to float rounding.
  hierarchical = losses(hierarchical_copy=True)
  np.testing.assert_allclose(hierarchical, copy_losses, rtol=1e-6)


@pytest.mark.slow  # 8 towers
def test_gcp_v100_hierarchical_copy_trains_like_copy():
  kw = dict(num_gpus=8, num_batches=2)
  np.testing.assert_allclose(
    losses(hierarchical_copy=True, network_topology='gcp_v100', **kw),
    losses(all_reduce_spec='copy', **kw),
    rtol=1e-6,
  )


def test_gpu_indices_orders_the_ring(copy_losses):
  ring = losses(all_reduce_spec='xring', gpu_indices='2,0,3,1')
  np.testing.assert_allclose(ring, copy_losses, rtol=1e-5)


# ---- devices of the reduction ops ------------------------------------------


def _reduce(reduction, num_devices, num_tensors, **kw):
  """(sums evaluated, {tensor index: [devices of its AddN ops]})."""
  devices = device_testing.cpu_devices(num_devices)
  values = np.arange(num_devices * num_tensors * 3, dtype=np.float32).reshape(
    num_devices, num_tensors, 3
  )
  graph = tf.Graph()
  with graph.as_default():
    towers = []
    for i, d in enumerate(devices):
      with tf.device(d):
        towers.append([tf.constant(v) for v in values[i]])
    all_reduce = batch_allreduce.BatchAllReduce(reduction, **kw)
    sums = all_reduce.sum(towers, devices)
  adds = {}
  for op in graph.get_operations():
    if op.type == 'AddN':
      index = int(op.name.split('/')[0].split('_')[1])  # allreduce_K
      adds.setdefault(index, []).append(op.device)
  config = device_testing.session_config(num_devices)
  with tf1.Session(graph=graph, config=config) as sess:
    out = sess.run(sums)
  for i, d in enumerate(devices):
    assert all(device_testing.same_device(s.device, d) for s in sums[i])
    np.testing.assert_array_equal(np.array(out[i]), values.sum(axis=0))
  return adds


def test_local_parameter_device_cpu_reduces_on_the_cpu():
  adds = _reduce(topology.CopyToDevices(on_towers=False), 4, 5)
  assert {d for ds in adds.values() for d in ds} == {'/device:CPU:0'}


def test_local_parameter_device_gpu_spreads_over_the_towers():
  adds = _reduce(topology.CopyToDevices(on_towers=True), 4, 6)
  # Gradient k on tower k % 4.
  assert adds == {k: ['/device:CPU:%d' % (k % 4)] for k in range(6)}


@pytest.mark.parametrize(
  'name,pairs',
  [
    ('dgx1', [(0, 4), (1, 5), (2, 6), (3, 7), (4, 0)]),
    ('gcp_v100', [(0, 5), (2, 7), (5, 0), (7, 2), (0, 5)]),
  ],
)
def test_hierarchical_copy_uses_the_topology_main_devices(name, pairs):
  adds = _reduce(topology.HierarchicalCopy(name), 8, 5)
  for k, (first, second) in enumerate(pairs):
    # The two halves' sums on their main devices, the total on the first.
    assert sorted(adds[k]) == sorted(
      ['/device:CPU:%d' % first] * 2 + ['/device:CPU:%d' % second]
    ), (k, adds[k])


def test_ring_order_keeps_outputs_on_their_devices():
  # _reduce checks every output's device and value.
  xring = allreduce.parse_all_reduce_spec('xring')
  _reduce(xring, 4, 2, ring_order=(3, 1, 0, 2))


def test_header_names_the_default_reduction():
  out = io.StringIO()
  bench = benchmark_cnn.BenchmarkCNN(
    params_lib.make_params(**dict(COMMON, local_parameter_device='gpu')), out
  )
  bench.print_header()
  assert 'AllReduce:   copy to the towers in turn (classic default)' in (
    out.getvalue()
  )


# ---- flag checks ------------------------------------------------------------


@pytest.mark.parametrize(
  'kw,needle',
  [
    (dict(hierarchical_copy=True, num_gpus=3), 'even --num_gpus'),
    (dict(hierarchical_copy=True, num_gpus=1), 'even --num_gpus'),
    (
      dict(hierarchical_copy=True, network_topology='gcp_v100'),
      'needs --num_gpus=8',
    ),
    (dict(hierarchical_copy=True, all_reduce_spec='xring'), 'not both'),
    (
      dict(hierarchical_copy=True, variable_update='parameter_server'),
      'only used by the managers that all-reduce',
    ),
    (dict(network_topology='torus'), 'must be one of'),
  ],
)
def test_bad_hierarchical_copy_flags(kw, needle):
  with pytest.raises(params_lib.ParamsError, match=needle):
    params_lib.make_params(**dict(COMMON, **kw))


# ---- collective_all_reduce takes the classic collective spec ---------------

CLUSTER = dict(
  variable_update='collective_all_reduce',
  device='cpu',
  model='trivial',
  job_name='worker',
  task_index=0,
  worker_hosts='127.0.0.1:1,127.0.0.1:2',
)


@pytest.mark.parametrize('spec', ['collective', 'collective#2'])
def test_collective_all_reduce_accepts_the_collective_spec(spec):
  p = params_lib.make_params(**CLUSTER, all_reduce_spec=spec)
  assert p.all_reduce_spec == spec


@pytest.mark.parametrize('spec', ['xring', 'collective/pscpu', 'pscpu:2k:copy'])
def test_collective_all_reduce_refuses_other_specs(spec):
  with pytest.raises(params_lib.ParamsError, match='collective#N'):
    params_lib.make_params(**CLUSTER, all_reduce_spec=spec)


@pytest.mark.slow  # two cluster runs of two worker processes each
def test_collective_spec_and_merge_scope_train_like_the_plain_run(tmp_path):
  flags = [
    '--model=test_linear',
    '--data_name=cifar10',
    '--device=cpu',
    '--num_gpus=2',
    '--batch_size=4',
    '--num_batches=3',
    '--num_warmup_batches=1',
    '--variable_update=collective_all_reduce',
  ]
  runs = []
  for extra in (
    [],
    ['--all_reduce_spec=collective#2', '--allreduce_merge_scope=2'],
  ):
    rc, out, records = launch(
      tmp_path / str(len(runs)), 2, flags + extra, launcher_flags=['--num_ps=0']
    )
    assert rc == 0, out[-3000:]
    runs.append(np.array(records[0]['losses']))
  assert abs(runs[0][-1] - runs[0][0]) > 1e-4
  np.testing.assert_allclose(runs[1], runs[0], rtol=1e-6)


def test_from_settings_picks_the_classic_reduction():
  def picked(**kw):
    settings = params_lib.make_plan(**dict(COMMON, **kw)).manager_settings
    return str(batch_allreduce.BatchAllReduce.from_settings(settings).spec)

  assert picked() == 'copy to the CPU (classic default)'
  assert picked(local_parameter_device='gpu') == (
    'copy to the towers in turn (classic default)'
  )
  assert picked(hierarchical_copy=True) == 'hierarchical copy (dgx1)'
  assert picked(all_reduce_spec='xring') == 'xring'


def test_the_plan_holds_the_spec_parsed_once():
  plan = params_lib.make_plan(**dict(COMMON, all_reduce_spec='xring#2'))
  spec = plan.manager_settings.all_reduce_spec
  # The checks and the settings share one parsed value (parsed once).
  assert spec is allreduce.parse_all_reduce_spec('xring#2')
  assert str(spec) == 'xring#2'
  manager = plan.manager_cls.from_settings(
    plan.manager_settings, device_testing.cpu_devices(4)
  )
  assert manager.all_reduce.spec is spec


@pytest.mark.parametrize(
  'spec,subdivisions',
  [(None, -1), ('collective', -1), ('collective#1', 1), ('collective#3', 3)],
)
def test_collective_subdivisions_come_from_the_parsed_spec(spec, subdivisions):
  p = params_lib.Params(all_reduce_spec=spec)
  settings = settings_lib.ManagerSettings.from_params(p)
  assert settings.collective_subdivisions == subdivisions


def test_a_bad_spec_is_one_settings_error_naming_the_flag():
  p = params_lib.Params(all_reduce_spec='xring:12q:pscpu')
  with pytest.raises(settings_lib.SettingsError) as info:
    settings_lib.ManagerSettings.from_params(p)
  message = str(info.value)
  assert '\n' not in message
  assert message.startswith("--all_reduce_spec='xring:12q:pscpu': position 6")


def test_horovod_answers_one_line_pointing_to_collective(capfd):
  entry.FLAGS.unparse_flags()
  status = entry.main(
    ['tf_cnn_benchmarks', '--device=cpu', '--variable_update=horovod']
  )
  (line,) = capfd.readouterr().err.strip().splitlines()
  assert status == 2
  assert 'Horovod is not available' in line
  assert '--variable_update=collective_all_reduce' in line


def test_gpu_indices_reach_the_all_reduce():
  plan = params_lib.make_plan(
    **dict(COMMON, all_reduce_spec='xring', gpu_indices='1,0,3,2')
  )
  all_reduce = batch_allreduce.BatchAllReduce.from_settings(
    plan.manager_settings
  )
  assert all_reduce.ring_order == (1, 0, 3, 2)
  assert all_reduce.describe() == 'xring (tower order 1,0,3,2)'
