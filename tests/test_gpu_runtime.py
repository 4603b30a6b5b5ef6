"""The classic GPU / MKL runtime settings (issue 15, item 4) and the input
prefetched onto the tower devices (item 5).

GPU runs cannot start here (no GPU), so the config and environment builders
are checked on GPU Params directly: each flag must land in the ConfigProto
field or environment variable TensorFlow reads.
"""

import dataclasses
import glob
import io
import mmap
import os

import numpy as np
import pytest
import tensorflow as tf

from tests import helpers
from tf_cnn_benchmarks import __main__ as entry
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.config import runtime_fields
from tf_cnn_benchmarks.inputs import input_options
from tf_cnn_benchmarks.platform import devices
from tf_cnn_benchmarks.platform import gpu_runtime

tf1 = tf.compat.v1


def gpu_params(**overrides):
  """Unresolved GPU Params (resolution needs a visible GPU)."""
  return params_lib.Params(device='gpu', num_gpus=4, **overrides)


def gpu_config(p):
  """The session config a GPU run of p builds (devices + runtime fields)."""
  return devices.session_config(
    'gpu',
    p.num_gpus,
    num_intra_threads=p.num_intra_threads,
    num_inter_threads=p.num_inter_threads,
    runtime_fields=gpu_runtime.config_fields(p),
  )


# ---- ConfigProto -------------------------------------------------------------


def test_defaults_set_no_gpu_option():
  config = gpu_config(gpu_params())
  assert not config.HasField('gpu_options')  # allow_growth: TF's default


@pytest.mark.parametrize(
  'flag,value,read',
  [
    ('allow_growth', True, lambda c: c.gpu_options.allow_growth),
    (
      'gpu_memory_frac_for_testing',
      0.25,
      lambda c: c.gpu_options.per_process_gpu_memory_fraction,
    ),
    (
      'force_gpu_compatible',
      True,
      lambda c: c.gpu_options.force_gpu_compatible,
    ),
    (
      'use_unified_memory',
      True,
      lambda c: c.gpu_options.experimental.use_unified_memory,
    ),
    (
      'timestamped_allocator',
      True,
      lambda c: c.gpu_options.experimental.timestamped_allocator,
    ),
    (
      'gpu_kt_max_interval',
      7,
      lambda c: c.gpu_options.experimental.kernel_tracker_max_interval,
    ),
    (
      'gpu_kt_max_bytes',
      1 << 20,
      lambda c: c.gpu_options.experimental.kernel_tracker_max_bytes,
    ),
    (
      'gpu_kt_max_pending',
      3,
      lambda c: c.gpu_options.experimental.kernel_tracker_max_pending,
    ),
    (
      'gpu_indices',
      '3,1,2,0',
      lambda c: c.gpu_options.experimental.collective_ring_order,
    ),
  ],
)
def test_each_gpu_option_lands_in_its_config_field(flag, value, read):
  config = gpu_config(gpu_params(**{flag: value}))
  assert read(config) == value
  assert read(gpu_config(gpu_params())) in (0, False, '')  # unset by default


def test_cpu_runs_set_no_gpu_field():
  p = params_lib.Params(device='cpu', allow_growth=True, gpu_kt_max_bytes=5)
  assert gpu_runtime.config_fields(p) == {}


def test_nondefault_fields_of_the_config_are_data():
  p = gpu_params(allow_growth=True, gpu_kt_max_pending=2, num_inter_threads=6)
  summary = gpu_runtime.summary(gpu_config(p), gpu_runtime.environment(p))
  assert summary['session_config'] == {
    'device_count.CPU': 1,
    'inter_op_parallelism_threads': 6,
    'gpu_options.allow_growth': True,
    'gpu_options.experimental.kernel_tracker_max_pending': 2,
  }
  assert summary['environment']['TF_GPU_THREAD_MODE'] == 'gpu_private'


# ---- environment -------------------------------------------------------------


