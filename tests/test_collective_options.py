"""--collective_implementation, --collective_bytes_per_pack and the merge
scope of the collective reductions (variable_mgr/collective_options.py).

Packed reductions equal unpacked ones exactly (replicated with the
`collective` spec, the collective means on their own, and two workers of
collective_all_reduce); the number of collectives follows the pack size;
every collective op carries the hint of the implementation (CPU graphs and
the GPU graphs built on CPU); --allreduce_merge_scope > 1 turns on the
scoped allocator, which merges the collectives of a scope (CPU partition
graphs, in one process and, slow, across two workers); the header, the
results line and compare carry the collectives.
"""

from __future__ import annotations

import collections
import io
import json
import math
import re

import numpy as np
import pytest
import tensorflow as tf

from tests import report_testing
from tests import test_distributed as distributed
from tests import test_gpu_graphs as gpu
from tests.helpers import cli_status
from tests.test_driver import Session
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.commands import compare
from tf_cnn_benchmarks.config import params as params_lib
from variable_mgr import allreduce
from variable_mgr import collective_catalog
from variable_mgr import collective_keys
from variable_mgr import collective_options
from variable_mgr import collectives
from variable_mgr import sizes

tf1 = tf.compat.v1

REPLICATED = dict(
  model='lenet',
  device='cpu',
  variable_update='replicated',
  all_reduce_spec='collective',
  num_gpus=2,
  batch_size=4,
  optimizer='momentum',
  init_learning_rate=0.005,
  num_batches=2,
  num_warmup_batches=0,
  display_every=100,
)
COLLECTIVE_TYPES = (
  'CollectiveReduce',
  'CollectiveReduceV2',
  'CollectiveBcastSendV2',
  'CollectiveBcastRecvV2',
)


_TF_LOG = re.compile(r'^(?:[IWEF]\d{4} |WARNING: All log messages before absl)')


def _collective_ops(graph, types=COLLECTIVE_TYPES) -> list:
  return [op for op in graph.get_operations() if op.type in types]


def _trained(**flags):
  """(v0's values after two steps, the graph's reduce ops) of a run."""
  run = Session(params_lib.make_params(**dict(REPLICATED, **flags)))
  reduces = _collective_ops(run.built.graph, ('CollectiveReduceV2',))
  gradients = [op.inputs[0] for op in reduces if op.device == reduces[0].device]
  run.step(2)
  values = run.values('v0/')
  run.close()
  return values, reduces, gradients


@pytest.fixture(scope='module')
def unpacked():
  return _trained()


def _assert_same(a, b):
  assert sorted(a) == sorted(b)
  for name in a:
    np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def _expected_packs(tensors, bytes_per_pack) -> int:
  """Packs of the rule 'consecutive per dtype, closed before exceeding'."""
  count = 0
  for dtype in dict.fromkeys(t.dtype for t in tensors):
    size = None
    for t in tensors:
      if t.dtype != dtype:
        continue
      n = sizes.num_bytes(t.shape, t.dtype)
      if size is None or size + n > bytes_per_pack:
        count, size = count + 1, 0
      size += n
  return count


# ---- packing: equal values, fewer collectives -------------------------------


@pytest.mark.parametrize('bytes_per_pack', [16384, 1 << 30])
def test_packed_trains_exactly_like_unpacked_replicated(
  unpacked, bytes_per_pack
):
  values, _, gradients = unpacked
  packed, reduces, _ = _trained(collective_bytes_per_pack=bytes_per_pack)
  assert 'affine0/weights' in values
  _assert_same(values, packed)
  # One collective per pack and tower (2 towers).
  expected = _expected_packs(gradients, bytes_per_pack)
  assert len(reduces) == 2 * expected
  assert expected < len(gradients)


