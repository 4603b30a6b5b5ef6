"""Regression tests of the numerics audit (issue 16): numbers, not text."""

import io

import numpy as np
import pytest
import tensorflow as tf

import models
from models import builder
from tests.test_distributed import LINEAR
from tests.test_distributed import B
from tests.test_distributed import cluster_mode
from tests.test_distributed import launch
from tests.test_distributed import launch_ok
from tests.test_distributed import local_losses
from tests.test_distributed import worker_losses
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.platform import cpu_features
import variable_mgr

tf1 = tf.compat.v1

AVX2_ONLY = 'processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n'
WITH_BF16 = 'processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n'
WITH_FP16 = 'processor\t: 0\nflags\t\t: fpu avx2 amx_fp16\n'


def make(**kw):
  base = dict(
    device='cpu',
    num_warmup_batches=0,
    num_batches=2,
    display_every=100,
    init_learning_rate=0.05,
  )
  base.update(kw)
  return params_lib.make_params(**base)


# ---- item 11: 16-bit compute on a CPU without native kernels ---------------


@pytest.mark.parametrize(
  'dtype,cpuinfo,warns',
  [
    ('bfloat16', AVX2_ONLY, True),
    ('bfloat16', WITH_BF16, False),
    ('bfloat16', WITH_FP16, True),
    ('float16', AVX2_ONLY, True),
    ('float16', WITH_BF16, True),
    ('float16', WITH_FP16, False),
    ('float32', AVX2_ONLY, False),
    ('bfloat16', None, False),  # no /proc/cpuinfo: nothing known
  ],
)
def test_native_16bit_detection(dtype, cpuinfo, warns):
  assert (cpu_features.slow_16bit_note(dtype, cpuinfo) is not None) == warns


# The flags lines of the CPU kinds this project's machines have had (copied
# from their /proc/cpuinfo), each with which 16-bit types it runs natively.
EPYC_ZEN2_AVX2 = (
  'processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 ssse3 fma '
  'sse4_1 sse4_2 avx f16c avx2 bmi2 sha_ni clzero\n'
)
EPYC_ZEN4_AVX512 = (
  'processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 ssse3 fma '
  'sse4_1 sse4_2 avx f16c avx2 bmi2 avx512f avx512dq avx512ifma avx512cd '
  'avx512bw avx512vl avx512_bf16 avx512vbmi avx512_vbmi2 gfni vaes '
  'avx512_vnni avx512_bitalg avx512_vpopcntdq\n'
)
XEON_SPR_AMX = (
  'processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu '
  'sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 avx512f avx512dq avx512cd '
  'avx512bw avx512vl avx512_bf16 avx512_vnni avx512_fp16 amx_bf16 amx_tile '
  'amx_int8\n'
)


@pytest.mark.parametrize(
  'cpuinfo,native',
  [
    (EPYC_ZEN2_AVX2, set()),
    (EPYC_ZEN4_AVX512, {'bfloat16'}),
    (XEON_SPR_AMX, {'bfloat16', 'float16'}),
  ],
  ids=['epyc-avx2', 'epyc-avx512-bf16', 'xeon-amx'],
)
def test_native_16bit_on_each_cpu_kind_seen(cpuinfo, native):
  for dtype in ('bfloat16', 'float16'):
    note = cpu_features.slow_16bit_note(dtype, cpuinfo)
    assert (note is None) == (dtype in native), (dtype, note)


def _expected_native(flags):
  """Which 16-bit types a CPU with `flags` runs natively (stated here, apart
  from the code under test): bf16 with avx512_bf16 or amx_bf16, fp16 with
  avx512_fp16 or amx_fp16."""
  native = set()
  if flags & {'avx512_bf16', 'amx_bf16'}:
    native.add('bfloat16')
  if flags & {'avx512_fp16', 'amx_fp16'}:
    native.add('float16')
  return native


def test_this_machine_gets_the_note_its_flags_call_for():
  cpuinfo = cpu_features.read_cpuinfo()
  if cpuinfo is None:
    pytest.skip('no /proc/cpuinfo on this machine')
  native = _expected_native(cpu_features.cpu_flags(cpuinfo))
  for dtype in ('bfloat16', 'float16'):
    note = cpu_features.slow_16bit_note(dtype, cpuinfo)
    assert (note is None) == (dtype in native), (dtype, note)