def test_gpu_environment_defaults_are_the_classic_ones():
  assert gpu_runtime.environment(gpu_params()) == {
    'TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT': '1',
    'TF_ENABLE_WINOGRAD_NONFUSED': '1',
    'TF_SYNC_ON_FINISH': '0',
    'TF_GPU_THREAD_MODE': 'gpu_private',
    'TF_GPU_THREAD_COUNT': '2',
  }


@pytest.mark.parametrize(
  'overrides,expected',
  [
    ({'gpu_thread_mode': 'gpu_private', 'per_gpu_thread_count': 3}, '3'),
    ({'gpu_thread_mode': 'gpu_shared'}, '8'),  # 2 per GPU x 4 GPUs
    ({'gpu_thread_mode': 'gpu_shared', 'per_gpu_thread_count': 3}, '12'),
    ({'gpu_thread_mode': 'global'}, None),
  ],
)
def test_gpu_thread_count(overrides, expected):
  env = gpu_runtime.environment(gpu_params(**overrides))
  assert env['TF_GPU_THREAD_MODE'] == overrides['gpu_thread_mode']
  assert env.get('TF_GPU_THREAD_COUNT') == expected


def test_cudnn_and_sync_switches():
  env = gpu_runtime.environment(
    gpu_params(
      winograd_nonfused=False,
      batchnorm_persistent=False,
      sync_on_finish=True,
      autotune_threshold=2,
    )
  )
  assert env['TF_ENABLE_WINOGRAD_NONFUSED'] is None  # removed
  assert env['TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT'] is None
  assert env['TF_SYNC_ON_FINISH'] == '1'
  assert env['TF_AUTOTUNE_THRESHOLD'] == '2'


def test_mkl_environment_on_cpu():
  p = params_lib.Params(
    device='cpu', mkl=True, kmp_blocktime=3, kmp_settings=0, num_intra_threads=5
  )
  assert gpu_runtime.environment(p) == {
    'KMP_BLOCKTIME': '3',
    'KMP_SETTINGS': '0',
    'KMP_AFFINITY': runtime_fields.CLASSIC_KMP_AFFINITY,
    'OMP_NUM_THREADS': '5',
  }
  unset = dataclasses.replace(p, num_intra_threads=None)
  assert gpu_runtime.environment(unset)['OMP_NUM_THREADS'] is None
  assert gpu_runtime.environment(params_lib.Params(device='cpu')) == {}


def test_apply_environment_sets_and_removes():
  environ = {'TF_ENABLE_WINOGRAD_NONFUSED': '1', 'OTHER': 'x'}
  gpu_runtime.apply_environment(
    {'TF_ENABLE_WINOGRAD_NONFUSED': None, 'TF_GPU_THREAD_MODE': 'global'},
    environ,
  )
  assert environ == {'OTHER': 'x', 'TF_GPU_THREAD_MODE': 'global'}


@pytest.mark.slow  # reads the TensorFlow libraries (~1.2 GB)
def test_tensorflow_reads_the_gpu_variables():
  """Every GPU variable set is a name this TF build's libraries look up."""
  names = set(
    gpu_runtime.environment(gpu_params(autotune_threshold=1, mkl=True))
  )
  libs = glob.glob(os.path.join(os.path.dirname(tf.__file__), 'lib*.so*'))
  found = set()
  for path in libs:
    with (
      open(path, 'rb') as f,
      mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m,
    ):
      found |= {n for n in names if m.find(n.encode()) >= 0}
  kmp = {n for n in names if n.startswith('KMP_')}
  # The wheel has no Intel OpenMP runtime: KMP_* are set as classic, unread.
  assert names - found == kmp and len(kmp) == 3