def test_collective_count_follows_the_pack_size(unpacked):
  _, reduces, gradients = unpacked
  assert len(reduces) == 2 * len(gradients)  # 0: one per gradient
  total = sum(sizes.num_bytes(t.shape, t.dtype) for t in gradients)
  largest = max(sizes.num_bytes(t.shape, t.dtype) for t in gradients)
  counts = []
  for pack in (64, largest // 4, largest, total // 2, total):
    with tf.Graph().as_default():
      tensors = [tf.zeros(t.shape, t.dtype) for t in gradients]
      packs = collective_options.tensor_packs(tensors, pack)
    assert sorted(j for p in packs for j in p) == list(range(len(gradients)))
    assert len(packs) == _expected_packs(gradients, pack)
    counts.append(len(packs))
  assert counts == sorted(counts, reverse=True)
  assert counts[-1] == 1 < counts[0]  # all of it in one float32 pack


def test_packing_composes_with_compression():
  plain, _, _ = _trained(gradient_compression='fp16')
  packed, reduces, _ = _trained(
    gradient_compression='fp16', collective_bytes_per_pack=1 << 30
  )
  _assert_same(plain, packed)
  # Packed after the cast: one float16 pack per tower.
  assert [op.inputs[0].dtype for op in reduces] == [tf.float16] * 2


# ---- the collective means themselves, merged or packed ----------------------

DEVICES = [
  '/job:localhost/replica:0/task:0/device:CPU:%d' % i for i in range(2)
]
SHAPES = [(3, 5), (7,), (2, 2, 2), (11,), (4,)]


def _means(options):
  """Values of collective_means_per_tower over 2 CPU devices, and the
  partition graphs' op counts."""
  graph = tf.Graph()
  with graph.as_default():
    tower_grads = []
    for i, device in enumerate(DEVICES):
      with tf.device(device):
        grads = [
          tf.Variable(
            np.arange(np.prod(s), dtype=np.float32).reshape(s) * (i + 1) + k
          )
          for k, s in enumerate(SHAPES)
        ]
        tower_grads.append([(g * 1.0, g) for g in grads])
    out = collectives.collective_means_per_tower(
      tower_grads, DEVICES, DEVICES, options=options
    )
    fetch = [tf.identity(g) for tower in out for g, _ in tower]
    config = tf1.ConfigProto(device_count={'CPU': 2})
    collective_options.session_rewrites(config, merge=options.merge_scope > 1)
    with tf1.Session(config=config) as sess:
      sess.run(tf1.global_variables_initializer())
      meta = tf1.RunMetadata()
      values = sess.run(
        fetch,
        options=tf1.RunOptions(output_partition_graphs=True),
        run_metadata=meta,
      )
  ops = collections.Counter(n.op for g in meta.partition_graphs for n in g.node)
  return values, ops, graph


def test_means_packed_and_merged_equal_plain():
  plain, plain_ops, _ = _means(collective_options.ReduceOptions())
  assert plain_ops['CollectiveReduceV2'] == 2 * len(SHAPES)
  for i, s in enumerate(SHAPES):  # the mean of towers x1 and x2: x1.5
    base = np.arange(np.prod(s), dtype=np.float32).reshape(s)
    np.testing.assert_allclose(plain[i], base * 1.5 + i)
  for options in (
    collective_options.ReduceOptions(bytes_per_pack=100),
    collective_options.ReduceOptions(bytes_per_pack=1 << 20),
    collective_options.ReduceOptions(merge_scope=2),
    collective_options.ReduceOptions(merge_scope=3, bytes_per_pack=40),
  ):
    values, _, _ = _means(options)
    for a, b in zip(plain, values):
      np.testing.assert_array_equal(a, b)


def test_merge_scope_merges_collectives_on_cpu():
  merge = 2
  values, ops, graph = _means(
    collective_options.ReduceOptions(merge_scope=merge)
  )
  built = [op.type for op in _collective_ops(graph)]
  # Built: one V1 op per gradient and device, mergeable.
  assert built == ['CollectiveReduce'] * (2 * len(SHAPES))
  # Run: the scoped allocator made one collective per scope and device.
  scopes = math.ceil(len(SHAPES) / merge)
  merged = sum(1 for n in range(0, len(SHAPES), merge) if n + 1 < len(SHAPES))
  assert ops['_ScopedAllocator'] == 2 * merged > 0
  assert ops['_ScopedAllocatorConcat'] == ops['_ScopedAllocatorSplit']
  assert ops['CollectiveReduce'] == 2 * scopes < 2 * len(SHAPES)


# ---- the hint on every collective -------------------------------------------


@pytest.mark.parametrize('implementation', ['auto', 'ring'])
def test_cpu_hint_on_every_collective(implementation):
  run = Session(
    params_lib.make_params(
      **dict(REPLICATED, collective_implementation=implementation)
    )
  )
  ops = _collective_ops(run.built.graph)
  run.close()
  assert ops and {op.get_attr('communication_hint') for op in ops} == {b'ring'}


def _gpu_cluster_graph(name, cluster=True, **flags):
  """(graph, session config) of worker 0 of 2 x 4 GPUs (cluster=False: one
  process, 4 GPUs), built on CPU."""
  gpu.setup_module()
  plan = params_lib.make_plan(
    device='gpu',
    model=gpu.MODEL,
    data_name='cifar10',
    num_batches=1,
    build_only=True,
    variable_update=name,
    num_gpus=gpu.CLUSTER_GPUS,
    **(gpu._cluster_flags(name) if cluster else {}),
    **flags,
  )
  bench = benchmark_cnn.BenchmarkCNN(plan, out=io.StringIO())
  with allreduce.assume_gpus_visible():
    built = bench.build()
  return built.graph, bench._session_config()


@pytest.mark.parametrize('implementation', ['auto', 'nccl', 'ring'])
def test_gpu_replicated_collective_spec_hint(implementation):
  graph, config = _gpu_cluster_graph(
    'replicated',
    cluster=False,
    all_reduce_spec='collective',
    collective_implementation=implementation,
  )
  ops = _collective_ops(graph)
  hint = b'ring' if implementation == 'ring' else b'nccl'
  assert ops and {op.get_attr('communication_hint') for op in ops} == {hint}
  assert config.experimental.collective_nccl is (hint == b'nccl')


@pytest.mark.parametrize('name', ['collective_all_reduce', 'hybrid'])
@pytest.mark.parametrize(
  'implementation,hint,session_nccl',
  [('auto', b'nccl', True), ('nccl', b'nccl', True), ('ring', b'ring', False)],
)
def test_gpu_graph_hint_on_every_collective(
  name, implementation, hint, session_nccl
):
  extra = dict(hybrid_threshold_bytes=100) if name == 'hybrid' else {}
  graph, config = _gpu_cluster_graph(
    name,
    collective_implementation=implementation,
    collective_bytes_per_pack=1 << 20,
    **extra,
  )
  ops = _collective_ops(graph)
  types = {op.type for op in ops}
  assert {'CollectiveReduceV2', 'CollectiveBcastRecvV2'} <= types
  assert {op.get_attr('communication_hint') for op in ops} == {hint}
  assert all('/device:GPU:' in op.device for op in ops)
  assert config.experimental.collective_nccl is session_nccl


def test_cluster_collectives_per_step_follow_the_pack_size():
  # collective_all_reduce, worker 0's 4 GPUs: one reduce per tower and
  # gradient unpacked; one per tower with every float32 gradient in a pack.
  def gradient_reduces(**flags):
    graph, _ = _gpu_cluster_graph('collective_all_reduce', **flags)
    return [
      op
      for op in _collective_ops(graph, ('CollectiveReduceV2',))
      if op.name.startswith('collective_allreduce/')
    ]

  unpacked = gradient_reduces()
  per_tower = collections.Counter(op.device for op in unpacked)
  assert len(per_tower) == gpu.CLUSTER_GPUS
  gradients = set(per_tower.values())
  assert len(gradients) == 1 and gradients.pop() > 2
  packed = gradient_reduces(collective_bytes_per_pack=1 << 30)
  assert len(packed) == gpu.CLUSTER_GPUS
  assert {op.inputs[0].shape.rank for op in packed} == {1}


def test_gpu_merge_scope_builds_mergeable_ops_and_the_scoped_allocator():
  graph, config = _gpu_cluster_graph(
    'collective_all_reduce', allreduce_merge_scope=4
  )
  reduces = _collective_ops(graph, ('CollectiveReduce',))
  assert reduces and {op.get_attr('communication_hint') for op in reduces} == {
    b'nccl'
  }
  rewrite = config.graph_options.rewrite_options
  assert rewrite.scoped_allocator_optimization == type(rewrite).ON
  assert list(rewrite.scoped_allocator_opts.enable_op) == ['CollectiveReduce']


@pytest.mark.parametrize('name', ['collective_all_reduce', 'hybrid'])
def test_gpu_packed_and_merged_graphs_pass_the_gpu_graph_checks(name):
  # Placement, inputs, and a GPU kernel in this build for every GPU op
  # (the V1 CollectiveReduce and the packs' concat/split included).
  case = (name, None, 'fp16', gpu.CLUSTER_GPUS, True)
  report = gpu.build_report(
    **gpu._flags(case),
    allreduce_merge_scope=2,
    collective_bytes_per_pack=256,
  )
  gpu.check_case(case, report)
  types = collections.Counter(op['type'] for op in report['ops'])
  assert types['CollectiveReduce'] > 0 and types['ConcatV2'] > 0


def test_no_scoped_allocator_without_a_merge_scope():
  _, config = _gpu_cluster_graph('collective_all_reduce')
  rewrite = config.graph_options.rewrite_options
  assert rewrite.scoped_allocator_optimization != type(rewrite).ON
  assert list(rewrite.scoped_allocator_opts.enable_op) == []


# ---- refusals ---------------------------------------------------------------


def test_nccl_on_cpu_exits_2_with_one_line():
  status, err = cli_status(
    '--model=trivial',
    '--device=cpu',
    '--variable_update=replicated',
    '--all_reduce_spec=collective',
    '--collective_implementation=nccl',
    '--num_batches=1',
  )
  # TensorFlow's own C++ start-up lines (absl, printed on this machine
  # whatever TF_CPP_MIN_LOG_LEVEL says) are not the harness's.
  ours = [ln for ln in err if not _TF_LOG.match(ln)]
  assert status == 2
  assert len(ours) == 1 and ours[0].startswith(
    'error: --collective_implementation=nccl'
  ), err
  assert 'auto or ring' in ours[0] and 'Traceback' not in '\n'.join(err)


@pytest.mark.parametrize(
  'flags,needle',
  [
    (dict(collective_bytes_per_pack=-1), '--collective_bytes_per_pack=-1'),
    (
      dict(all_reduce_spec='xring', collective_bytes_per_pack=100),
      '--collective_bytes_per_pack: only for',
    ),
    (
      dict(all_reduce_spec=None, collective_implementation='ring'),
      '--collective_implementation: only for',
    ),
    (
      dict(collective_bytes_per_pack=100, gradient_repacking=2),
      'one packing',
    ),
    (dict(collective_implementation='mpi'), '--collective_implementation'),
  ],
)
def test_bad_collective_flags_are_refused(flags, needle):
  with pytest.raises(params_lib.ParamsError, match=needle):
    params_lib.make_params(**dict(REPLICATED, **flags))


def test_keys_of_a_packed_step_are_one_per_pack():
  # Every pack takes one instance key: the keys a graph hands out count the
  # collectives, whatever the tower count.
  with tf.Graph().as_default():
    tensors = [[tf.zeros(s) for s in SHAPES] for _ in DEVICES]
    tower_grads = [
      [(t, tf.Variable(tf.zeros(t.shape))) for t in tower] for tower in tensors
    ]
    before = collective_keys.keys_for_graph().get_instance_key()
    collectives.collective_means_per_tower(
      tower_grads,
      DEVICES,
      DEVICES,
      options=collective_options.ReduceOptions(bytes_per_pack=100),
    )
    after = collective_keys.keys_for_graph().get_instance_key()
  assert after - before - 1 == _expected_packs(tensors[0], 100)


# About a minute per launch on a loaded 2-core machine: slow.
@pytest.mark.slow
@pytest.mark.parametrize(
  'flags',
  [
    ['--collective_bytes_per_pack=%d' % (1 << 20)],
    ['--allreduce_merge_scope=2', '--collective_bytes_per_pack=64'],
  ],
  ids=['packed', 'merged'],
)
def test_two_workers_packed_or_merged_train_exactly_like_plain(tmp_path, flags):
  """collective_all_reduce, 2 workers x 1 tower: every worker's losses of
  each step equal those of one collective per gradient."""
  common = [
    *distributed.LINEAR,
    '--variable_update=collective_all_reduce',
    '--collective_implementation=ring',
  ]
  runs = []
  for extra in ([], flags):
    (tmp_path / 'run').mkdir(exist_ok=True)
    _, records = distributed.launch_ok(
      tmp_path / 'run',
      2,
      common + extra,
      launcher_flags=distributed.TASKS['collective_all_reduce'],
      every_worker_reports=True,
    )
    runs.append(distributed.worker_losses(records, 2))
    (tmp_path / 'run' / 'r.jsonl').unlink()
  plain, other = runs
  assert len(plain[0]) >= 3 and plain[0][0] != plain[0][-1]
  for a, b in zip(plain, other):
    np.testing.assert_array_equal(a, b)


# ---- results: compare and report split rows by the collectives -------------


def test_compare_rows_split_by_the_collectives(tmp_path):
  # Lines before the keys count as 'none'.
  lines = []
  for keys, ips in (
    (dict(collective_implementation='ring', collective_bytes_per_pack=0), 50.0),
    (
      dict(collective_implementation='nccl', collective_bytes_per_pack=64),
      90.0,
    ),
  ):
    for n in (1, 2):
      line = report_testing.record('replicated', n, ips * n)
      line.update(keys, collective_merge_scope=None)
      lines.append(line)
  lines.append(report_testing.record('replicated', 1, 10.0))
  for key in collective_catalog.RESULT_KEYS:
    lines[-1].pop(key, None)
  path = report_testing.write_records(tmp_path / 'c.jsonl', lines)
  summary, keys = compare.summarize_files([path])
  assert 'collectives' in keys
  by_collectives = {
    c: dict(zip(rows['count'], rows['images_per_sec']))
    for c, rows in summary.groupby('collectives')
  }
  assert by_collectives == {
    'ring': {1: 50.0, 2: 100.0},
    'nccl, packs 64 B': {1: 90.0, 2: 180.0},
    'none': {1: 10.0},
  }


def test_results_line_and_header_carry_the_collectives(tmp_path):
  result_file = tmp_path / 'r.jsonl'
  p = params_lib.make_params(
    **dict(
      REPLICATED,
      collective_bytes_per_pack=4096,
      num_batches=1,
      result_file=str(result_file),
    )
  )
  out = io.StringIO()
  benchmark_cnn.run_benchmark(p, out=out)
  (line,) = [json.loads(x) for x in result_file.read_text().splitlines()]
  assert {k: line[k] for k in collective_catalog.RESULT_KEYS} == {
    'collective_implementation': 'ring',
    'collective_bytes_per_pack': 4096,
    'collective_merge_scope': None,
  }
  header = [ln for ln in out.getvalue().splitlines() if 'Collectives' in ln]
  assert len(header) == 1 and 'ring (auto), packs <= 4096 bytes' in header[0]
  plain = params_lib.make_params(**dict(REPLICATED, all_reduce_spec='xring'))
  assert collective_catalog.result_keys(plain) == dict.fromkeys(
    collective_catalog.RESULT_KEYS
  )
  merged = params_lib.make_plan(
    **dict(
      REPLICATED,
      all_reduce_spec=None,
      variable_update='collective_all_reduce',
      allreduce_merge_scope=3,
      **gpu._cluster_flags('collective_all_reduce'),
    )
  )
  assert (
    collective_catalog.result_keys(merged.params)['collective_merge_scope'] == 3
  )


@pytest.mark.slow
def test_two_workers_scoped_allocator_merges_the_scope(tmp_path):
  """collective_all_reduce over 2 workers, merge scope 2: worker 0's
  partition graph runs ONE CollectiveReduce for test_linear's two
  gradients (weights, biases) from a _ScopedAllocator buffer."""
  prefix = tmp_path / 'pg' / 'p_'
  prefix.parent.mkdir()
  distributed.launch_ok(
    tmp_path,
    2,
    [
      *distributed.LINEAR,
      '--variable_update=collective_all_reduce',
      '--allreduce_merge_scope=2',
      '--partitioned_graph_file_prefix=%s' % prefix,
    ],
    launcher_flags=distributed.TASKS['collective_all_reduce'],
  )
  (path,) = [p for p in prefix.parent.iterdir() if 'task_0' in p.name]
  graph = tf1.GraphDef()
  graph.ParseFromString(path.read_bytes())
  ops = collections.Counter(n.op for n in graph.node)
  assert ops['CollectiveReduce'] == 1  # 2 gradients, merged
  assert ops['_ScopedAllocator'] == ops['_ScopedAllocatorSplit'] == 1
  assert ops['CollectiveReduceV2'] == 1  # the cluster loss (not merged)