def test_bf16_run_on_an_avx2_cpu_warns_and_keeps_running(monkeypatch, capsys):
  monkeypatch.setattr(cpu_features, 'read_cpuinfo', lambda: AVX2_ONLY)
  bench = benchmark_cnn.BenchmarkCNN(
    make(model='trivial', data_name='cifar10', batch_size=4, use_bf16=True),
    out=io.StringIO(),
  )
  assert bench.slow_16bit_note() is not None
  result = bench.run()
  assert len(result.losses) == 2 and np.isfinite(result.losses).all()
  assert len(capsys.readouterr().err.strip().splitlines()) == 1


# ---- item 7: every tower draws its own dropout mask ------------------------


def _dropout_masks(indices, seed=1234):
  """The dropout keep-masks of one run's towers `indices` (one graph)."""
  graph = tf.Graph()
  with graph.as_default():
    outs = []
    for index in indices:
      with tf1.variable_scope('v%d' % index), builder.random_stream(index):
        net = builder.NetBuilder(
          tf.ones([8, 4, 4, 16]), is_training=True, seed=seed
        )
        outs.append(net.dropout(0.5))
    with tf1.Session(graph=graph) as sess:
      first = sess.run(outs)
      second = sess.run(outs)
  return [o != 0 for o in first], [o != 0 for o in second]


def test_towers_draw_independent_reproducible_dropout_masks():
  masks, next_step = _dropout_masks([0, 1])
  # Independent masks agree on about half the positions, equal ones on all.
  agree = np.mean(masks[0] == masks[1])
  assert 0.4 < agree < 0.6, agree
  assert 0.4 < np.mean(masks[0] == next_step[0]) < 0.6  # fresh every step
  # The same global tower index draws the same masks in another run (a
  # cluster's worker 1 tower 0 as a local run's tower 1).
  again, _ = _dropout_masks([1])
  np.testing.assert_array_equal(again[0], masks[1])


# ---- item 6: cluster parameter_server updates the statistics once a step ---


def _checkpoint_values(train_dir, needle):
  reader = tf.train.load_checkpoint(str(train_dir))
  names = sorted(n for n in reader.get_variable_to_shape_map() if needle in n)
  return {n: reader.get_tensor(n) for n in names}


RESNET20 = [
  '--model=resnet20',
  '--data_name=cifar10',
  '--device=cpu',
  '--batch_size=4',
  '--num_batches=2',
  '--num_warmup_batches=0',
  '--optimizer=sgd',
  '--init_learning_rate=0.05',
  '--display_every=100',
]


def _local_then_cluster(tmp_path, local_params, cluster_flags):
  """Trains local_params in this process (train_dir tmp_path/local), then
  cluster_flags on 2 workers and a ps (tmp_path/cluster); the two dirs."""
  local_dir = tmp_path / 'local'
  benchmark_cnn.run_benchmark(
    make(**local_params, train_dir=str(local_dir)), out=io.StringIO()
  )
  cluster_dir = tmp_path / 'cluster'
  out, _ = launch_ok(
    tmp_path,
    2,
    cluster_flags + ['--train_dir=%s' % cluster_dir],
    launcher_flags=['--num_ps=1', '--no-controller'],
  )
  return local_dir, cluster_dir


@pytest.mark.slow
def test_cluster_parameter_server_batch_norm_statistics(tmp_path):
  """2 workers x 1 tower: moving statistics as a local 2-tower run's."""
  local_dir, cluster_dir = _local_then_cluster(
    tmp_path,
    dict(
      model='resnet20',
      data_name='cifar10',
      batch_size=4,
      num_gpus=2,
      optimizer='sgd',
    ),
    RESNET20 + ['--variable_update=parameter_server'],
  )
  local = _checkpoint_values(local_dir, 'moving_')
  cluster = _checkpoint_values(cluster_dir, 'moving_')
  assert sorted(local) == sorted(cluster) and local
  worst = max(
    np.max(np.abs(cluster[n] - local[n])) / (np.max(np.abs(local[n])) + 1e-6)
    for n in local
  )
  assert worst < 1e-4, worst


# ---- item 4: a skipped fp16 step moves no batch-norm statistic ------------


