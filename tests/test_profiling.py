"""--tfprof_file, --partitioned_graph_file_prefix, --use_chrome_trace_format.

Checked on the files the runs write: the tfprof ProfileProto and the
partitioned graphs name the devices of the run, both trace formats parse,
and the observed steps are extra steps (the global step counts them).
"""

import glob
import io
import json
import os

from google.protobuf import text_format
import pytest
import tensorflow as tf
from tensorflow.core.profiler import tfprof_log_pb2

from tests import test_distributed
from tests import testing_models
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.observability import profiling
from tf_cnn_benchmarks.reporting import outputs

tf1 = tf.compat.v1

LOCAL = '/job:localhost/replica:0/task:0/device:CPU:%d'


def run(num_gpus=2, **kw):
  """(result, console text) of a short test_linear run."""
  testing_models.ensure_registered()
  common = dict(
    model='test_linear',
    data_name='cifar10',
    device='cpu',
    num_gpus=num_gpus,
    variable_update='replicated' if num_gpus > 1 else 'parameter_server',
    batch_size=4,
    num_batches=3,
    num_warmup_batches=1,
    display_every=100,
    peak_tflops_per_device='none',
  )
  common.update(kw)
  out = io.StringIO()
  result = benchmark_cnn.run_benchmark(
    params_lib.make_params(**common), out=out
  )
  return result, out.getvalue()


def profile_devices(path):
  """Lower-cased devices the ProfileProto at `path` saw ops run on."""
  profile = tfprof_log_pb2.ProfileProto()
  with open(path, 'rb') as f:
    profile.ParseFromString(f.read())
  seen = set()
  for node in profile.nodes.values():
    for execution in node.execs.values():
      seen.update(d.lower() for d in execution.cpu_execs)
  return profile, seen


# ---- tfprof ----------------------------------------------------------------


@pytest.mark.parametrize('num_gpus', [1, 2])
def test_tfprof_file_names_every_tower_device(tmp_path, num_gpus):
  # Also two profilers one after the other in one process (TensorFlow keeps
  # one per process: the first must be released).
  path = str(tmp_path / 'sub' / 'profile.pb')
  result, _ = run(num_gpus, tfprof_file=path)
  profile, seen = profile_devices(path)
  # 3 timed steps: 3 profiled (at most 10), extra to warm-up + timed.
  assert sorted(profile.steps) == [0, 1, 2]
  assert result.training.end_step == 1 + 3 + 3
  assert {d for d in seen if 'device:cpu:' in d} == {
    (LOCAL % i).lower() for i in range(num_gpus)
  }
  ops = {node.op for node in profile.nodes.values()}
  assert {'MatMul', 'ApplyGradientDescent'} <= ops


def test_profiled_steps_stop_at_ten(tmp_path):
  path = str(tmp_path / 'profile.pb')
  result, _ = run(1, tfprof_file=path, num_batches=12, num_warmup_batches=0)
  profile, _ = profile_devices(path)
  assert sorted(profile.steps) == list(range(10))
  assert result.training.end_step == 10 + 12
  assert result.num_steps == 12  # the profiled steps are not timed


def _chain(*rows):
  """A tfprof 'op' view: each op type the child of the previous one."""
  root = tf1.profiler.MultiGraphNodeProto(name='_TFProfRoot')
  parent = root
  for name, micros, nodes in rows:
    child = parent.children.add(name=name, exec_micros=micros)
    for i in range(nodes):
      child.graph_nodes.add(name='%s_%d' % (name, i))
    parent = child
  return root


def test_op_times_sort_the_op_view_and_the_table_shows_shares_of_all():
  rows = [('Op%02d' % i, 10 * i, i % 3 + 1) for i in range(25)]
  times = profiling.op_times(_chain(*rows))
  assert [t.op_type for t in times] == ['Op%02d' % i for i in range(24, -1, -1)]
  assert [(t.micros, t.num_nodes) for t in times[:3]] == [
    (240, 1),
    (230, 3),
    (220, 2),
  ]
  total = sum(10 * i for i in range(25)) + 1000  # + ops not shown
  top = profiling.TopOps(ops=tuple(times[:20]), total_micros=total)
  lines = profiling.format_top_ops(top, num_steps=10)
  assert len(lines) == 2 + 20
  shares = [float(line.split('(')[-1].rstrip('%) ')) for line in lines[2:]]
  assert shares == pytest.approx(
    [100 * 10 * i / total for i in range(24, 4, -1)], abs=0.051
  )
  assert lines[2].split('|')[0].split() == ['Op24', '1']


