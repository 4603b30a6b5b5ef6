"""A drop-in for tf_cnn_benchmarks users (issue 18): classic command lines,
flags, meanings, entry points and Python API."""

import json
import os
from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import models
from tf_cnn_benchmarks import __main__ as entry
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import classic_flags
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.training import optimizers
from variable_mgr import base as variable_mgr_base

REPO = Path(__file__).resolve().parent.parent

from tf_cnn_benchmarks.commands import make_fake_data  # noqa: E402

tf1 = tf.compat.v1

# What makes a classic GPU command line CPU-sized; the line's own flags win.
CPU_SIZED = (
  '--device=cpu',
  '--batch_size=2',
  '--num_batches=2',
  '--num_warmup_batches=1',
)


@pytest.fixture(scope='module')
def data_dirs(tmp_path_factory):
  """Fake ImageNet and CIFAR-10 (scripts/make_fake_data.py); the directory
  names carry the dataset name, as the classic harness's inference wants."""
  root = tmp_path_factory.mktemp('data')
  imagenet = root / 'imagenet_data'
  cifar = root / 'cifar10_data'
  make_fake_data.write_imagenet(
    str(imagenet), num_train=8, num_validation=4, num_shards=2, image_size=64
  )
  make_fake_data.write_cifar10(str(cifar), num_train=20, num_validation=10)
  return {'IMAGENET': str(imagenet), 'CIFAR': str(cifar), 'TMP': str(root)}


def run_main(argv, capfd):
  """Runs `python -m tf_cnn_benchmarks ARGV` in process: (status, out, err)."""
  entry.FLAGS.unparse_flags()  # each command line starts from the defaults
  status = entry.main(['tf_cnn_benchmarks', *argv])
  out, err = capfd.readouterr()
  return status, out, err


def _cpu_sized(line, dirs):
  """The classic line's flags (placeholders filled) after the CPU sizing."""
  flags = [arg % dirs if '%(' in arg else arg for arg in line.split()]
  return list(CPU_SIZED) + flags