def _values(run, needle):
  with run.built.graph.as_default():
    variables = [v for v in tf1.global_variables() if needle in v.op.name]
  return dict(zip([v.op.name for v in variables], run.sess.run(variables)))


@pytest.mark.parametrize('variable_update', ['parameter_server', 'replicated'])
def test_skipped_fp16_step_moves_no_batch_norm_statistic(variable_update):
  from tests.test_driver import Session

  run = Session(
    make(
      model='resnet20',
      data_name='cifar10',
      batch_size=4,
      num_gpus=2,
      variable_update=variable_update,
      use_fp16=True,
      fp16_enable_auto_loss_scale=True,
      fp16_loss_scale=1e30,  # the scaled gradients overflow: skipped
    )
  )
  before = _values(run, 'moving_')
  assert before
  run.step(1)
  report = run.sess.run(run.built.report)
  assert int(report['skipped_steps']) == 1
  after = _values(run, 'moving_')
  moved = max(np.max(np.abs(after[n] - before[n])) for n in before)
  assert moved == 0.0, moved
  run.close()


# A 2-worker run whose tasks run this module (see __main__ below): the test
# models are registered, and with STATISTICS_DUMP set each worker writes its
# batch-norm moving statistics after its last step to STATISTICS_DUMP % index.
TASK_MODULE = '--module=tests.test_numerics_audit'
STATISTICS_DUMP = 'TEST_NUMERICS_AUDIT_STATISTICS_DUMP'


class BatchNormLinearModel:
  """test_linear after a batch norm of its 2x2x3 input (3 channels)."""

  name = 'test_bn_linear'
  dataset = 'cifar10'
  image_size = 2
  default_batch_size = 4
  default_learning_rate = 0.1

  def build(self, images, num_classes, **kwargs):
    from tests import testing_models

    net = builder.NetBuilder(images, **kwargs)
    net.batch_norm()
    out = testing_models.LinearModel().build(
      net.top_layer, num_classes, **kwargs
    )
    return models.ModelOutput(logits=out.logits, update_ops=net.update_ops)

  def learning_rate(self, *args):
    del args
    return self.default_learning_rate


def _register_batch_norm_model():
  if BatchNormLinearModel.name not in models.names('cifar10'):
    models.register(BatchNormLinearModel.name, 'cifar10', BatchNormLinearModel)


def _dump_statistics_after_each_run(pattern, task_index):
  """Makes the driver save this task's moving statistics after its steps."""
  run = benchmark_cnn._StepLoop.run  # pylint: disable=protected-access

  def run_and_dump(loop):
    run(loop)
    with loop.built.graph.as_default():
      stats = [v for v in tf1.global_variables() if 'moving_' in v.op.name]
    values = loop.sess.run(stats)
    np.savez(
      pattern % task_index,
      **{v.op.name.replace('/', '.'): x for v, x in zip(stats, values)},
    )

  benchmark_cnn._StepLoop.run = run_and_dump  # pylint: disable=protected-access


def _cluster_statistics(tmp_path, name, loss_scale):
  """Each worker's moving statistics after 2 distributed_replicated steps."""
  import os

  run_dir = tmp_path / name
  run_dir.mkdir()
  pattern = str(run_dir / 'stats_%d.npz')
  os.environ[STATISTICS_DUMP] = pattern
  try:
    rc, out, records = launch(
      run_dir,
      2,
      [
        f
        for f in LINEAR
        if not f.startswith(('--model', '--num_batches', '--num_warmup'))
      ]
      + [
        '--model=test_bn_linear',
        '--num_batches=2',
        '--num_warmup_batches=0',
        '--variable_update=distributed_replicated',
        '--cross_replica_sync',
        '--use_fp16',
        '--fp16_enable_auto_loss_scale',
        '--fp16_loss_scale=%g' % loss_scale,
      ],
      launcher_flags=['--num_ps=1', '--no-controller', TASK_MODULE],
      every_worker_reports=True,
    )
  finally:
    del os.environ[STATISTICS_DUMP]
  assert rc == 0, out[-3000:]
  skipped = {r['task']['task_index']: r['skipped_steps'] for r in records}
  stats = []
  for worker in range(2):
    with np.load(pattern % worker) as f:
      stats.append({n: f[n] for n in f.files})
  return skipped, stats