def test_profile_of_resnet20_totals_every_op(tmp_path, capsys):
  """The table shows 20 op types of many, its shares are of all ops' time;
  the op view stays within protobuf's nesting limit (classic max_depth:
  a deeper view printed 'Cannot parse returned proto' for resnet20)."""
  path = str(tmp_path / 'profile.pb')
  out = io.StringIO()
  p = params_lib.make_params(
    model='resnet20',
    data_name='cifar10',
    device='cpu',
    batch_size=2,
    num_batches=1,
    num_warmup_batches=0,
    display_every=100,
    peak_tflops_per_device='none',
    tfprof_file=path,
  )
  benchmark_cnn.run_benchmark(p, out=out)
  # TensorFlow prints this when the op view nests too deep to parse.
  assert 'Cannot parse' not in capsys.readouterr().out
  lines = out.getvalue().splitlines()
  first = lines.index(
    'Top 20 ops by execution time (average of 1 profiled steps):'
  )
  shares = [
    float(x.split('(')[-1].rstrip('%) ')) for x in lines[first + 2 : first + 22]
  ]
  assert shares == sorted(shares, reverse=True)
  assert 50 < sum(shares) < 100  # the rest is the other op types' share


# ---- partitioned graphs ----------------------------------------------------


def read_graph(path):
  graph_def = tf1.GraphDef()
  with open(path) as f:
    text_format.Parse(f.read(), graph_def)
  return graph_def


def test_partitioned_graphs_one_file_per_tower_device(tmp_path):
  prefix = str(tmp_path / 'graphs' / 'part.pbtxt')
  result, _ = run(2, partitioned_graph_file_prefix=prefix)
  paths = sorted(glob.glob(str(tmp_path / 'graphs' / '*')))
  expected = [
    profiling.partition_graph_path(prefix, LOCAL % i) for i in range(2)
  ]
  assert paths == expected
  assert os.path.basename(paths[0]) == (
    'part_job_localhost_replica_0_task_0_device_CPU_0.pbtxt'
  )
  for i, path in enumerate(paths):
    graph_def = read_graph(path)
    # Every node of a partition runs on its device: tower i's copy of the
    # variables (replicated) lives in partition i.
    assert {n.device for n in graph_def.node} == {LOCAL % i}
    variables = {n.name for n in graph_def.node if n.op == 'VariableV2'}
    assert 'v%d/linear/weights' % i in variables
  assert result.training.end_step == 1 + 1 + 3  # one extra, untimed step


def test_partition_graph_names_follow_the_classic_rule():
  device = '/job:worker/replica:0/task:1/device:CPU:0'
  name = '_job_worker_replica_0_task_1_device_CPU_0'
  assert profiling.partition_graph_path('/d/p.pb', device) == '/d/p%s.pb' % name
  assert profiling.partition_graph_path('/d/p', device) == '/d/p%s' % name
  assert profiling.partition_graph_path('/d/', device) == '/d/%s' % name


# ---- trace formats ---------------------------------------------------------


@pytest.mark.parametrize('chrome', [True, False])
def test_trace_file_formats_parse_and_name_both_devices(tmp_path, chrome):
  path = str(tmp_path / 'trace.out')
  run(2, trace_file=path, use_chrome_trace_format=chrome)
  with open(path) as f:
    text = f.read()
  if chrome:
    events = json.loads(text)['traceEvents']
    # TensorFlow's timeline names two processes per device: '<device>
    # Compute' (the ops) and '<device> Tensors'.
    devices = {
      e['args']['name'].rsplit(' ', 1)[0]
      for e in events
      if e['name'] == 'process_name'
    }
    ops = [e for e in events if e['ph'] == 'X']
  else:
    stats = type(tf1.RunMetadata().step_stats)()
    text_format.Parse(text, stats)
    devices = {d.device for d in stats.dev_stats}
    ops = [n for d in stats.dev_stats for n in d.node_stats]
  assert {LOCAL % 0, LOCAL % 1} <= devices
  assert len(ops) > 10


def test_chrome_trace_has_dataflow_arrows_and_memory_counters(tmp_path):
  """The classic trace's views: arrows between devices, memory counters."""
  path = tmp_path / 'trace.json'
  run(2, trace_file=str(path))
  events = json.loads(path.read_text())['traceEvents']
  names = {
    e['pid']: e['args']['name'] for e in events if e['name'] == 'process_name'
  }
  starts = {e['id']: e for e in events if e['ph'] == 's'}
  ends = {e['id']: e for e in events if e['ph'] in ('t', 'f')}
  assert starts and set(starts) == set(ends)  # each arrow has both ends
  # An arrow from an op on one tower's device to an op on the other's.
  crossing = {
    (names[starts[i]['pid']], names[ends[i]['pid']])
    for i in starts
    if starts[i]['pid'] != ends[i]['pid']
  }
  assert (LOCAL % 0 + ' Compute', LOCAL % 1 + ' Compute') in crossing or (
    LOCAL % 1 + ' Compute',
    LOCAL % 0 + ' Compute',
  ) in crossing
  counters = [e for e in events if e['ph'] == 'C']
  assert counters and all(e['cat'] == 'Memory' for e in counters)
  # The allocator's bytes in use go up and come back down over the step.
  series = [list(e['args'].values())[0] for e in counters]
  assert max(series) > 0 and series[-1] < max(series)


# ---- TensorBoard's profile -------------------------------------------------


def read_xspace_planes(path):
  """{plane name: events} of an .xplane.pb, read by the profile plugin's
  own reader (xprof)."""
  profile_data = pytest.importorskip(
    'xprof.profile_data',
    reason='the profile plugin (xprof) is not installed (requirements-tools)',
  )

  with profile_data.ProfileData.from_file(path) as data:
    return {
      plane.name: [e.name for line in plane.lines for e in line.events]
      for plane in data.planes
    }


