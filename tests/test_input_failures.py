"""Input failures while running (and before): one line naming the bad file.

Fake ImageNet shards are corrupted record by record (checksums, truncation,
a JPEG cut short or replaced, a missing image, a label out of range) and
input_failures.describe_input_failure must name the file and record.
"""

import os
from pathlib import Path

import pytest
import tensorflow as tf

from tests import helpers
from tests.helpers import IMAGENET_SHARDS
from tests.helpers import IMAGENET_TRAIN
from tests.helpers import IMAGENET_VALIDATION
from tests.helpers import build_streams as build
from tests.helpers import input_options as options
from tests.helpers import tfrecord_records as _records
from tf_cnn_benchmarks.inputs import input_failures

tf1 = tf.compat.v1


# ---- bad data while running -------------------------------------------------


def _copy_imagenet(src, dst):
  for name in os.listdir(src):
    Path(dst, name).write_bytes(Path(src, name).read_bytes())
  return os.path.join(dst, 'train-00002-of-%05d' % IMAGENET_SHARDS)


def _rewrite_example(path, index, change):
  _, payloads = _records(path)
  example = tf.train.Example.FromString(payloads[index])
  change(example.features.feature)
  payloads[index] = example.SerializeToString()
  with tf.io.TFRecordWriter(path) as writer:
    for payload in payloads:
      writer.write(payload)


def _flip_data_byte(path, index):
  offsets, _ = _records(path)
  raw = bytearray(Path(path).read_bytes())
  raw[offsets[index] + 12 + 30] ^= 0xFF
  Path(path).write_bytes(bytes(raw))


def _truncate(path, index):
  offsets, _ = _records(path)
  raw = Path(path).read_bytes()
  Path(path).write_bytes(raw[: offsets[index] + 40])


def _set_encoded(make_bytes):
  def change(feature):
    encoded = feature['image/encoded'].bytes_list.value[0]
    feature['image/encoded'].bytes_list.value[0] = make_bytes(encoded)

  return change


def _drop_image(feature):
  del feature['image/encoded']


def _set_label(feature):
  feature['image/class/label'].int64_list.value[0] = 4000


CORRUPTIONS = {
  'bad_crc': (_flip_data_byte, 'corrupted record at byte'),
  'truncated_file': (_truncate, 'truncated record at byte'),
  'truncated_jpeg': (
    lambda p, i: _rewrite_example(
      p, i, _set_encoded(lambda b: b[: len(b) // 2])
    ),
    'record 3: ',
  ),
  'not_a_jpeg': (
    lambda p, i: _rewrite_example(
      p, i, _set_encoded(lambda b: b'GIF89a' + b[6:])
    ),
    'record 3: image/encoded is missing or not a JPEG',
  ),
  'no_image': (
    lambda p, i: _rewrite_example(p, i, _drop_image),
    'record 3: image/encoded',
  ),
  'bad_label': (
    lambda p, i: _rewrite_example(p, i, _set_label),
    'record 3: image/class/label',
  ),
}


@pytest.mark.parametrize('train', [True, False])
@pytest.mark.parametrize('corruption', sorted(CORRUPTIONS))
def test_bad_record_mid_run_is_named(
  stream_imagenet_dir, tmp_path, corruption, train
):
  corrupt, expected = CORRUPTIONS[corruption]
  bad_file = _copy_imagenet(stream_imagenet_dir, tmp_path)
  corrupt(bad_file, 3)  # 12 records per file: fails after a few batches
  opts = options(str(tmp_path))
  graph, inputs = build(opts, train=train, batch_size=2, num_streams=1)
  with tf1.Session(graph=graph) as sess:
    sess.run(inputs.initializer)
    with pytest.raises(tf.errors.OpError) as e:
      for _ in range(IMAGENET_TRAIN):  # more than one epoch: bounded
        sess.run(inputs.batches)
  assert not isinstance(e.value, tf.errors.OutOfRangeError)
  line = input_failures.describe_input_failure(opts, 'train', e.value)
  assert line is not None and '\n' not in line
  assert bad_file in line and expected in line, line


def test_other_errors_are_not_input_errors(stream_imagenet_dir):
  graph = tf.Graph()
  with graph.as_default():
    check = tf.debugging.Assert(tf.constant(False), ['not the input'])
    with tf1.Session() as sess:
      with pytest.raises(tf.errors.InvalidArgumentError) as e:
        sess.run(check)
  assert (
    input_failures.describe_input_failure(
      options(stream_imagenet_dir), 'train', e.value
    )
    is None
  )


def test_cifar_file_changed_under_the_pipeline(stream_cifar, tmp_path):
  for name in os.listdir(stream_cifar[0]):
    Path(tmp_path, name).write_bytes(Path(stream_cifar[0], name).read_bytes())
  opts = options(str(tmp_path), 'cifar10')
  graph, inputs = build(opts, subset='validation', train=False)
  batch = tmp_path / 'test_batch'
  batch.write_bytes(batch.read_bytes()[:5000])
  with tf1.Session(graph=graph) as sess:
    sess.run(inputs.initializer)
    with pytest.raises(tf.errors.OpError) as e:
      for _ in range(10):
        sess.run(inputs.batches)
  line = input_failures.describe_input_failure(opts, 'validation', e.value)
  assert line is not None and '\n' not in line and str(tmp_path) in line


def test_tfrecord_framing_check_accepts_good_files(stream_imagenet_dir):
  for name in sorted(os.listdir(stream_imagenet_dir)):
    path = os.path.join(stream_imagenet_dir, name)
    assert input_failures.tfrecord_problem(path) is None
    offsets, _ = _records(path)
    for offset in offsets[:3]:  # data checksums, the slow part
      assert input_failures.tfrecord_problem(path, offset + 12) is None


def test_failure_is_described_for_its_own_subset_only(
  stream_imagenet_dir, tmp_path
):
  _copy_imagenet(stream_imagenet_dir, tmp_path)
  bad_file = str(tmp_path / ('validation-00001-of-%05d' % IMAGENET_SHARDS))
  _rewrite_example(bad_file, 2, _set_encoded(lambda b: b[: len(b) // 2]))
  opts = options(str(tmp_path))
  graph = tf.Graph()
  with graph.as_default(), tf1.name_scope('outer'):
    streams = [
      helpers.add_streams(opts, subset=subset, train=False, batch_size=2)
      for subset in ('train', 'validation')
    ]
  with tf1.Session(graph=graph) as sess:
    sess.run([s.initializer for s in streams])
    sess.run(streams[0].batches)
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
      for _ in range(IMAGENET_VALIDATION):
        sess.run(streams[1].batches)
  assert input_failures.describe_input_failure(opts, 'train', e.value) is None
  line = input_failures.describe_input_failure(opts, 'validation', e.value)
  assert bad_file in line and 'record 2: ' in line, line
