"""--cluster_threads: each task's server pools for the tasks on its host."""

import os

import pytest

from tests.helpers import FakeSwitch
from tf_cnn_benchmarks.cluster import servers
from tf_cnn_benchmarks.cluster import spec as spec_lib
from tf_cnn_benchmarks.cluster import thread_pools
from tf_cnn_benchmarks.config import params as params_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TF_DEFAULTS = servers.ThreadPools(0, 0)


def _cluster(job, index, workers, ps=(), controller=None):
  return spec_lib.Cluster(job, index, tuple(workers), tuple(ps), controller)


def _local(n, first_port=2000):
  return ['127.0.0.1:%d' % (first_port + k) for k in range(n)]


@pytest.mark.parametrize(
  'cores,num_workers,want_worker,want_ps',
  [
    # 2 cores, 2 workers + 1 ps: a worker gets 1 of each, the ps 2 // 3 -> 1.
    (2, 2, (1, 1), (1, 1)),
    (8, 2, (4, 4), (2, 2)),
    (16, 3, (5, 5), (4, 4)),
    (2, 4, (1, 1), (1, 1)),  # never below one thread
  ],
)
def test_tasks_sharing_a_host_split_its_cores(
  cores, num_workers, want_worker, want_ps
):
  workers, ps = _local(num_workers), _local(1, 3000)
  for index in range(num_workers):
    got = servers.thread_pools(
      _cluster('worker', index, workers, ps), 'auto', cores=cores
    )
    assert got == servers.ThreadPools(*want_worker)
  got = servers.thread_pools(
    _cluster('ps', 0, workers, ps), 'auto', cores=cores
  )
  assert got == servers.ThreadPools(*want_ps)


def test_controller_beside_workers_gets_an_even_share():
  workers = _local(2)
  controller = '127.0.0.1:4000'
  got = servers.thread_pools(
    _cluster('controller', 0, workers, controller=controller), 'auto', cores=8
  )
  assert got == servers.ThreadPools(2, 2)  # 8 cores // 3 tasks
  got = servers.thread_pools(
    _cluster('worker', 1, workers, controller=controller), 'auto', cores=8
  )
  assert got == servers.ThreadPools(4, 4)


def test_one_task_per_host_keeps_tensorflow_defaults():
  workers = ['hosta:2222', 'hostb:2222']
  ps = ['hostc:2222']
  for me in [('worker', 0), ('worker', 1), ('ps', 0)]:
    got = servers.thread_pools(_cluster(*me, workers, ps), 'auto', cores=2)
    assert got == TF_DEFAULTS


def test_only_the_tasks_on_my_host_count():
  # Two hosts, each with 2 workers; the ps alone on a third host.
  workers = ['hosta:1', 'hosta:2', 'hostb:1', 'hostb:2']
  ps = ['hostc:1']
  cluster = _cluster('worker', 2, workers, ps)
  assert servers.tasks_on_my_host(cluster) == {'worker': 2, 'ps': 0}
  assert servers.thread_pools(cluster, 'auto', cores=8) == (
    servers.ThreadPools(4, 4)
  )
  assert servers.thread_pools(
    _cluster('ps', 0, workers, ps), 'auto', cores=8
  ) == (TF_DEFAULTS)
  # ps tasks on a host without workers split it among themselves.
  two_ps = _cluster('ps', 1, workers, ['hostc:1', 'hostc:2'])
  assert servers.thread_pools(two_ps, 'auto', cores=8) == (
    servers.ThreadPools(4, 4)
  )


def test_tf_default_and_explicit_counts():
  cluster = _cluster('worker', 0, _local(2), _local(1, 3000))
  assert servers.thread_pools(cluster, 'tf_default', cores=8) == TF_DEFAULTS
  explicit = servers.ThreadPools(intra_op=3, inter_op=0)
  # An explicit count wins; the other pool keeps the mode's size.
  assert servers.thread_pools(
    cluster, 'auto', cores=8, explicit=explicit
  ) == servers.ThreadPools(3, 4)
  assert servers.thread_pools(
    cluster, 'tf_default', cores=8, explicit=explicit
  ) == servers.ThreadPools(3, 0)


def test_server_config_carries_the_pools():
  config = servers.server_config(2, servers.ThreadPools(1, 3))
  assert config.intra_op_parallelism_threads == 1
  assert config.inter_op_parallelism_threads == 3
  assert config.device_count['CPU'] == 2
  default = servers.server_config(1)
  assert default.intra_op_parallelism_threads == 0
  assert default.inter_op_parallelism_threads == 0


