"""GPU graphs of every manager, all-reduce spec and precision, built on CPU.

Each case builds the graph a GPU run would execute (--build_only: /gpu:N
device strings, no session) and asserts on its placement report: tower i's
compute on /gpu:i, the variables where the manager puts them, NCCL ops only
for nccl specs, the v0 -> vN copies, the loss scale beside the global step,
the inputs on their tower's device, and a GPU kernel in this TensorFlow
build for every op on a GPU.

The default suite runs a covering subset (every manager, every spec, every
precision and device count at least once); `-m slow` runs the full matrix
(manager x spec x fp32/fp16/bf16 x 1, 2, 8 GPUs, and 2 workers x 4 GPUs
for the cluster managers).
"""

from __future__ import annotations

import io
import itertools
import re

import pytest

import models
from models.model import Model
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import params as params_lib
import variable_mgr
from variable_mgr import allreduce

MODEL = 'test_gpu_tiny'
PRECISIONS = {
  'fp32': {},
  # The automatic scale puts the update in a cond: its ops are checked too.
  'fp16': {'use_fp16': True, 'fp16_enable_auto_loss_scale': True},
  'bf16': {'use_bf16': True},
}
GPU_COUNTS = (1, 2, 8)
WORKERS, CLUSTER_GPUS = 2, 4
SPECS = tuple(allreduce.algorithm_names())


class _Tiny(Model):
  """conv + batch norm + pool + classifier: the GPU kernels of a CNN."""

  def body(self, net):
    net.conv(4, 3, batch_norm=True)
    net.max_pool(2, 2)
    net.flatten()


def setup_module():
  if MODEL not in models.names('cifar10'):
    models.register(
      MODEL, 'cifar10', lambda: _Tiny(MODEL, 'cifar10', 8, 2, 0.1)
    )


def _cluster_flags(name: str) -> dict:
  """Cluster flags of worker 0 (or the controller) for manager `name`."""
  traits = variable_mgr.get(name, in_cluster=True).traits
  workers = ','.join('127.0.0.1:%d' % (7100 + w) for w in range(WORKERS))
  flags = {'worker_hosts': workers, 'job_name': 'worker', 'task_index': 0}
  if traits.needs_ps:
    flags['ps_hosts'] = '127.0.0.1:7099'
  if traits.one_graph:
    flags.update(job_name='controller', controller_host='127.0.0.1:7098')
  return flags


def build_report(**flags) -> dict:
  """The placement report of a build-only run (a dict, as in the file)."""
  setup_module()
  plan = params_lib.make_plan(
    device='gpu',
    model=MODEL,
    data_name='cifar10',
    num_batches=1,
    build_only=True,
    **flags,
  )
  bench = benchmark_cnn.BenchmarkCNN(plan, out=io.StringIO())
  return bench.build_only().to_dict()


# ---- the cases ------------------------------------------------------------


def _specs_of(name: str, in_cluster: bool) -> tuple:
  traits = variable_mgr.get(name, in_cluster=in_cluster).traits
  return SPECS if traits.all_reduce else (None,)


def full_matrix() -> list:
  """Every (manager, spec, precision, gpus, cluster) case."""
  cases = []
  for name in variable_mgr.local_names():
    for spec, prec, gpus in itertools.product(
      _specs_of(name, False), PRECISIONS, GPU_COUNTS
    ):
      cases.append((name, spec, prec, gpus, False))
  for name in variable_mgr.cluster_names():
    for spec, prec in itertools.product(_specs_of(name, True), PRECISIONS):
      cases.append((name, spec, prec, CLUSTER_GPUS, True))
  return cases


def covering_subset() -> list:
  """Every manager, spec, precision and device count at least once.

  Graph building costs about a second per tower on a loaded 2-core CPU, so
  the default suite keeps to about 60 towers: each spec at 2 GPUs
  (precisions rotated), nccl also at 8 GPUs, each local manager at 1 and
  2 GPUs, each cluster manager once at 2 workers x 4 GPUs (nccl within a
  worker for distributed_all_reduce). `-m slow` runs the rest.
  """
  cases, precs = [], list(PRECISIONS)
  for m, name in enumerate(variable_mgr.local_names()):
    specs = _specs_of(name, False)
    for k, spec in enumerate(specs):
      cases.append((name, spec, precs[(k + m) % 3], 2, False))
    cases.append((name, specs[0], precs[(m + 1) % 3], 1, False))
    if 'nccl' in specs:
      cases.append((name, 'nccl', 'fp16', 8, False))
  for k, name in enumerate(variable_mgr.cluster_names()):
    spec = 'nccl' if 'nccl' in _specs_of(name, True) else None
    cases.append((name, spec, precs[k % 3], CLUSTER_GPUS, True))
  return sorted(set(cases), key=str)