# (classic command line, expected exit status). 0 means a full run with a
# 'total images/sec:' line; 2 means the one documented refusal line.
_FAST_LINES = [
  ('--model=alexnet --data_name=cifar10 --forward_only=True', 0),
  (
    '--model=resnet20 --data_name=cifar10 --variable_update replicated '
    '--num_gpus 2',
    0,
  ),
  (
    '--model=trivial --num_gpus=2 --variable_update=replicated '
    '--all_reduce_spec=pscpu',
    0,
  ),
  (
    '--model=trivial --num_gpus=2 --variable_update=replicated '
    '--all_reduce_spec=pscpu:32k:xring',
    0,
  ),
  (
    '--model=trivial --num_gpus=2 --variable_update=replicated '
    '--all_reduce_spec=nccl',
    2,
  ),  # GPU-only all-reduce on a CPU run
  ('--model=trivial --xla=True', 0),
  ('--model=trivial --xla_compile=True', 0),
  ('--model=lenet --optimizer=momentum --momentum=0.9 --weight_decay=1e-4', 0),
  ('--model=lenet --use_tf_layers=false', 0),
  ('--model=trivial --gpu_thread_mode=gpu_private --per_gpu_thread_count=2', 0),
  ('--model=trivial --mkl=True --kmp_blocktime=0 --num_inter_threads=1', 0),
  ('--model=lenet --batchnorm_persistent=True --winograd_nonfused=True', 0),
  ('--model=trivial --print_training_accuracy=True', 0),
  (
    '--model=trivial --loss_type_to_report=base_loss --single_l2_loss_op '
    '--display_perf_ewma=0.5 --init_learning_rate=0.1 '
    '--num_learning_rate_warmup_epochs=1',
    0,
  ),
  (
    '--model=resnet20 --data_name=cifar10 --data_dir=%(CIFAR)s --nodistortions',
    0,
  ),
  ('--model=trivial --data_dir=%(IMAGENET)s --datasets_use_prefetch=True', 0),
  ('--model=trivial --job_name= --device=CPU --local_parameter_device=CPU', 0),
  ('--model=trivial --variable_update=independent --num_gpus=2', 0),
  (
    '--model=lenet --use_fp16=True --fp16_enable_auto_loss_scale=True '
    '--variable_update=replicated --num_gpus=2',
    0,
  ),
  ('--model=trivial --use_fp16 --fp16_loss_scale=128', 0),
  (
    '--model=lenet --optimizer=rmsprop --init_learning_rate=0.01 '
    '--num_epochs_per_decay=2 --learning_rate_decay_factor=0.94',
    0,
  ),
  (
    '--model=lenet --num_epochs_per_decay=2 --learning_rate_decay_factor=0.94',
    2,
  ),  # a decay without --init_learning_rate
  (
    '--model=trivial --gradient_repacking=2 --variable_update=replicated '
    '--num_gpus=2',
    0,
  ),
  (
    '--model=trivial --variable_update=replicated --num_gpus=2 '
    '--agg_small_grads_max_bytes=1000',
    0,
  ),
  (
    '--model=trivial --variable_consistency=relaxed '
    '--variable_update=replicated --num_gpus=2',
    0,
  ),
  (
    '--model=trivial --trace_file=%(TMP)s/trace.json '
    '--use_chrome_trace_format=True',
    0,
  ),
  (
    '--model=trivial --display_every=1 --num_intra_threads=1 '
    '--num_inter_threads=1',
    0,
  ),
  (
    '--model=trivial --data_format=NHWC --sync_on_finish=False '
    '--staged_vars=False',
    0,
  ),
  ('--model=trivial --allow_growth=True --force_gpu_compatible', 0),
  ('--model=trivial --forward_only=True --trt_mode=FP32', 0),
  ('--model=ncf', 2),
  ('--model=ssd300', 2),
  ('--model=trivial --benchmark_test_id=abc --benchmark_log_dir=%(TMP)s', 0),
  ('--model=trivial --debugger=cli', 0),
  ('--model=trivial --ml_perf_compliance_logging', 0),
  ('--model=lenet --gradient_clip=1.0', 0),
  (
    '--model=trivial --use_datasets=True --datasets_num_private_threads=2 '
    '--datasets_prefetch_buffer_size=2',
    0,
  ),
  (
    '--model=trivial --summary_verbosity=1 --save_summaries_steps=1 '
    '--train_dir=%(TMP)s/train_summaries',
    0,
  ),
  (
    '--model=resnet20_v2 --data_name=cifar10 '
    '--eval_during_training_every_n_steps=1',
    0,
  ),
  (
    '--model=trivial --variable_update=parameter_server '
    '--local_parameter_device=cpu --cross_replica_sync=True',
    0,
  ),
]
_SLOW_LINES = [
  (
    '--model=resnet50 --variable_update=parameter_server '
    '--local_parameter_device=cpu',
    0,
  ),
  (
    '--model=vgg16 --local_parameter_device=cpu --nodistortions '
    '--data_dir=%(IMAGENET)s',
    0,
  ),
  (
    # (without the line's --use_fp16=True: float16 convolutions have no
    # native CPU kernels, 15 minutes here; lenet/trivial lines cover fp16)
    '--model=inception3 --variable_update=replicated --num_gpus=2',
    0,
  ),
  (
    '--model=resnet50 --forward_only=True --data_dir=%(IMAGENET)s '
    '--nodistortions',
    0,
  ),
  ('--model=mobilenet --optimizer=rmsprop', 0),
  (
    '--model=official_resnet50 --variable_update=replicated --num_gpus=2 '
    '--all_reduce_spec=xring',
    0,
  ),
  ('--model=googlenet --variable_update=replicated --num_gpus=2', 0),
  ('--model=nasnet --data_name=cifar10', 0),
  (
    '--model=resnet50 --optimizer=momentum --weight_decay=1e-4 '
    '--loss_type_to_report=base_loss --single_l2_loss_op '
    '--resnet_base_lr=0.05',
    0,
  ),  # the classic MLPerf ResNet line's schedule and report flags
]
CLASSIC_LINES = [
  pytest.param(line, rc, id=line[:60]) for line, rc in _FAST_LINES
] + [
  pytest.param(line, rc, id=line[:60], marks=pytest.mark.slow)
  for line, rc in _SLOW_LINES
]


def test_the_table_holds_enough_classic_lines():
  assert len(CLASSIC_LINES) >= 40 and len(_FAST_LINES) >= 25