def _value(text):
  if text.isdigit():
    return int(text)
  return {'true': True, 'false': False}.get(text, text)


def _launched_params(num_workers, num_ps, extra=(), switch=None):
  """{task: Params} of the commands the launcher makes for a cluster."""
  from tf_cnn_benchmarks.commands import launch_local_cluster  # pylint: disable=g-import-not-at-top

  args, flags = launch_local_cluster.parse_args(
    ['--num_workers=%d' % num_workers, '--', '--device=cpu', *extra]
  )
  commands = launch_local_cluster.task_commands(
    args, flags, num_ps, False, switch
  )
  plans = {}
  for task, argv in commands.items():
    kwargs = {}
    for flag in argv[argv.index('-m') + 2 :]:
      name, _, value = flag.lstrip('-').partition('=')
      kwargs[name] = _value(value)
    plans[task] = params_lib.make_plan(**kwargs)
  return plans


@pytest.mark.parametrize('num_workers', [1, 2, 3])
@pytest.mark.parametrize('switch', [False, True])
def test_launched_tasks_split_the_cores(num_workers, switch):
  # On switch ports too: each task has an address of its own, but all run
  # on this machine's cores (the launcher says --tasks_colocated=true).
  cores = thread_pools.available_cores()
  plans = _launched_params(
    num_workers, 1, switch=FakeSwitch() if switch else None
  )
  assert sorted(plans) == ['ps:0'] + [
    'worker:%d' % w for w in range(num_workers)
  ]
  for task, plan in plans.items():
    assert plan.params.cluster_threads == 'auto'
    got = servers.pools_for(plan.cluster, plan.params)
    share = max(
      1,
      cores // (num_workers if task.startswith('worker') else num_workers + 1),
    )
    assert got == servers.ThreadPools(share, share), task


def test_launched_tasks_with_tf_default_and_explicit_threads():
  plans = _launched_params(2, 1, ['--cluster_threads=tf_default'])
  for plan in plans.values():
    assert servers.pools_for(plan.cluster, plan.params) == TF_DEFAULTS
  plans = _launched_params(2, 1, ['--num_intra_threads=2'])
  for plan in plans.values():
    assert servers.pools_for(plan.cluster, plan.params).intra_op == 2


def test_colocated_tasks_split_the_cores_whatever_their_addresses():
  workers, ps = ['hosta:1', 'hostb:1', 'hostc:1'], ['hostd:1']
  for me in [('worker', 0), ('worker', 2)]:
    cluster = _cluster(*me, workers, ps)
    assert servers.thread_pools(cluster, 'auto', cores=2) == TF_DEFAULTS
    got = servers.thread_pools(cluster, 'auto', cores=8, colocated=True)
    assert got == servers.ThreadPools(2, 2)  # 8 cores // 3 workers
  ps_task = _cluster('ps', 0, workers, ps)
  got = servers.thread_pools(ps_task, 'auto', cores=8, colocated=True)
  assert got == servers.ThreadPools(2, 2)  # 8 // 4 tasks
  # tf_default and explicit counts still win.
  cluster = _cluster('worker', 1, workers, ps)
  got = servers.thread_pools(cluster, 'tf_default', cores=8, colocated=True)
  assert got == TF_DEFAULTS


def test_the_launcher_keeps_a_tasks_colocated_flag_it_is_given():
  plans = _launched_params(
    2, 1, ['--tasks_colocated=false'], switch=FakeSwitch()
  )
  for plan in plans.values():
    assert plan.params.tasks_colocated is False
    assert servers.pools_for(plan.cluster, plan.params) == TF_DEFAULTS
  from tf_cnn_benchmarks.commands import launch_local_cluster  # pylint: disable=g-import-not-at-top

  for given in ['--notasks_colocated', '--tasks_colocated']:
    assert launch_local_cluster.colocated_flag(['--model=x', given]) == []
  assert launch_local_cluster.colocated_flag(['--tasks_colocatedx=1']) == [
    '--tasks_colocated=true'
  ]


def test_bad_cluster_threads_is_a_params_error():
  with pytest.raises(params_lib.ParamsError, match='--cluster_threads=many'):
    params_lib.make_params(cluster_threads='many')
