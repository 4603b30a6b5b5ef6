"""The placement report and the GPU kernel check, on small graphs and runs."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
import tensorflow as tf

from tests import testing_models
from tf_cnn_benchmarks import __main__ as cli
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.observability import placement
from tf_cnn_benchmarks.platform import gpu_kernels

tf1 = tf.compat.v1


# ---- cross-device bytes ----------------------------------------------------


def test_a_tensor_crosses_once_per_consuming_device():
  graph = tf.Graph()
  with graph.as_default():
    with tf.device('/cpu:0'):
      x = tf.constant(np.zeros([4, 3], np.float32))  # 48 bytes
      h = tf.constant(np.zeros([5], np.float16))  # 10 bytes
    with tf.device('/gpu:0'):
      a = tf.identity(x)
      b = x * 2.0  # x again on gpu:0: sent once
      c = tf.identity(h)
    with tf.device('/gpu:1'):
      d = tf.identity(x)
  rows = placement.transfers(placement.closure([a, b, c, d]))
  assert rows == [
    {
      'src': '/device:CPU:0',
      'dst': '/device:GPU:0',
      'edges': 2,
      'bytes': 58,
      'unknown_size_edges': 0,
    },
    {
      'src': '/device:CPU:0',
      'dst': '/device:GPU:1',
      'edges': 1,
      'bytes': 48,
      'unknown_size_edges': 0,
    },
  ]


def test_resource_handles_are_colocation_not_transfers():
  graph = tf.Graph()
  with graph.as_default():
    with tf.device('/gpu:0'):
      v = tf1.get_variable('v', [8], tf.float32, use_resource=True)
    with tf.device('/gpu:1'):
      read = tf.raw_ops.ReadVariableOp(resource=v.handle, dtype=tf.float32)
      out = read * 2.0
  rows = placement.transfers(placement.closure([out]))
  assert rows == []  # the handle edge is no tensor sent; the read is on gpu:1


def test_compact_devices():
  devices = ['/device:GPU:%d' % i for i in (0, 1, 2, 3, 5, 7)] + [
    '/job:ps/replica:0/task:0/device:CPU:0'
  ]
  assert placement.compact_devices(devices) == (
    '/device:GPU:0..3,5,7, /job:ps/replica:0/task:0/device:CPU:0'
  )
  assert placement.compact_devices([]) == '-'


# ---- the kernel registry -----------------------------------------------------


def test_the_wheel_registers_gpu_kernels_as_its_build_info_says():
  # The Linux pip wheel is a CUDA build: its GPU kernels are registered
  # even on a machine without a GPU or driver.
  assert gpu_kernels.registry_has_gpu_kernels() == gpu_kernels.is_cuda_build()


def _check(graph, soft=False) -> gpu_kernels.KernelCheck:
  return gpu_kernels.check_graph(graph, allow_soft_placement=soft)


@pytest.mark.skipif(
  not gpu_kernels.registry_has_gpu_kernels(), reason='no GPU kernels'
)
def test_kernel_check_follows_type_constraints():
  graph = tf.Graph()
  with graph.as_default(), tf.device('/gpu:0'):
    m = tf.constant(np.ones([2, 2], np.float32))
    tf.matmul(m, m)  # float32 MatMul: a GPU kernel
    tf1.get_variable('ok', initializer=tf.constant(0, tf.int64))
    # No GPU kernel registers an int32 variable (VarHandleOp / VariableV2).
    tf1.get_variable(
      'counter', initializer=tf.constant(0, tf.int32), use_resource=True
    )
  check = _check(graph)
  assert [m[0] for m in check.missing] == ['counter']
  assert check.missing[0][1:] == (
    'VarHandleOp',
    '/device:GPU:0',
    {'dtype': 'int32'},
  )
  assert check.first_error() == (
    'no GPU kernel in this TensorFlow build for op counter (VarHandleOp '
    'dtype=int32) on /device:GPU:0'
  )
  # Soft placement would move it to the CPU (it has a CPU kernel).
  soft = _check(graph, soft=True)
  assert [m[0] for m in soft.soft_placed] == ['counter']
  assert soft.failing == () and soft.first_error() is None


@pytest.mark.skipif(
  not gpu_kernels.registry_has_gpu_kernels(), reason='no GPU kernels'
)
def test_kernel_check_reads_function_bodies_and_default_kernels():
  graph = tf.Graph()
  with graph.as_default(), tf.device('/gpu:0'):
    pred = tf1.placeholder_with_default(True, [])
    # String ops have CPU kernels only; here they sit in a cond branch.
    tf.cond(
      pred,
      lambda: tf.strings.length(tf.io.decode_base64(tf.constant('YQ'))),
      lambda: tf.constant(0),
    )
    tf.no_op()  # NoOp: a DEVICE_DEFAULT kernel serves the GPU
  check = _check(graph)
  assert sorted(m[1] for m in check.missing) == [
    'Const',
    'DecodeBase64',
    'StringLength',
  ]
  assert all(m[0].startswith('cond_true') for m in check.missing)
  assert 'NoOp' not in [m[1] for m in check.missing]


# ---- through the command line -----------------------------------------------


def _main(*flags) -> tuple:
  """(exit status, stdout, stderr) of an in-process command line."""
  testing_models.ensure_registered()
  cli.FLAGS.unparse_flags()  # absl keeps the last command line's values
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    status = cli.main(['tf_cnn_benchmarks', *flags])
  return status, out.getvalue(), err.getvalue()


_TINY = ('--model=test_linear', '--data_name=cifar10', '--batch_size=2')


def _report(tmp_path, *flags):
  """The placement report of a tiny run with these flags (exit 0)."""
  path = tmp_path / 'p.json'
  status, _, err = _main(*_TINY, *flags, '--placement_file=%s' % path)
  assert status == 0, err
  return json.loads(path.read_text())


def test_build_only_gpu_nccl_report(tmp_path):
  report = _report(
    tmp_path,
    '--device=gpu',
    '--num_gpus=2',
    '--variable_update=replicated',
    '--all_reduce_spec=nccl',
    '--build_only',
  )
  towers = ['/device:GPU:0', '/device:GPU:1']
  assert report['run']['tower_devices'] == towers
  assert report['run']['build_only'] is True
  reductions = report['summary']['reductions']
  assert {r['variable'] for r in reductions} == {
    'linear/weights',
    'linear/biases',
  }
  for r in reductions:
    assert r['algorithm'] == 'nccl'
    assert r['reduce_ops'] == {'NcclAllReduce': 2}
    assert r['reduce_devices'] == towers == r['apply_devices']
  mats = [op for op in report['ops'] if op['type'] == 'MatMul']
  on = [op['device'] for op in mats]  # forward and backward, per tower
  assert set(on) == set(towers) and on.count(towers[0]) == on.count(towers[1])
  # linear/weights: 12 x 10 float32 = 480 bytes, v0 -> v1 once after init.
  weights = [
    v for v in report['summary']['variables'] if v['name'] == 'linear/weights'
  ]
  assert weights[0]['bytes'] == 480
  copies = report['summary']['post_init_copies']
  assert {(c['source'], c['target']) for c in copies} == {
    ('v0/linear/weights', 'v1/linear/weights'),
    ('v0/linear/biases', 'v1/linear/biases'),
  }
  assert report['summary']['kernel_check']['missing_gpu_kernel'] == []


def test_parameter_server_gradient_crosses_to_the_variable(tmp_path):
  summary = _report(
    tmp_path,
    '--device=gpu',
    '--num_gpus=2',
    '--variable_update=parameter_server',
    '--local_parameter_device=cpu',
    '--build_only',
  )['summary']
  for r in summary['reductions']:
    assert r['algorithm'] == 'mean'
    assert r['reduce_devices'] == ['/device:CPU:0'] == r['apply_devices']
  sent = {(t['src'], t['dst']): t for t in summary['step_transfers']}
  # Each tower sends its two gradients (480 + 40 bytes) to the CPU; the CPU
  # sends the weights and biases it holds to each tower.
  for gpu in ('/device:GPU:0', '/device:GPU:1'):
    assert sent[(gpu, '/device:CPU:0')]['bytes'] >= 520
    assert sent[('/device:CPU:0', gpu)]['bytes'] >= 520


def test_build_only_names_an_op_without_gpu_kernel(monkeypatch):
  def no_kernel_anywhere(node, kind):
    return None if node.type == 'MatMul' else real(node, kind)

  real = gpu_kernels.find_kernel
  monkeypatch.setattr(gpu_kernels, 'find_kernel', no_kernel_anywhere)
  status, _, err = _main(*_TINY, '--device=gpu', '--num_gpus=1', '--build_only')
  assert status == 1
  lines = err.strip().splitlines()
  assert len(lines) == 1, err
  assert lines[0].startswith('error: no GPU kernel in this TensorFlow build')
  assert '(MatMul T=float32) on /device:GPU:0' in lines[0]


@pytest.mark.parametrize(
  'flags, message',
  [
    (('--result_file=/tmp/x.jsonl',), '--result_file: a --build_only run'),
    (
      (
        '--job_name=ps',
        '--ps_hosts=127.0.0.1:7001',
        '--worker_hosts=127.0.0.1:7002',
        '--variable_update=parameter_server',
      ),
      '--build_only: task ps:0 builds no graph',
    ),
  ],
)
def test_build_only_refusals(flags, message):
  status, _, err = _main(*_TINY, '--device=gpu', '--build_only', *flags)
  assert status == 2
  assert err.strip().splitlines() == [err.strip()]
  assert message in err


def test_a_real_cpu_run_writes_the_report_after_building(tmp_path):
  report = _report(
    tmp_path,
    '--device=cpu',
    '--num_gpus=2',
    '--variable_update=replicated',
    '--num_batches=1',
    '--num_warmup_batches=0',
  )
  assert report['run']['build_only'] is False
  assert report['run']['tower_devices'] == ['/device:CPU:0', '/device:CPU:1']
  kernels = report['summary']['kernel_check']
  assert kernels['gpu_ops_checked'] == 0


def test_console_table_of_a_build_only_run():
  testing_models.ensure_registered()
  plan = params_lib.make_plan(
    model='test_linear',
    data_name='cifar10',
    batch_size=2,
    device='gpu',
    num_gpus=2,
    variable_update='replicated',
    all_reduce_spec='nccl',
    build_only=True,
  )
  out = io.StringIO()
  report = benchmark_cnn.run_benchmark(plan, out=out)
  text = out.getvalue()
  assert 'Step\tImg/sec' not in text  # nothing ran
  assert (
    '  2 variable(s): nccl; reduced on /device:GPU:0..1 (NcclAllReduce x2); '
    'applied on /device:GPU:0..1'
  ) in text
  assert 'Post-init copies: 2 /device:GPU:0 -> /device:GPU:1' in text
  tower1 = 'Input of tower 1: images on /device:GPU:1, labels on /device:GPU:1'
  assert tower1 in text
  checked = report.kernel_check.checked
  assert checked > 0
  assert (
    'GPU kernel check: %d GPU op(s), every one has a GPU kernel' % (checked)
    in text.splitlines()
  )
