"""scripts/make_fake_data.py: deterministic files, separable images, its CLI."""

import os
import pickle

import pytest
import tensorflow as tf

from tests import helpers
from tests.helpers import build_streams as build
from tests.helpers import input_options as options
from tests.helpers import run_batches
from tests.helpers import tfrecord_records as _records
from tf_cnn_benchmarks.commands import make_fake_data

# ---- make_fake_data ---------------------------------------------------------


def test_fake_imagenet_is_deterministic(tmp_path):
  kw = dict(num_train=3, num_validation=1, num_shards=2, image_size=16, seed=4)
  make_fake_data.write_imagenet(str(tmp_path / 'a'), **kw)
  make_fake_data.write_imagenet(str(tmp_path / 'b'), **kw)
  names = sorted(os.listdir(tmp_path / 'a'))
  assert names == [
    'train-00000-of-00002',
    'train-00001-of-00002',
    'validation-00000-of-00002',
    'validation-00001-of-00002',
  ]
  for name in names:
    assert (tmp_path / 'a' / name).read_bytes() == (
      tmp_path / 'b' / name
    ).read_bytes()
  _, payloads = _records(tmp_path / 'a' / 'train-00001-of-00002')
  feature = tf.train.Example.FromString(payloads[0]).features.feature
  for key in (
    'image/height',
    'image/width',
    'image/format',
    'image/filename',
    'image/class/text',
    'image/class/synset',
    'image/object/bbox/xmin',
  ):
    assert key in feature
  assert feature['image/class/label'].int64_list.value[0] == 3  # example 2


@pytest.mark.parametrize('data_name', ['imagenet', 'cifar10'])
def test_separable_images_are_determined_by_the_label(tmp_path, data_name):
  if data_name == 'imagenet':
    make_fake_data.write_imagenet(
      str(tmp_path),
      num_train=0,
      num_validation=8,
      num_shards=1,
      image_size=24,
      num_classes=4,
      separable=True,
    )
  else:
    make_fake_data.write_cifar10(
      str(tmp_path),
      num_train=5,
      num_validation=8,
      num_classes=4,
      separable=True,
    )
  graph, inputs = build(
    options(str(tmp_path), data_name),
    subset='validation',
    train=False,
    batch_size=8,
    image_size=24 if data_name == 'imagenet' else 32,
  )
  ((images, labels),) = run_batches(graph, inputs, 1)[0]
  means = images.reshape(8, -1).mean(axis=1)
  assert images.reshape(8, -1).std(axis=1).max() < 0.02  # solid
  first = 1 if data_name == 'imagenet' else 0
  for mean, label in zip(means, labels):
    level = make_fake_data.grey_level(label - first, 4) / 255 * 2 - 1
    assert abs(mean - level) < 0.03


def test_cli(tmp_path):
  out = tmp_path / 'c'
  done = helpers.run_script(
    'make_fake_data.py',
    '--data_name=cifar10',
    '--output_dir=%s' % out,
    '--num_train=10',
    '--num_validation=5',
    '--separable',
    '--seed=3',
  )
  assert done.returncode == 0, done.stderr
  assert sorted(os.listdir(out)) == sorted(
    ['batches.meta', 'test_batch'] + ['data_batch_%d' % k for k in range(1, 6)]
  )
  with open(out / 'test_batch', 'rb') as f:
    batch = pickle.load(f, encoding='bytes')
  assert batch[b'data'].shape == (5, 3072) and batch[b'labels'] == list(
    range(5)
  )


def test_cli_rejects_bad_arguments(tmp_path, capsys):
  for bad in ('--num_classes=11', '--image_size=64', '--num_train=-1'):
    with pytest.raises(SystemExit) as e:
      make_fake_data.main(
        ['--data_name=cifar10', '--output_dir=%s' % tmp_path, bad]
      )
    assert e.value.code == 2
    assert bad.split('=')[0] in capsys.readouterr().err
