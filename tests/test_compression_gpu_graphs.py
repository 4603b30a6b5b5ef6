"""GPU graphs with --gradient_compression, built on CPU (--build_only).

Every compressor of the registry on replicated with NCCL (2 GPUs), and one
compressor per cluster manager (2 workers x 4 GPUs): the graph passes the
checks of every GPU graph (tests/test_gpu_graphs.py: placement, a GPU
kernel for every GPU op), NCCL carries the wire dtype, the state lives on
the towers' GPUs (Q copied from tower 0 after init), and a cast halves the
bytes a parameter-server worker pushes.
"""

import pytest

from tests import test_gpu_graphs as gpu
from variable_mgr.compression import catalog
from variable_mgr.compression import registry

# The float32 matrices PowerSGD compresses in test_gpu_tiny (affine0/weights;
# the conv kernel [27, 4] is too small to gain at rank 4).
COMPRESSED = ('affine0/weights',)


def _nccl_dtypes(report) -> list:
  return [tuple(op['dtypes']) for op in gpu._by_type(report, 'NcclAllReduce')]


@pytest.mark.parametrize('compression', registry.names())
def test_replicated_nccl(compression):
  case = ('replicated', 'nccl', 'fp32', 2, False)
  flags = dict(gpu._flags(case), gradient_compression=compression)
  report = gpu.build_report(**flags)
  gpu.check_case(case, report)
  declared = catalog.declared(compression)
  dtypes = _nccl_dtypes(report)
  gradients = _gradient_count(report)
  # One op per tower and tensor: every gradient (PowerSGD: its P), then
  # PowerSGD's Qs.
  phase2 = len(COMPRESSED) if declared.two_phase else 0
  assert len(dtypes) == 2 * (gradients + phase2)
  # NCCL has no bfloat16 kernel: bfloat16 travels to it and adds in float32.
  wire = declared.wire_dtype if declared.wire_dtype == 'float16' else 'float32'
  assert set(dtypes) == {(wire,)}
  _check_state(report, compression)


def _gradient_count(report) -> int:
  return len({r['variable'] for r in report['summary']['reductions']})


def _check_state(report, compression) -> None:
  """Error buffers per replica on its tower; Q per tower, from v0."""
  towers = report['run']['tower_devices']
  variables = {
    c['name']: c['device']
    for v in report['summary']['variables']
    for c in v['copies']
  }
  declared = catalog.declared(compression)
  errors = sorted(n for n in variables if n.startswith('gradient_compression/'))
  if not declared.error_feedback:
    assert errors == []
    return
  per_replica = (
    len(COMPRESSED) if declared.two_phase else _gradient_count(report)
  )
  assert len(errors) == len(towers) * per_replica
  for name in errors:
    replica = int(name.split('/')[1][len('replica_') :])
    assert variables[name] == towers[replica], name
  if declared.two_phase:
    copies = {
      c['target']: c['source'] for c in report['summary']['post_init_copies']
    }
    for relative in COMPRESSED:
      q = relative + '/powersgd_q'
      for i, tower in enumerate(towers):
        assert variables['v%d/%s' % (i, q)] == tower
      assert copies['v1/' + q] == 'v0/' + q


CLUSTER_CASES = [
  ('collective_all_reduce', 'powersgd'),
  ('hybrid', 'fp16_ef'),
  ('distributed_all_reduce', 'bf16_ef'),
  ('distributed_replicated', 'bf16'),
  ('parameter_server', 'fp16'),
]


def test_cluster_cases_cover_every_cluster_manager():
  import variable_mgr  # pylint: disable=g-import-not-at-top

  assert sorted(m for m, _ in CLUSTER_CASES) == variable_mgr.cluster_names()


@pytest.mark.parametrize('manager,compression', CLUSTER_CASES)
def test_cluster_graph(manager, compression):
  spec = 'nccl' if manager == 'distributed_all_reduce' else None
  case = (manager, spec, 'fp32', gpu.CLUSTER_GPUS, True)
  report = gpu.build_report(
    **gpu._flags(case), gradient_compression=compression
  )
  gpu.check_case(case, report)
  if manager in ('collective_all_reduce', 'hybrid'):
    reduce_dtypes = {
      tuple(op['dtypes'])
      for op in gpu._by_type(report, 'CollectiveReduceV2')
      if 'collective_allreduce' in op['name']
    }
    wire = catalog.declared(compression).wire_dtype or 'float32'
    assert reduce_dtypes == {(wire,)}


def _pushed_bytes(compression) -> int:
  case = ('parameter_server', None, 'fp32', gpu.CLUSTER_GPUS, True)
  report = gpu.build_report(
    **gpu._flags(case), gradient_compression=compression
  )
  return sum(
    t['bytes']
    for t in report['summary']['step_transfers']
    # The pushes leave from the worker's CPU (its towers' mean).
    if t['src'] == '/job:worker/replica:0/task:0/device:CPU:0'
    and t['dst'].startswith('/job:ps/')
  )


def test_a_cast_halves_what_a_ps_worker_pushes():
  # Beside the gradients, 12 bytes a step travel as they are: the loss
  # (4) and the step stamp (8).
  plain, cast = _pushed_bytes('none'), _pushed_bytes('fp16')
  assert cast - 12 == (plain - 12) // 2