@pytest.mark.slow
def test_skipped_fp16_step_moves_no_statistic_on_any_cluster_worker(tmp_path):
  """Every step skipped (scale 1e30 overflows): no worker's statistics move.

  Before: the chief's stayed put, worker 1's moved (its skip verdict was the
  chief's alone).
  """
  skipped, stats = _cluster_statistics(tmp_path, 'skipped', 1e30)
  assert skipped == {0: 2, 1: 2}
  for worker_stats in stats:
    names = sorted(worker_stats)
    assert len(names) == 2, names  # moving_mean, moving_variance
    for n in names:
      initial = 1.0 if 'moving_variance' in n else 0.0
      np.testing.assert_array_equal(worker_stats[n], np.full([3], initial))
  # Control: finite steps (scale 128) do move every worker's statistics.
  skipped, stats = _cluster_statistics(tmp_path, 'applied', 128.0)
  assert skipped == {0: 0, 1: 0}
  for worker_stats in stats:
    moving_mean = [worker_stats[n] for n in worker_stats if 'moving_mean' in n]
    assert np.min(np.abs(moving_mean)) > 1e-3, moving_mean


# ---- item 2: hybrid + adam resumes both optimizers' beta powers ------------


def _cluster_losses(tmp_path, name, flags, launcher_flags):
  """The cluster's per-step losses (mean over the 2 workers)."""
  run_dir = tmp_path / name
  run_dir.mkdir()
  out, records = launch_ok(
    run_dir, 2, flags, launcher_flags=launcher_flags, every_worker_reports=True
  )
  return sum(worker_losses(records, 2)) / 2


@pytest.mark.slow
def test_hybrid_adam_resumes_exactly(tmp_path):
  """3 steps, then 2 resumed steps == 5 uninterrupted local steps."""
  common = [
    f for f in LINEAR if not f.startswith(('--num_batches', '--optimizer'))
  ] + [
    '--optimizer=adam',
    '--num_warmup_batches=0',
    '--variable_update=hybrid',
    '--hybrid_threshold_bytes=100',  # weights on the ps, biases all-reduced
    '--train_dir=%s' % (tmp_path / 'train'),
  ]
  ps = ['--num_ps=1', '--no-controller']
  whole = local_losses(
    batch_size=2 * B, optimizer='adam', num_batches=5, num_warmup_batches=0
  )
  first = _cluster_losses(tmp_path, 'first', common + ['--num_batches=3'], ps)
  then = _cluster_losses(tmp_path, 'then', common + ['--num_batches=2'], ps)
  np.testing.assert_allclose(first, whole[:3], rtol=1e-4)
  np.testing.assert_allclose(then, whole[3:], rtol=1e-4)
  names = tf.train.load_checkpoint(str(tmp_path / 'train'))
  powers = [n for n in names.get_variable_to_shape_map() if 'beta1_power' in n]
  assert len(powers) == 2, powers  # the ps optimizer's and the towers'


# ---- item 5: relaxed consistency resumes the step it held back ------------


def _linear_losses(**kw):
  from tests import testing_models

  testing_models.ensure_registered()
  p = make(
    model='test_linear',
    data_name='cifar10',
    batch_size=4,
    num_gpus=2,
    variable_update='replicated',
    variable_consistency='relaxed',
    optimizer='momentum',
    **kw,
  )
  return np.array(benchmark_cnn.run_benchmark(p, out=io.StringIO()).losses)


def test_relaxed_consistency_resumes_exactly(tmp_path):
  train_dir = str(tmp_path / 'train')
  whole = _linear_losses(num_batches=5)
  first = _linear_losses(num_batches=3, train_dir=train_dir)
  then = _linear_losses(num_batches=2, train_dir=train_dir)
  np.testing.assert_allclose(first, whole[:3], rtol=1e-6)
  np.testing.assert_allclose(then, whole[3:], rtol=1e-6)


# ---- item 3: relaxed consistency with an automatic loss scale --------------


def _relaxed_fp16_update_norm(**kw):
  """Norm of tower 0's weight change over 4 relaxed fp16 steps."""
  from tests import testing_models
  from tests.test_driver import Session

  testing_models.ensure_registered()
  run = Session(
    make(
      model='test_linear',
      data_name='cifar10',
      batch_size=4,
      num_gpus=2,
      variable_update='replicated',
      variable_consistency='relaxed',
      optimizer='sgd',
      use_fp16=True,
      fp16_loss_scale=128.0,
      use_resource_vars=True,
      **kw,
    )
  )
  before = run.values('v0/linear/')
  run.step(4)
  after = run.values('v0/linear/')
  run.close()
  weights = [n for n in before if not n.endswith('/delayed')]
  return np.sqrt(sum(np.sum((after[n] - before[n]) ** 2) for n in weights))