def test_tensorboard_profile_opens_in_the_profile_plugin(tmp_path):
  raw_to_tool_data = pytest.importorskip(
    'xprof.convert.raw_to_tool_data',
    reason='the profile plugin (xprof) is not installed (requirements-tools)',
  )

  logdir = tmp_path / 'tb'
  _, console = run(1, tensorboard_profile_dir=str(logdir), num_batches=3)
  (path,) = glob.glob(str(logdir / 'plugins/profile/*/*.xplane.pb'))
  planes = read_xspace_planes(path)
  ops = [name for events in planes.values() for name in events]
  # The graph-mode session's ops of the timed steps are in it.
  assert any('MatMul' in name for name in ops), sorted(set(ops))[:50]
  # The plugin lists its tools for the file and renders the trace viewer.
  assert 'trace_viewer@' in raw_to_tool_data.xspace_to_tool_names([path])
  data, content_type = raw_to_tool_data.xspace_to_tool_data(
    [path], 'trace_viewer', {}
  )
  assert content_type == 'application/json'
  assert json.loads(data)['traceEvents']
  assert 'Wrote TensorBoard profile of the timed steps to %s' % logdir in (
    console
  )


def test_profiling_files_are_checked_before_the_run(tmp_path):
  with pytest.raises(outputs.OutputError, match='--tfprof_file'):
    run(1, tfprof_file=str(tmp_path))  # a directory
  blocker = tmp_path / 'file'
  blocker.write_text('')
  with pytest.raises(outputs.OutputError, match='partitioned_graph'):
    run(1, partitioned_graph_file_prefix=str(blocker / 'p'))
  with pytest.raises(outputs.OutputError, match='--tensorboard_profile_dir'):
    run(1, tensorboard_profile_dir=str(blocker))  # a file
  with pytest.raises(outputs.OutputError, match='--ml_perf_log_file'):
    run(1, ml_perf_compliance_logging=True, ml_perf_log_file=str(tmp_path))


# ---- a cluster -------------------------------------------------------------


@pytest.mark.slow  # about a minute on a loaded 2-core machine
def test_two_workers_profile_and_partition_on_worker_and_ps(tmp_path):
  """parameter_server, 2 workers + 1 ps: worker 0 writes the files; its
  partitions are its own device and the ps (where the variables live).
  Also the raw trace and --benchmark_log_dir in a cluster."""
  prefix = tmp_path / 'graphs' / 'g.pbtxt'
  profile = tmp_path / 'profile.pb'
  trace = tmp_path / 'trace.pbtxt'
  logs = tmp_path / 'logs'
  rc, output, records = test_distributed.launch(
    tmp_path,
    2,
    test_distributed.LINEAR
    + [
      '--variable_update=parameter_server',
      '--partitioned_graph_file_prefix=%s' % prefix,
      '--tfprof_file=%s' % profile,
      '--trace_file=%s' % trace,
      '--nouse_chrome_trace_format',
      '--benchmark_log_dir=%s' % logs,
      '--benchmark_test_id=two-workers',
    ],
  )
  assert rc == 0, output
  (record,) = records
  (logged,) = [
    json.loads(line)
    for line in (logs / 'benchmark_run.log').read_text().splitlines()
  ]
  assert logged == record and record['benchmark_test_id'] == 'two-workers'
  stats = type(tf1.RunMetadata().step_stats)()
  text_format.Parse(trace.read_text(), stats)
  assert {
    '/job:worker/replica:0/task:0/device:CPU:0',
    '/job:ps/replica:0/task:0/device:CPU:0',
  } <= {d.device for d in stats.dev_stats}
  assert record['end_step'] == 1 + 3 + 3  # every worker ran the same steps
  names = sorted(
    os.path.basename(p) for p in glob.glob(str(prefix.parent / '*'))
  )
  assert names == [
    'g_job_ps_replica_0_task_0_device_CPU_0.pbtxt',
    'g_job_worker_replica_0_task_0_device_CPU_0.pbtxt',
  ]
  ps_graph = read_graph(str(prefix.parent / names[0]))
  ps_variables = {n.name for n in ps_graph.node if n.op == 'VariableV2'}
  assert {'v/linear/weights', 'v/linear/biases'} <= ps_variables
  _, seen = profile_devices(str(profile))
  assert '/job:worker/replica:0/task:0/device:cpu:0' in seen
  assert '/job:ps/replica:0/task:0/device:cpu:0' in seen


def test_forward_only_profile_holds_the_forward_pass(tmp_path):
  path = str(tmp_path / 'profile.pb')
  run(1, tfprof_file=path, forward_only=True)
  profile, _ = profile_devices(path)
  ran = {n.op for n in profile.nodes.values() if n.execs}
  # (The forward MatMul runs fused under another name, so look at the loss.)
  assert 'SparseSoftmaxCrossEntropyWithLogits' in ran
  assert 'ApplyGradientDescent' not in ran
