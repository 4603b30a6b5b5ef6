"""The driver on real-format data (fake ImageNet TFRecords, CIFAR-10 pickles).

The input pipeline itself is tested in test_data_sources.py; these tests run
whole benchmarks on it: training in two managers, the separable-set eval,
resume, and the bad-data exits of the command line.
"""

import io
import os

import numpy as np
import pytest

from tests import helpers
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.commands import make_fake_data
from tf_cnn_benchmarks.config import params as params_lib


@pytest.fixture(scope='module')
def imagenet_dir(tmp_path_factory):
  return helpers.fake_imagenet(
    tmp_path_factory,
    num_train=32,
    num_validation=16,
    num_shards=4,
    image_size=64,
    seed=1,
  )


@pytest.fixture(scope='module')
def cifar_dir(tmp_path_factory):
  path, _ = helpers.fake_cifar10(
    tmp_path_factory, num_train=100, num_validation=40, seed=1
  )
  return path


@pytest.fixture(scope='module')
def separable_imagenet_dir(tmp_path_factory):
  return helpers.separable_imagenet(tmp_path_factory)


def run(**kw):
  base = dict(
    device='cpu', num_warmup_batches=1, num_batches=3, display_every=100
  )
  p = params_lib.make_params(**{**base, **kw})
  return benchmark_cnn.run_benchmark(p, out=io.StringIO())


@pytest.mark.parametrize('variable_update', ['parameter_server', 'replicated'])
def test_trains_on_fake_imagenet(imagenet_dir, variable_update):
  result = run(
    model='trivial',
    data_dir=imagenet_dir,
    batch_size=4,
    num_gpus=2,
    variable_update=variable_update,
  )
  assert np.all(np.isfinite(result.losses))
  assert result.run.data_dir == imagenet_dir
  assert result.global_batch_size == 8


@pytest.mark.parametrize('variable_update', ['parameter_server', 'replicated'])
def test_trains_on_fake_cifar10(cifar_dir, variable_update):
  result = run(
    model='resnet20',
    data_name='cifar10',
    data_dir=cifar_dir,
    batch_size=8,
    num_gpus=2,
    variable_update=variable_update,
  )
  assert np.all(np.isfinite(result.losses))


def test_separable_set_reaches_top1_of_one(separable_imagenet_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  common = dict(
    model='lenet',
    data_dir=separable_imagenet_dir,
    batch_size=8,
    train_dir=train_dir,
    distortions=False,
  )
  run(
    num_batches=40,
    num_warmup_batches=0,
    optimizer='sgd',
    init_learning_rate=0.01,
    **common,
  )
  ev = run(eval=True, num_eval_batches=2, **common)
  assert ev.evaluation.eval_examples == 16  # one pass of the validation split
  assert ev.evaluation.checkpoint_step == 40
  assert ev.evaluation.top_1_accuracy == 1.0


def test_resume_on_real_data_starts_at_the_saved_step(cifar_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  common = dict(
    model='trivial',
    data_name='cifar10',
    data_dir=cifar_dir,
    batch_size=10,
    num_warmup_batches=0,
    init_learning_rate=0.0005,
    train_dir=train_dir,
    datasets_repeat_cached_sample=True,
  )
  first = run(num_batches=5, **common)
  second = run(num_batches=2, **common)
  assert second.training.start_step == 5
  # The same (cached) record every step and weights that move a little per
  # step: the first loss after resuming is one step from the last one saved,
  # not the loss of freshly initialised weights (four steps back).
  assert abs(second.losses[0] - first.losses[-1]) < 0.5 * abs(
    first.losses[-1] - first.losses[0]
  )
  assert abs(first.losses[-1] - first.losses[0]) > 0.01 * first.losses[0]


def _cli(*flags):
  return helpers.run_benchmark(
    '--device=cpu',
    '--num_batches=2',
    '--num_warmup_batches=0',
    *flags,
    timeout=180,
  )


def _one_error_line(proc, *needles):
  assert proc.returncode == 2, proc.stderr[-2000:]
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1, proc.stderr
  for needle in needles:
    assert needle in lines[0], lines[0]


def test_missing_data_dir_is_one_line(tmp_path):
  missing = str(tmp_path / 'nope')
  _one_error_line(_cli('--model=trivial', '--data_dir=' + missing), missing)


def test_data_dir_without_matching_files_is_one_line(tmp_path):
  (tmp_path / 'images.txt').write_text('not a record')
  _one_error_line(
    _cli('--model=trivial', '--data_dir=%s' % tmp_path),
    str(tmp_path),
    'train-*-of-*',
  )


def test_cifar_dir_missing_a_batch_is_one_line(tmp_path):
  make_fake_data.write_cifar10(str(tmp_path), num_train=50, num_validation=10)
  os.remove(tmp_path / 'data_batch_3')
  _one_error_line(
    _cli('--model=trivial', '--data_name=cifar10', '--data_dir=%s' % tmp_path),
    'data_batch_3',
  )


def test_corrupt_jpeg_mid_run_names_the_file(tmp_path):
  make_fake_data.write_imagenet(
    str(tmp_path), num_train=8, num_validation=4, num_shards=2, image_size=32
  )
  shard = tmp_path / 'train-00001-of-00002'
  data = bytearray(shard.read_bytes())
  start = data.find(b'\xff\xd8\xff')  # the first JPEG in the shard
  data[start : start + 64] = b'\x00' * 64  # its header: not a JPEG any more
  shard.write_bytes(bytes(data))
  # The record's CRC no longer matches either: whichever check fires first,
  # the message names the shard.
  _one_error_line(
    _cli('--model=trivial', '--batch_size=2', '--data_dir=%s' % tmp_path),
    str(shard),
  )
