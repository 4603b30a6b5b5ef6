"""The run is resolved once: plan, modes, manager traits, layout, contexts."""

import io
import json

import pytest

from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.cluster import layout as layout_lib
from tf_cnn_benchmarks.cluster import roles as roles_lib
from tf_cnn_benchmarks.cluster import run_context
from tf_cnn_benchmarks.cluster import spec as cluster_spec
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.platform import devices
import variable_mgr
from variable_mgr import traits as traits_lib

WORKERS = '127.0.0.1:1,127.0.0.1:2'


def test_plan_resolves_mode_cluster_and_manager():
  plan = params_lib.make_plan(device='cpu', model='trivial')
  assert plan.mode is params_lib.Mode.TRAIN
  assert plan.cluster is None
  assert plan.manager_cls is variable_mgr.get('parameter_server')
  assert not plan.device_was_auto
  assert params_lib.make_plan(model='trivial').device_was_auto
  forward = params_lib.make_plan(
    device='cpu', model='trivial', forward_only=True
  )
  assert forward.mode is params_lib.Mode.FORWARD_ONLY
  cluster = params_lib.make_plan(
    device='cpu',
    model='trivial',
    job_name='worker',
    task_index=1,
    worker_hosts=WORKERS,
    ps_hosts='127.0.0.1:3',
  )
  assert cluster.cluster.me == ('worker', 1)
  assert cluster.cluster.num_workers == 2
  # The cluster variant of parameter_server, not the local class.
  assert cluster.manager_cls is variable_mgr.get(
    'parameter_server', in_cluster=True
  )
  assert cluster.manager_cls is not variable_mgr.get('parameter_server')


def test_cluster_is_parsed_once_from_flags_to_driver(monkeypatch):
  calls = []
  original = cluster_spec.resolve

  def counting(*args, **kwargs):
    calls.append(args)
    return original(*args, **kwargs)

  monkeypatch.setattr(cluster_spec, 'resolve', counting)
  plan = params_lib.make_plan(device='cpu', model='trivial', num_gpus=2)
  bench = benchmark_cnn.BenchmarkCNN(plan, out=io.StringIO())
  bench.build()
  assert len(calls) == 1


def test_tf_config_cluster_in_plan(monkeypatch):
  monkeypatch.setenv(
    'TF_CONFIG',
    json.dumps(
      {
        'cluster': {'worker': WORKERS.split(',')},
        'task': {'type': 'worker', 'index': 1},
      }
    ),
  )
  plan = params_lib.make_plan(
    device='cpu', model='trivial', variable_update='collective_all_reduce'
  )
  assert plan.cluster.me == ('worker', 1)
  assert plan.manager_cls.traits.cross_worker_ops


def test_registry_lookup_is_keyword_only():
  with pytest.raises(TypeError):
    variable_mgr.get('parameter_server', True)  # pylint: disable=too-many-function-args


def test_registered_names_follow_traits():
  assert variable_mgr.local_names() == [
    'independent',
    'parameter_server',
    'replicated',
  ]
  assert variable_mgr.cluster_names() == [
    'collective_all_reduce',
    'distributed_all_reduce',
    'distributed_replicated',
    'hybrid',
    'parameter_server',
  ]
  assert variable_mgr.all_reduce_names() == [
    'distributed_all_reduce',
    'replicated',
  ]


@pytest.mark.parametrize(
  'name, sync, lockstep',
  [
    ('parameter_server', True, True),
    ('parameter_server', False, False),
    ('distributed_replicated', True, True),
    ('distributed_replicated', False, False),
    ('collective_all_reduce', True, True),
    ('collective_all_reduce', False, True),
    ('hybrid', False, True),
    ('distributed_all_reduce', True, False),
  ],
)
def test_workers_in_lockstep(name, sync, lockstep):
  traits = variable_mgr.get(name, in_cluster=True).traits
  assert traits_lib.workers_in_lockstep(traits, sync) is lockstep


def test_layout_of_local_run_worker_and_controller():
  ps_traits = variable_mgr.get('parameter_server', in_cluster=True).traits
  local = layout_lib.layout(None, ps_traits, 'cpu', 3)
  assert local.tower_devices == ('/cpu:0', '/cpu:1', '/cpu:2')
  assert (local.first_tower_index, local.num_graphs, local.num_step_towers) == (
    0,
    1,
    3,
  )
  cluster = cluster_spec.resolve(
    'worker', 1, WORKERS, '127.0.0.1:3', None, 'grpc', env={}
  )
  worker = layout_lib.layout(cluster, ps_traits, 'cpu', 2)
  assert worker.tower_devices == (
    '/job:worker/replica:0/task:1/device:CPU:0',
    '/job:worker/replica:0/task:1/device:CPU:1',
  )
  assert (
    worker.first_tower_index,
    worker.num_graphs,
    worker.num_step_towers,
  ) == (2, 2, 4)
  assert worker.manager_cluster.task_index == 1
  assert not worker.manager_cluster.is_chief
  one_graph = variable_mgr.get('distributed_all_reduce').traits
  controller = cluster_spec.resolve(
    'controller', 0, WORKERS, None, '127.0.0.1:4', 'grpc', env={}
  )
  spanning = layout_lib.layout(controller, one_graph, 'cpu', 2)
  assert len(spanning.tower_devices) == 4
  assert (
    spanning.first_tower_index,
    spanning.num_graphs,
    spanning.num_step_towers,
  ) == (0, 1, 4)


def test_roles_of_each_kind_of_cluster():
  cluster = cluster_spec.resolve(
    'worker', 0, WORKERS, '127.0.0.1:3', None, 'grpc', env={}
  )
  with_ps = roles_lib.roles(cluster, one_graph=False)
  assert with_ps.clients == (('worker', 0), ('worker', 1))
  assert with_ps.flag_keepers == with_ps.serve_only == (('ps', 0),)
  no_ps = roles_lib.roles(
    cluster_spec.resolve('worker', 0, WORKERS, None, None, 'grpc', env={}),
    one_graph=False,
  )
  assert no_ps.flag_keepers == (('worker', 0),) and not no_ps.serve_only
  spanning = roles_lib.roles(
    cluster_spec.resolve(
      'controller', 0, WORKERS, None, '127.0.0.1:4', 'grpc', env={}
    ),
    one_graph=True,
  )
  assert spanning.clients == (('controller', 0),)
  assert spanning.serve_only == (('worker', 0), ('worker', 1))


def test_logical_cpu_count_rule():
  assert devices.logical_cpu_count('cpu', 4) == 4
  assert devices.logical_cpu_count('gpu', 4) == 1
  config = devices.session_config('cpu', 3)
  assert config.device_count['CPU'] == 3


def test_run_context_reports_results_is_injected_not_patched():
  cluster = cluster_spec.resolve(
    'worker', 1, WORKERS, None, None, 'grpc', env={}
  )
  traits = variable_mgr.get('collective_all_reduce').traits
  default = run_context.make(cluster, traits, 1)
  assert not default.reports_results  # worker 1 is not the chief
  forced = run_context.make(cluster, traits, 1, reports_results=True)
  assert forced.reports_results
  # Still not the chief: it neither says so nor writes checkpoints.
  assert '(chief)' not in forced.describe and not forced.is_chief
  assert run_context.make(None, traits, 1).reports_results
  plan = params_lib.make_plan(device='cpu', model='trivial')
  quiet = benchmark_cnn.BenchmarkCNN(
    plan, out=io.StringIO(), reports_results=False
  )
  assert not quiet.reports_results