def test_relaxed_auto_loss_scale_applies_unscaled_gradients():
  fixed = _relaxed_fp16_update_norm()
  # The scale doubles after every finite step: 128, 256, 512, 1024.
  auto = _relaxed_fp16_update_norm(
    fp16_enable_auto_loss_scale=True, fp16_inc_loss_scale_every_n=1
  )
  assert auto / fixed == pytest.approx(1.0, abs=1e-4), auto / fixed


# ---- item 9: the gradient_norm summary is the applied gradient's -----------


def _gradient_norm_summary(tmp_path, name, **kw):
  import os

  from tests import testing_models

  testing_models.ensure_registered()
  train_dir = tmp_path / name
  benchmark_cnn.run_benchmark(
    make(
      model='test_linear',
      data_name='cifar10',
      num_batches=1,
      summary_verbosity=2,
      save_summaries_steps=1,
      train_dir=str(train_dir),
      **kw,
    ),
    out=io.StringIO(),
  )
  (events,) = [f for f in os.listdir(train_dir) if 'tfevents' in f]
  for event in tf1.train.summary_iterator(str(train_dir / events)):
    for value in event.summary.value:
      if value.tag == 'gradient_norm':
        return value.simple_value
  raise AssertionError('no gradient_norm summary')


@pytest.mark.parametrize('variable_update', variable_mgr.local_names())
def test_fp16_gradient_norm_summary_is_the_applied_gradients(
  tmp_path, variable_update
):
  # float32, one tower x 2B: the norm of the step's gradient.
  reference = _gradient_norm_summary(tmp_path, 'f32', batch_size=8)
  fp16 = _gradient_norm_summary(
    tmp_path,
    'f16',
    batch_size=4,
    num_gpus=2,
    variable_update=variable_update,
    use_fp16=True,
    fp16_loss_scale=128.0,
  )
  if variable_update == 'independent':  # tower 0 applies its own gradient
    reference = _gradient_norm_summary(tmp_path, 'f32_half', batch_size=4)
  assert fp16 / reference == pytest.approx(1.0, abs=2e-3), fp16 / reference


CLUSTER_NORM_MODES = [
  ('parameter_server', ['--num_ps=1'], []),
  ('distributed_replicated', ['--num_ps=1'], []),
  ('hybrid', ['--num_ps=1'], ['--hybrid_threshold_bytes=100']),
  ('collective_all_reduce', ['--num_ps=0'], []),
]


def _summary_value(train_dir, tag):
  import os

  (events,) = [f for f in os.listdir(train_dir) if 'tfevents' in f]
  for event in tf1.train.summary_iterator(str(train_dir / events)):
    for value in event.summary.value:
      if value.tag == tag:
        return value.simple_value
  raise AssertionError('no %s summary' % tag)


@pytest.mark.slow
@pytest.mark.parametrize(
  'mode,launcher_flags,extra',
  CLUSTER_NORM_MODES,
  ids=[m[0] for m in CLUSTER_NORM_MODES],
)
def test_cluster_gradient_norm_summary_is_the_applied_gradients(
  tmp_path, mode, launcher_flags, extra
):
  """fp16 (scale 128), 2 workers, one sgd step: norm == |w1 - w0| / lr.

  Before: the chief's tower 0 gradient (its half of the batch; in the ps
  modes also x128).
  """
  from tests import testing_models

  lr = 0.1
  train_dir = tmp_path / 'train'
  out, _ = launch_ok(
    tmp_path,
    2,
    [f for f in LINEAR if not f.startswith(('--num_batches', '--num_warmup'))]
    + [
      '--variable_update=' + mode,
      '--num_batches=1',
      '--num_warmup_batches=0',
      '--init_learning_rate=%g' % lr,
      '--use_fp16',
      '--fp16_loss_scale=128',
      '--summary_verbosity=2',
      '--save_summaries_steps=1',
      '--train_dir=%s' % train_dir,
    ]
    + extra,
    launcher_flags=launcher_flags + ['--no-controller'],
  )
  w0, b0 = testing_models.linear_initial_weights(12, 10)
  reader = tf.train.load_checkpoint(str(train_dir))
  (w_name,) = [n for n in reader.get_variable_to_shape_map() if 'weights' in n]
  (b_name,) = [n for n in reader.get_variable_to_shape_map() if 'biases' in n]
  change = np.concatenate(
    [
      (reader.get_tensor(w_name) - w0.astype(np.float32)).ravel(),
      (reader.get_tensor(b_name) - b0.astype(np.float32)).ravel(),
    ]
  )
  applied = np.linalg.norm(change.astype(np.float64)) / lr
  reported = _summary_value(train_dir, 'gradient_norm')
  assert reported / applied == pytest.approx(1.0, abs=1e-4), (
    reported,
    applied,
  )