def _case_id(case) -> str:
  name, spec, prec, gpus, cluster = case
  where = '%dx%d' % (WORKERS, gpus) if cluster else '%dgpu' % gpus
  return '-'.join(x for x in (name, spec or 'nospec', prec, where))


def _flags(case) -> dict:
  name, spec, prec, gpus, cluster = case
  flags = dict(PRECISIONS[prec], variable_update=name, num_gpus=gpus)
  if spec is not None:
    flags['all_reduce_spec'] = spec
    if cluster:  # nccl & co. within each worker (see the last test)
      flags['all_reduce_spec'] = '%s/xring' % spec
  if cluster:
    flags.update(_cluster_flags(name))
  return flags


# ---- what every case must show ----------------------------------------------

_TOWER = re.compile(r'(?:^|/)(?:v|tower_)(\d+)/')


def _by_type(report, op_type) -> list:
  return [op for op in report['ops'] if op['type'] == op_type]


def check_towers(report) -> None:
  """Tower i's convolutions (forward and backward) run on tower i's device."""
  towers = report['run']['tower_devices']
  convs = [
    op
    for op in report['ops']
    if op['type'].startswith('Conv2D') and op['in_step']
  ]
  assert convs
  per_tower = [0] * len(towers)
  for op in convs:
    index = int(_TOWER.search(op['name']).group(1))
    assert op['device'] == towers[index], op
    per_tower[index] += 1
  assert len(set(per_tower)) == 1 and per_tower[0] > 0, per_tower


def check_kernels(report) -> None:
  kernels = report['summary']['kernel_check']
  assert kernels['registry_has_gpu_kernels']
  assert kernels['gpu_ops_checked'] > 0
  assert kernels['missing_gpu_kernel'] == []


def check_inputs(report) -> None:
  towers = report['run']['tower_devices']
  inputs = report['summary']['inputs']
  assert [i['images']['device'] for i in inputs] == towers
  assert [i['labels']['device'] for i in inputs] == towers


def check_nccl(report, spec) -> None:
  """NcclAllReduce ops exactly when the spec asks for nccl (and >1 tower)."""
  nccl = _by_type(report, 'NcclAllReduce')
  towers = report['run']['tower_devices']
  wanted = spec is not None and 'nccl' in spec and len(towers) > 1
  assert bool(nccl) == wanted, (spec, len(nccl))
  assert {op['device'] for op in nccl} == (set(towers) if wanted else set())


def _model_variables(report) -> dict:
  """{relative name: [(copy name, device)]} of the variables with gradients."""
  names = {r['variable'] for r in report['summary']['reductions']}
  return {
    v['name']: [(c['name'], c['device']) for c in v['copies']]
    for v in report['summary']['variables']
    if v['name'] in names
  }


def _device_of(report, name) -> str:
  for v in report['summary']['variables']:
    for c in v['copies']:
      if c['name'] == name:
        return c['device']
  raise AssertionError('no variable %s' % name)


def check_loss_scale(report, prec) -> None:
  """With fp16, the loss scale lives beside the global step, on a CPU."""
  names = [
    c['name']
    for v in report['summary']['variables']
    for c in v['copies']
    if c['name'].endswith('loss_scale')
  ]
  if prec != 'fp16':
    assert names == []
    return
  assert len(names) == 1
  device = _device_of(report, names[0])
  assert device == _device_of(report, 'global_step')
  assert device.endswith('/device:CPU:0')


def check_copies(report, replicas_from) -> None:
  """Post-init copies: each replica of a model variable from its source."""
  copies = {
    c['target']: c['source'] for c in report['summary']['post_init_copies']
  }
  for relative, replicas in _model_variables(report).items():
    source = replicas_from(relative)
    for name, _ in replicas:
      if name != source and re.match(r'v\d+/', name):
        assert copies.get(name) == source, (name, copies.get(name))


# ---- what each manager documents ------------------------------------------