@pytest.mark.parametrize('line,expected', CLASSIC_LINES)
def test_classic_command_line(line, expected, data_dirs, capfd, tmp_path):
  result_file = tmp_path / 'r.jsonl'
  argv = _cpu_sized(line, data_dirs) + ['--result_file=%s' % result_file]
  status, _, err = run_main(argv, capfd)
  assert status == expected, err
  if expected == 0:
    # The run's results line: what its 'total images/sec:' line prints.
    (record,) = [json.loads(x) for x in result_file.read_text().splitlines()]
    assert record['num_steps'] == 2 and record['images_per_sec'] > 0
  else:
    assert len(err.strip().splitlines()) == 1  # one line, no traceback
    assert not result_file.exists()


# ---- point 1 and 2: help, every classic flag accepted ----------------------


@pytest.mark.parametrize(
  'switch', ['-h', '--help', '--helpshort', '--helpfull']
)
def test_help_exits_0_and_lists_every_classic_flag(switch, capfd):
  status, out, _ = run_main([switch], capfd)
  assert status == 0
  # absl's spelling: booleans as --[no]name.
  listed = {
    line.split(':')[0].strip().removeprefix('--').removeprefix('[no]')
    for line in out.splitlines()
    if line.startswith('  --')
  }
  assert set(classic_flags.CLASSIC_FLAGS) <= listed
  assert len(classic_flags.CLASSIC_FLAGS) == 138


def test_every_classic_flag_is_defined_with_its_classic_default():
  for name, f in classic_flags.CLASSIC_FLAGS.items():
    assert name in entry.FLAGS, name
    if name in classic_flags.EXTRA_FLAGS:
      assert entry.FLAGS[name].default == f.default, name


def _non_default(name):
  f = classic_flags.EXTRA_FLAGS[name]
  if f.kind == 'bool':
    return '--%s=%s' % (name, not f.default)
  if f.kind == 'enum':
    return '--%s=%s' % (name, [c for c in f.choices if c != f.default][0])
  if f.kind == 'list':
    return '--%s=1,2' % name
  if f.kind == 'string':
    return '--%s=x' % name
  return '--%s=%s' % (
    name,
    (f.default or 0) + 0.5 if f.kind == 'float' else (f.default or 0) + 1,
  )


def test_no_classic_flag_is_pending():
  # Issue 14 implemented the last ones; every classic flag is implemented or
  # has no effect (with its reason).
  assert {f.status for f in classic_flags.CLASSIC_FLAGS.values()} == {
    classic_flags.IMPLEMENTED,
    classic_flags.NO_EFFECT,
  }


@pytest.mark.parametrize(
  'name',
  sorted(
    n
    for n, f in classic_flags.EXTRA_FLAGS.items()
    if f.status == classic_flags.NO_EFFECT
  ),
)
def test_no_effect_flags_warn_once_and_go_on(name, capfd):
  status, _, err = run_main(
    ['--device=cpu', '--only_check_args', _non_default(name)], capfd
  )
  assert (status, len(err.strip().splitlines())) == (0, 1)


def test_absl_app_flags_work_or_are_refused(capfd):
  assert run_main(['--only_check_args', '--device=cpu'], capfd)[0] == 0
  assert run_main(['--only_check_args', '--model=nope'], capfd)[0] == 2
  assert run_main(['--run_with_pdb'], capfd)[0] == 2


# ---- point 3: same name, same meaning --------------------------------------


def _apply_ops(name):
  graph = tf.Graph()
  with graph.as_default():
    var = tf1.get_variable('w', initializer=tf.constant([1.0, 2.0]))
    config = optimizers.OptimizerConfig(name=name)
    opt = optimizers.optimizer_factory(config, 0.1)()
    opt.apply_gradients([(tf.constant([0.5, 0.5]), var)])
  return [op for op in graph.get_operations() if 'ApplyMomentum' in op.type]


def test_optimizer_momentum_is_nesterov():
  (nesterov,) = _apply_ops('momentum')
  (plain,) = _apply_ops('plain_momentum')
  assert nesterov.get_attr('use_nesterov') is True
  assert plain.get_attr('use_nesterov') is False