def test_the_run_sets_the_environment(monkeypatch, capfd):
  # Recorded, so the run's values are undone after the test.
  for name in ('KMP_BLOCKTIME', 'KMP_SETTINGS', 'KMP_AFFINITY'):
    monkeypatch.setenv(name, 'before')
  monkeypatch.setenv('OMP_NUM_THREADS', '1')
  entry.FLAGS.unparse_flags()
  status = entry.main(
    [
      'tf_cnn_benchmarks',
      '--device=cpu',
      '--model=trivial',
      '--batch_size=2',
      '--num_batches=1',
      '--num_warmup_batches=0',
      '--mkl',
      '--kmp_blocktime=7',
    ]
  )
  capfd.readouterr()
  assert status == 0
  assert os.environ['KMP_BLOCKTIME'] == '7'
  assert 'OMP_NUM_THREADS' not in os.environ  # no --num_intra_threads


def test_the_header_shows_config_and_environment(monkeypatch):
  for name in ('KMP_BLOCKTIME', 'KMP_SETTINGS', 'KMP_AFFINITY'):
    monkeypatch.setenv(name, 'before')  # restored after the test
  monkeypatch.setenv('OMP_NUM_THREADS', '1')
  p = params_lib.make_params(
    device='cpu', model='trivial', num_gpus=2, mkl=True, kmp_blocktime=7
  )
  out = io.StringIO()
  bench = benchmark_cnn.BenchmarkCNN(p, out)
  bench.print_header()
  rows = dict(
    line.split(':', 1) for line in out.getvalue().splitlines() if ':' in line
  )
  assert rows['Config'].strip() == 'device_count.CPU=2'
  assert rows['Environment'].strip().startswith('KMP_BLOCKTIME=7, ')
  assert bench.runtime_settings()['environment']['KMP_BLOCKTIME'] == '7'


# ---- thread sizing -----------------------------------------------------------


def test_gpu_threads_are_sized_as_classic():
  # 32 CPUs, 4 GPUs x 2 threads: inter-op 32-8, private pool 32-8-2*4.
  sized = gpu_runtime.resolved_threads(gpu_params(), 'gpu', cpu_count=32)
  assert sized == {
    'num_intra_threads': 1,
    'num_inter_threads': 24,
    'datasets_num_private_threads': 16,
  }


def test_gpu_thread_sizing_keeps_given_values_and_floors_at_one():
  p = gpu_params(
    num_intra_threads=4, num_inter_threads=3, datasets_num_private_threads=2
  )
  assert gpu_runtime.resolved_threads(p, 'gpu', cpu_count=32) == {}
  small = gpu_runtime.resolved_threads(gpu_params(), 'gpu', cpu_count=4)
  assert small['num_inter_threads'] == 1
  assert small['datasets_num_private_threads'] == 1
  no_prefetch = gpu_params(
    gpu_thread_mode='global', datasets_use_prefetch=False
  )
  assert gpu_runtime.resolved_threads(no_prefetch, 'gpu', cpu_count=32) == {
    'num_intra_threads': 1
  }


def test_cpu_runs_keep_their_thread_counts():
  p = params_lib.make_params(device='cpu', model='trivial')
  assert (p.num_intra_threads, p.num_inter_threads) == (None, 0)
  assert p.datasets_num_private_threads is None


# ---- validation and CPU warnings -------------------------------------------


@pytest.mark.parametrize(
  'overrides,flag',
  [
    ({'gpu_thread_mode': 'global', 'per_gpu_thread_count': 2}, 'per_gpu'),
    ({'gpu_thread_mode': 'private'}, 'gpu_thread_mode'),
    ({'gpu_memory_frac_for_testing': 1.5}, 'gpu_memory_frac'),
    ({'gpu_kt_max_bytes': -1}, 'gpu_kt_max_bytes'),
    ({'autotune_threshold': 0}, 'autotune_threshold'),
    ({'gpu_indices': '0,0'}, 'gpu_indices'),
    ({'gpu_indices': '0,a'}, 'gpu_indices'),
    ({'gpu_indices': '0'}, 'gpu_indices'),
    ({'kmp_settings': 2}, 'kmp_settings'),
  ],
)
def test_bad_values_are_one_line(overrides, flag):
  with pytest.raises(params_lib.ParamsError, match='--%s' % flag):
    params_lib.make_params(device='cpu', num_gpus=2, **overrides)