# ---- item 1: hybrid clips the global norm of both groups together ---------

CLIPPED_LENET = [
  '--model=lenet',
  '--data_name=imagenet',
  '--device=cpu',
  '--optimizer=sgd',
  '--init_learning_rate=0.05',
  '--weight_decay=1e-3',
  '--gradient_clip_norm=0.05',
  '--num_batches=1',
  '--num_warmup_batches=0',
  '--display_every=100',
]


def _weights(train_dir):
  reader = tf.train.load_checkpoint(str(train_dir))
  return {
    n: reader.get_tensor(n)
    for n in reader.get_variable_to_shape_map()
    if n.endswith(('kernel', 'biases', 'weights'))
  }


@pytest.mark.slow
def test_hybrid_gradient_clip_matches_parameter_server(tmp_path):
  local_dir, cluster_dir = _local_then_cluster(
    tmp_path,
    dict(
      model='lenet',
      data_name='imagenet',
      batch_size=16,
      optimizer='sgd',
      weight_decay=1e-3,
      gradient_clip_norm=0.05,
      num_batches=1,
    ),
    CLIPPED_LENET + ['--batch_size=8', '--variable_update=hybrid'],
  )
  local, cluster = _weights(local_dir), _weights(cluster_dir)
  assert sorted(local) == sorted(cluster) and len(local) > 4
  worst = max(
    np.max(np.abs(cluster[n] - local[n])) / np.max(np.abs(local[n]))
    for n in local
  )
  assert worst < 1e-4, worst


# ---- item 10: a cluster's results line reports the cluster's loss ---------

LOSS_MODES = [
  cluster_mode('parameter_server'),
  cluster_mode('distributed_replicated'),
  cluster_mode('collective_all_reduce'),
  cluster_mode('hybrid', '--hybrid_threshold_bytes=100'),
]


@pytest.mark.slow
@pytest.mark.parametrize(
  'mode,launcher_flags,extra', LOSS_MODES, ids=[m[0] for m in LOSS_MODES]
)
def test_cluster_results_line_reports_the_cluster_loss(
  tmp_path, mode, launcher_flags, extra
):
  out, records = launch_ok(
    tmp_path,
    2,
    LINEAR + ['--variable_update=' + mode] + extra,
    launcher_flags=launcher_flags,
  )
  (record,) = records  # worker 0's line
  expected = local_losses(batch_size=2 * B)  # 1 tower x 2B: the same loss
  np.testing.assert_allclose(record['losses'], expected, rtol=1e-4)
  assert record['final_loss'] == pytest.approx(expected[-1], rel=1e-4)
  # Worker 0's own half-batch loss is kept, and differs.
  own = np.array(record['worker_losses'])
  assert own.shape == expected.shape
  assert np.max(np.abs(own - expected) / expected) > 1e-3


if __name__ == '__main__':
  # A cluster task (see TASK_MODULE): the driver's command line with the
  # test models registered.
  import os
  import sys

  from tests import testing_models
  from tf_cnn_benchmarks import __main__ as cli

  testing_models.ensure_registered()
  _register_batch_norm_model()
  if os.environ.get(STATISTICS_DUMP):
    (index,) = [
      int(a.split('=')[1]) for a in sys.argv if a.startswith('--task_index=')
    ]
    _dump_statistics_after_each_run(os.environ[STATISTICS_DUMP], index)
  sys.exit(cli.main(sys.argv, reports_results=True))