def _clipped(**kw):
  """The reduced gradients after the clip the flags ask for (the driver's
  value through the managers' clipping function)."""
  p = params_lib.make_params(model='trivial', device='cpu', **kw)
  with tf.Graph().as_default():
    grads = [tf.constant([3.0, -5.0, 0.5]), tf.constant([4.0])]
    gv = [(g, None) for g in grads]
    clip = optimizers.gradient_clip(p)
    out = variable_mgr_base.clip_by_global_norm(gv, clip)
    with tf1.Session() as sess:
      return sess.run([g for g, _ in out])


def test_gradient_clip_clips_each_element_and_norm_has_its_own_flag():
  each = _clipped(gradient_clip=1.0)
  norm = _clipped(gradient_clip_norm=1.0)
  np.testing.assert_array_equal(each[0], [1.0, -1.0, 0.5])
  np.testing.assert_array_equal(each[1], [1.0])
  total = np.sqrt(9 + 25 + 0.25 + 16)
  np.testing.assert_allclose(norm[0], np.array([3.0, -5.0, 0.5]) / total)
  assert optimizers.gradient_clip(params_lib.make_params()) is None


@pytest.mark.parametrize(
  'name,dataset,classes,expected,rel',
  [
    # torchvision resnet18/34/50 num_params (the v1 networks; the official
    # v1 strides in the 3x3 like v1.5: no parameter changes), plus, for the
    # basic-block 18/34, the official block_layer's projection of stage 1's
    # first block (1x1 64->64 conv + BN: 4,096 + 128).
    ('official_resnet18', 'imagenet', 1000, 11_689_512 + 4_224, 0),
    ('official_resnet34', 'imagenet', 1000, 21_797_672 + 4_224, 0),
    ('official_resnet50', 'imagenet', 1000, 25_557_032, 0),
    # Official v2 against v1, basic blocks: the first blocks of stages 2-4
    # normalise their input (w/2 wide) instead of their output (w): -2*(w/2)
    # for w = 128, 256, 512 (-896); no BN on the projections (-1,792 for
    # stages 2-4, -128 for stage 1) nor after the stem conv (-128); a final
    # BN over 512 (+1,024). Net: v1 - 1,920.
    ('official_resnet18_v2', 'imagenet', 1000, 11_689_512 + 4_224 - 1_920, 0),
    ('official_resnet34_v2', 'imagenet', 1000, 21_797_672 + 4_224 - 1_920, 0),
    # Bottlenecks (b = 64..512): first blocks normalise their input instead
    # of the 4b output (stage 1: 2*64 for 2*256, -384; stages 2-4: 2*2b for
    # 2*4b, -4b each, -3,584), no BN on the projections (-8 * 960) nor
    # after the stem (-128), a final BN over 2048 (+4,096). Net: -7,680.
    ('official_resnet50_v2', 'imagenet', 1000, 25_557_032 - 7_680, 0),
    # He et al. 2016 (arXiv:1603.05027), Table 4: ResNet-200 64.7M.
    pytest.param(
      'official_resnet200_v2',
      'imagenet',
      1000,
      64.7e6,
      0.002,
      marks=pytest.mark.slow,
    ),
    # Zoph et al. 2017, Table 1: NASNet-A (6 @ 768) on CIFAR-10, 3.3M.
    pytest.param('nasnet', 'cifar10', 10, 3.3e6, 0.02, marks=pytest.mark.slow),
  ],
)
def test_official_resnet_and_cifar_nasnet_parameter_counts(
  name, dataset, classes, expected, rel
):
  count = models.model_param_count(models.create_model(name, dataset), classes)
  assert count == pytest.approx(expected, rel=rel)


def test_model_mobilenet_is_v2():
  v2, v1 = (
    models.create_model(n, 'imagenet') for n in ('mobilenet', 'mobilenet_v1')
  )
  params, flops = models.model_stats(v2, 1001)
  # Sandler et al. 2018: 3.4M parameters, 300M multiply-adds (0.60 GFLOPs).
  assert flops / 1e9 == pytest.approx(0.60, abs=0.02)
  # The paper's network plus TF-slim's logits layer (1280 -> 1001, with
  # bias), which the classic harness's shared head (1001 -> 1001) topped.
  assert params == models.model_param_count(
    models.create_model('mobilenet_v2', 'imagenet'), 1001
  ) + (1001 * 1001 + 1001)
  assert models.model_param_count(v1, 1001) > 4e6