def test_gpu_only_settings_warn_on_cpu():
  p = params_lib.make_params(
    device='cpu', allow_growth=True, gpu_thread_mode='gpu_shared', mkl=True
  )
  assert gpu_runtime.cpu_warnings(p) == [
    'warning: --gpu_thread_mode has no effect on CPU (a GPU-only setting)',
    'warning: --allow_growth has no effect on CPU (a GPU-only setting)',
  ]
  assert gpu_runtime.cpu_warnings(params_lib.make_params(device='cpu')) == []


@pytest.mark.parametrize('flag', gpu_runtime.GPU_ONLY_FIELDS)
def test_each_gpu_only_flag_is_one_warning_on_a_cpu_run(flag, capfd):
  field = params_lib.FIELDS[flag]
  value = {
    'gpu_thread_mode': 'gpu_shared',
    'allow_growth': True,
    'use_unified_memory': True,
    'autotune_threshold': 2,
  }.get(flag)
  if value is None:
    default = field.default
    value = (not default) if isinstance(default, bool) else default + 1
  arg = '--%s=%s' % (flag, value)
  entry.FLAGS.unparse_flags()
  status = entry.main(
    ['tf_cnn_benchmarks', '--device=cpu', '--only_check_args', arg]
  )
  err = capfd.readouterr().err.strip().splitlines()
  assert (status, err) == (
    0,
    ['warning: --%s has no effect on CPU (a GPU-only setting)' % flag],
  )


# ---- item 5: batches prefetched onto the tower devices ---------------------


def _write_cifar(tmp_path):

  from tf_cnn_benchmarks.commands import make_fake_data  # pylint: disable=g-import-not-at-top

  make_fake_data.write_cifar10(str(tmp_path), num_train=8, num_validation=4)
  return str(tmp_path)


def _two_tower_batches(data_dir, device_prefetch):
  options = input_options.InputOptions(
    data_dir, data_name='cifar10', device_prefetch=device_prefetch
  )
  graph, streams = helpers.build_streams(
    options,
    train=False,
    batch_size=2,
    image_size=32,
    num_streams=2,
    host_device='/cpu:0',
    tower_devices=['/cpu:0', '/cpu:1'],
  )
  config = tf1.ConfigProto(device_count={'CPU': 2})
  with tf1.Session(graph=graph, config=config) as sess:
    sess.run(streams.initializer)
    values = sess.run(streams.batches)
  return [images.device for images, _ in streams.batches], values


def test_prefetched_batches_land_on_the_tower_devices(tmp_path):
  data_dir = _write_cifar(tmp_path)
  on_host, host_values = _two_tower_batches(data_dir, 0)
  on_towers, tower_values = _two_tower_batches(data_dir, 1)
  assert on_host == ['/device:CPU:0'] * 2
  assert on_towers == ['/device:CPU:0', '/device:CPU:1']
  for (a, la), (b, lb) in zip(host_values, tower_values):
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(la, lb)
  assert not np.array_equal(tower_values[0][0], tower_values[1][0])


def test_prefetch_to_device_is_for_gpu_runs(tmp_path):
  data_dir = _write_cifar(tmp_path)
  kw = dict(data_dir=data_dir, multi_device_iterator_max_buffer_size=3)
  cpu = params_lib.make_params(
    device='cpu', model='resnet20', data_name='cifar10', **kw
  )
  gpu = dataclasses.replace(cpu, device='gpu')
  off = dataclasses.replace(gpu, datasets_use_prefetch=False)
  assert input_options.InputOptions.from_params(cpu).device_prefetch == 0
  assert input_options.InputOptions.from_params(gpu).device_prefetch == 3
  assert input_options.InputOptions.from_params(off).device_prefetch == 0