def _expect_replicas(report, devices) -> None:
  """One copy 'vI/x' per tower device I of every model variable."""
  for relative, replicas in _model_variables(report).items():
    own = sorted(c for c in replicas if re.match(r'v\d+/', c[0]))
    assert own == sorted(
      ('v%d/%s' % (i, relative), d) for i, d in enumerate(devices)
    ), relative


def _on_ps(report) -> None:
  for relative, replicas in _model_variables(report).items():
    shared = [d for n, d in replicas if n.startswith('v/')]
    assert shared and all(d.startswith('/job:ps/') for d in shared), relative


def check_manager(report, name: str) -> None:
  towers = report['run']['tower_devices']
  variables = _model_variables(report)
  if name == 'parameter_server' and not towers[0].startswith('/job:'):
    # --local_parameter_device resolves to gpu: spread over the towers.
    for replicas in variables.values():
      assert len(replicas) == 1 and replicas[0][1] in towers
  elif name == 'parameter_server':
    _on_ps(report)
  elif name in ('replicated', 'distributed_all_reduce'):
    _expect_replicas(report, towers)
    check_copies(report, lambda rel: 'v0/' + rel)
  elif name == 'independent':
    _expect_replicas(report, towers)
    assert report['summary']['post_init_copies'] == []
  elif name == 'distributed_replicated':
    _expect_replicas(report, towers)
    _on_ps(report)
    # After init every tower's copy is written from the ps copy (the values
    # may travel packed, one transfer per ps task).
    summary = report['summary']
    targets = {c['target'] for c in summary['post_init_copies']}
    own = {n for r in variables.values() for n, _ in r if n[1].isdigit()}
    assert own <= targets
    from_ps = sum(
      t['bytes']
      for t in summary['post_init_transfers']
      if t['src'].startswith('/job:ps/')
    )
    model_bytes = sum(
      v['bytes'] for v in summary['variables'] if v['name'] in variables
    )
    assert from_ps >= model_bytes > 0
  elif name in ('collective_all_reduce', 'hybrid'):
    # Every copy on this worker's GPUs (hybrid: the big ones on the ps);
    # broadcast from worker 0's tower 0 after init.
    for replicas in variables.values():
      own = [d for n, d in replicas if re.match(r'v\d+/', n)]
      assert own == [] or sorted(own) == sorted(towers)
    sources = {c['source_type'] for c in report['summary']['post_init_copies']}
    assert sources <= {'CollectiveBcastRecvV2', 'VarHandleOp', 'VariableV2'}


def check_case(case, report) -> None:
  name, spec, prec, gpus, cluster = case
  towers = report['run']['tower_devices']
  one_graph = variable_mgr.get(name, in_cluster=cluster).traits.one_graph
  assert len(towers) == gpus * (WORKERS if one_graph else 1)
  assert all('/device:GPU:' in t for t in towers)
  check_towers(report)
  check_kernels(report)
  check_inputs(report)
  check_nccl(report, spec)
  check_loss_scale(report, prec)
  check_manager(report, name)


@pytest.mark.parametrize('case', covering_subset(), ids=_case_id)
def test_gpu_graph(case):
  check_case(case, build_report(**_flags(case)))


_SUBSET = set(covering_subset())


@pytest.mark.slow
@pytest.mark.parametrize(
  'case', [c for c in full_matrix() if c not in _SUBSET], ids=_case_id
)
def test_gpu_graph_full_matrix(case):
  check_case(case, build_report(**_flags(case)))


def test_subset_covers_every_manager_spec_precision_and_count():
  subset = covering_subset()
  assert {c[0] for c in subset} == set(variable_mgr.names())
  assert {c[1] for c in subset if c[1] and not c[4]} == set(SPECS)
  assert {c[2] for c in subset} == set(PRECISIONS)
  assert {c[3] for c in subset if not c[4]} == set(GPU_COUNTS)
  assert set(subset) <= set(full_matrix())


def test_nccl_across_workers_is_refused():
  # One NcclAllReduce group cannot span two worker processes: nccl is only
  # the intra-worker part of a cluster's spec (what the matrix builds).
  flags = _flags(('distributed_all_reduce', 'nccl', 'fp32', 4, True))
  flags['all_reduce_spec'] = 'nccl'
  with pytest.raises(params_lib.ParamsError, match='one worker only'):
    build_report(**flags)