def test_distortions_default_false():
  assert params_lib.make_params().distortions is False


def test_data_name_is_inferred_from_data_dir(data_dirs):
  p = params_lib.make_params(device='cpu', data_dir=data_dirs['CIFAR'])
  assert p.data_name == 'cifar10'
  p = params_lib.make_params(device='cpu', data_dir=data_dirs['IMAGENET'])
  assert p.data_name == 'imagenet'


def test_num_epochs_counts_every_workers_images():
  def steps(num_workers):
    hosts = ','.join('127.0.0.1:%d' % (20000 + i) for i in range(num_workers))
    return params_lib.make_params(
      device='cpu',
      data_name='cifar10',
      batch_size=10,
      num_epochs=1.0,
      job_name='worker',
      task_index=0,
      worker_hosts=hosts,
      variable_update='collective_all_reduce',
    ).num_batches

  assert (steps(1), steps(2), steps(4)) == (5000, 2500, 1250)


def test_lr_decay_flags_need_init_learning_rate():
  decay = dict(num_epochs_per_decay=0.5, learning_rate_decay_factor=0.5)
  for name in decay:  # classic: both decay flags, and the rate they decay
    with pytest.raises(params_lib.ParamsError):
      params_lib.make_params(device='cpu', **{name: 0.5})
    with pytest.raises(params_lib.ParamsError):
      params_lib.make_params(
        device='cpu', init_learning_rate=0.1, **{name: 0.5}
      )
  params_lib.make_params(device='cpu', init_learning_rate=0.1, **decay)
  # --minimum_learning_rate floors any schedule, the model's own included.
  params_lib.make_params(device='cpu', minimum_learning_rate=0.5)


def test_empty_job_name_and_upper_case_devices():
  plan = params_lib.make_plan(
    job_name='',
    ps_hosts='',
    worker_hosts='',
    device='CPU',
    local_parameter_device='CPU',
  )
  assert plan.cluster is None
  assert (plan.params.device, plan.params.local_parameter_device) == (
    'cpu',
    'cpu',
  )


# ---- point 4: the classic entry points -------------------------------------


def test_classic_python_api_matches_the_json_result():
  params = benchmark_cnn.make_params(
    model='trivial', data_name='cifar10', device='CPU', batch_size=4
  )
  params = benchmark_cnn.setup(params)
  params = params._replace(num_batches=3, num_warmup_batches=1)
  bench = benchmark_cnn.BenchmarkCNN(params)
  bench.print_info()
  stats = bench.run()
  record = json.loads(json.dumps(stats.to_record()))
  assert stats['num_workers'] == record['num_workers'] == 1
  assert stats['num_steps'] == record['num_steps'] == 3
  assert stats['images_per_sec'] == record['images_per_sec']
  assert stats['last_average_loss'] == record['final_loss']
  assert stats['average_wall_time'] == pytest.approx(
    record['step_time_ms']['mean'] / 1000
  )
  assert 'top_1_accuracy' not in stats  # no evaluation ran


def _cli(prefix, result_file):
  flags = [
    '--device=cpu',
    '--model=trivial',
    '--data_name=cifar10',
    '--batch_size=2',
    '--num_batches=2',
    '--num_warmup_batches=1',
    '--result_file=%s' % result_file,
  ]
  proc = subprocess.run(
    [sys.executable, *prefix, *flags],
    cwd='/',
    capture_output=True,
    text=True,
    timeout=300,
    env=dict(os.environ, PYTHONPATH=str(REPO)) if prefix[0] == '-m' else None,
  )
  return proc.returncode, json.loads(Path(result_file).read_text())


# Slow: two runs; the default suite runs the script itself in
# test_classic_callers.py::test_the_classic_script_path_is_the_entry_point.
@pytest.mark.slow
def test_classic_entry_script_behaves_like_python_m(tmp_path):
  script = str(REPO / 'tf_cnn_benchmarks' / 'tf_cnn_benchmarks.py')
  rc_script, script_record = _cli([script], tmp_path / 'a.jsonl')
  rc_module, module_record = _cli(
    ['-m', 'tf_cnn_benchmarks'], tmp_path / 'b.jsonl'
  )
  assert rc_script == rc_module == 0
  for record in (script_record, module_record):
    record['params'].pop('result_file')
  assert script_record['params'] == module_record['params']
  assert script_record['num_steps'] == module_record['num_steps'] == 2


