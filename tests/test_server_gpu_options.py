"""The GPU runtime options reach a cluster task's server config.

On a TF gRPC server the server creates the devices, so the GPU options
(allow_growth, memory fraction, ring order, ...) must be in the ConfigProto
the server starts with, not only in the client session's.
"""

import io

import pytest

from tf_cnn_benchmarks.cluster import roles
from tf_cnn_benchmarks.cluster import run_context
from tf_cnn_benchmarks.cluster import servers
from tf_cnn_benchmarks.cluster import spec as spec_lib
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.platform import gpu_runtime
from variable_mgr import traits as traits_lib

GPU_FLAGS = dict(
  device='gpu',
  num_gpus=2,
  allow_growth=False,
  gpu_memory_frac_for_testing=0.25,
  force_gpu_compatible=True,
  use_unified_memory=True,
  timestamped_allocator=True,
  gpu_kt_max_interval=7,
  gpu_kt_max_bytes=1024,
  gpu_kt_max_pending=3,
  gpu_indices='1,0',
  build_only=True,  # resolves --device=gpu on this GPU-less machine
)
# Where each of GPU_FLAGS lands in the server's ConfigProto.
WANT = {
  'gpu_options.allow_growth': False,
  'gpu_options.per_process_gpu_memory_fraction': 0.25,
  'gpu_options.force_gpu_compatible': True,
  'gpu_options.experimental.use_unified_memory': True,
  'gpu_options.experimental.timestamped_allocator': True,
  'gpu_options.experimental.kernel_tracker_max_interval': 7,
  'gpu_options.experimental.kernel_tracker_max_bytes': 1024,
  'gpu_options.experimental.kernel_tracker_max_pending': 3,
  'gpu_options.experimental.collective_ring_order': '1,0',
}


def _field(config, path):
  for name in path.split('.'):
    config = getattr(config, name)
  return config


def _cluster(job='worker', index=0):
  return spec_lib.Cluster(
    job, index, ('127.0.0.1:2000', '127.0.0.1:2001'), ('127.0.0.1:2002',), None
  )


class _FakeServer:
  """Stands in for tf.distribute.Server: records the config it is given."""

  configs = []

  def __init__(self, cluster_spec, **kwargs):
    del cluster_spec
    _FakeServer.configs.append(kwargs['config'])
    self.target = 'grpc://fake'

  def join(self):
    pass


@pytest.fixture
def fake_server(monkeypatch):
  _FakeServer.configs = []
  monkeypatch.setattr(servers.tf.distribute, 'Server', _FakeServer)
  return _FakeServer


def test_server_config_sets_every_gpu_option():
  params = params_lib.make_params(**GPU_FLAGS)
  fields = gpu_runtime.config_fields(params)
  assert set(fields) == set(WANT)
  config = servers.server_config(1, servers.ThreadPools(2, 3), fields)
  for path, value in WANT.items():
    assert _field(config, path) == pytest.approx(value), path
  # The pools and the collective leader are still there.
  assert config.intra_op_parallelism_threads == 2
  assert config.inter_op_parallelism_threads == 3
  assert config.experimental.collective_group_leader.endswith('task:0')


def test_server_config_without_options_keeps_shared_gpu_growth():
  config = servers.server_config(1)
  assert config.gpu_options.allow_growth is True
  assert config.gpu_options.per_process_gpu_memory_fraction == 0
  assert config.gpu_options.experimental.collective_ring_order == ''


def test_client_task_starts_its_server_with_the_gpu_options(fake_server):
  params = params_lib.make_params(**GPU_FLAGS)
  ctx = run_context.make(
    _cluster(),
    traits_lib.Traits(runs_in_cluster=True, needs_ps=True),
    1,
    runtime_fields=gpu_runtime.config_fields(params),
  )
  servers.start_server(ctx.cluster, 1, ctx.pools, ctx.runtime_fields)
  (config,) = fake_server.configs
  for path, value in WANT.items():
    assert _field(config, path) == pytest.approx(value), path


def test_benchmark_passes_the_options_to_its_run_context():
  from tf_cnn_benchmarks import benchmark_cnn  # pylint: disable=g-import-not-at-top

  plan = params_lib.make_plan(
    **GPU_FLAGS,
    model='trivial',
    variable_update='parameter_server',
    job_name='worker',
    task_index=0,
    worker_hosts='127.0.0.1:2000,127.0.0.1:2001',
    ps_hosts='127.0.0.1:2002',
  )
  bench = benchmark_cnn.BenchmarkCNN(plan)
  assert bench.run_context.runtime_fields == pytest.approx(WANT)


def test_serve_only_task_starts_its_server_with_the_gpu_options(
  fake_server, monkeypatch
):
  monkeypatch.setattr(roles.done_flags, 'DoneFlags', lambda *a: None)
  monkeypatch.setattr(roles, 'wait_for_clients', lambda *a: None)
  params = params_lib.make_params(**GPU_FLAGS)
  status = roles.serve(
    _cluster('ps', 0),
    one_graph=False,
    out=io.StringIO(),
    runtime_fields=gpu_runtime.config_fields(params),
  )
  assert status == 0
  (config,) = fake_server.configs
  for path, value in WANT.items():
    assert _field(config, path) == pytest.approx(value), path