def _cifar_train_images(cifar_dir, *, train, distortions):
  """The 20 training images of the fake CIFAR-10 set, as one sorted array."""
  from tf_cnn_benchmarks.inputs import data_sources  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks.inputs import input_options  # pylint: disable=g-import-not-at-top

  opts = input_options.InputOptions(
    data_dir=cifar_dir, data_name='cifar10', distortions=distortions
  )
  graph = tf.Graph()
  with graph.as_default():
    inputs = data_sources.tower_batches(
      opts,
      subset='train',
      train=train,
      batch_size=20,
      image_size=32,
      first_stream=0,
      num_streams=1,
      num_local_towers=1,
      host_device='/device:CPU:0',
    )
  with tf1.Session(graph=graph) as sess:
    sess.run(inputs.initializer)
    ((images, _),) = sess.run(list(inputs.batches))
  return np.array(sorted(images.reshape(20, -1).tolist()))


def test_distortions_switch_cifar10_crop_and_flip(data_dirs):
  plain = _cifar_train_images(
    data_dirs['CIFAR'], train=False, distortions=False
  )
  undistorted = _cifar_train_images(
    data_dirs['CIFAR'], train=True, distortions=False
  )
  distorted = _cifar_train_images(
    data_dirs['CIFAR'], train=True, distortions=True
  )
  np.testing.assert_array_equal(undistorted, plain)  # shuffled, not changed
  assert not np.array_equal(distorted, plain)


def test_forward_only_with_train_dir_infers_with_the_checkpoint(tmp_path):
  common = dict(
    model='trivial',
    data_name='cifar10',
    device='cpu',
    batch_size=4,
    num_warmup_batches=0,
    init_learning_rate=0.01,
  )
  train_dir = str(tmp_path / 'train')

  def run(**kw):
    p = params_lib.make_params(**common, **kw)
    return benchmark_cnn.run_benchmark(p, out=open(os.devnull, 'w'))

  trained = run(num_batches=3, train_dir=train_dir)
  restored = run(num_batches=1, forward_only=True, train_dir=train_dir)
  fresh = run(num_batches=1, forward_only=True)
  # Synthetic data is the same batch every step: the restored weights give
  # the loss training reached, not that of freshly initialised weights.
  assert restored.losses[-1] != pytest.approx(fresh.losses[-1], rel=1e-3)
  assert abs(restored.losses[-1] - trained.losses[-1]) < abs(
    fresh.losses[-1] - trained.losses[-1]
  )
  assert os.listdir(train_dir).count('checkpoint') == 1


def test_fractional_num_epochs_rounds_as_classic():
  # 0.002568 epochs of cifar10 are 128.4 examples: classic's
  # int(128.4 + 63) // 64 is 2 steps where ceil(128.4 / 64) was 3.
  p = params_lib.make_params(
    device='cpu', data_name='cifar10', batch_size=64, num_epochs=0.002568
  )
  assert p.num_batches == 2
  p = params_lib.make_params(
    device='cpu', data_name='cifar10', batch_size=64, num_epochs=0.00256
  )
  assert p.num_batches == 2  # exactly 128 examples


def test_fp16_nchw_on_cpu_is_refused_at_start(capfd):
  # TensorFlow's CPU max pooling has no float16 NCHW kernel: the run died in
  # warm-up with its traceback. float32 and bf16 NCHW run (oneDNN).
  common = ['--model=alexnet', '--data_name=cifar10', '--device=cpu']
  status, _, err = run_main(
    common + ['--use_fp16', '--data_format=NCHW', '--only_check_args'], capfd
  )
  assert status == 2
  lines = [line for line in err.splitlines() if '--use_fp16' in line]
  assert len(lines) == 1 and 'NHWC' in lines[0], err
  for flags in (['--use_bf16'], [], ['--use_fp16', '--data_format=NHWC']):
    p = params_lib.make_params(
      model='alexnet',
      data_name='cifar10',
      device='cpu',
      data_format='NHWC' if '--use_fp16' in flags else 'NCHW',
      use_fp16='--use_fp16' in flags,
      use_bf16='--use_bf16' in flags,
    )
    assert p.device == 'cpu'
