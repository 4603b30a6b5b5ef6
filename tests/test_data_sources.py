"""Real-data input: fake ImageNet / CIFAR-10 on disk through the tower streams.

Example identity is read back from the data itself: fake ImageNet example i
has label 1 + i (1000 classes, fewer examples), and CIFAR-10 evaluation
images come through unchanged, so their pixels say which example they are.
The failures while running are in test_input_failures.py, make_fake_data in
test_make_fake_data.py.
"""

import os
import pickle

import numpy as np
import pytest
import tensorflow as tf

from tests import helpers
from tests.helpers import CIFAR_TRAIN
from tests.helpers import CIFAR_VALIDATION
from tests.helpers import IMAGENET_SHARDS
from tests.helpers import IMAGENET_VALIDATION
from tests.helpers import MODEL_SIZE
from tests.helpers import build_streams as build
from tests.helpers import input_options as options
from tests.helpers import run_batches
from tf_cnn_benchmarks.commands import make_fake_data
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.inputs import data_dir_checks
from tf_cnn_benchmarks.inputs import input_options
from tf_cnn_benchmarks.inputs import preprocessing

tf1 = tf.compat.v1


def labels_per_tower(steps, tower):
  return [int(x) for step in steps for x in step[tower][1]]


# ---- shapes, dtypes, ranges -------------------------------------------------


@pytest.mark.parametrize('data_name', ['imagenet', 'cifar10'])
@pytest.mark.parametrize('data_format', ['NHWC', 'NCHW'])
@pytest.mark.parametrize('train', [True, False])
def test_batches_have_the_model_shape_and_range(
  stream_imagenet_dir, stream_cifar, data_name, data_format, train
):
  data_dir = stream_imagenet_dir if data_name == 'imagenet' else stream_cifar[0]
  opts = options(data_dir, data_name, data_format=data_format)
  size = 32 if data_name == 'cifar10' else MODEL_SIZE
  graph, inputs = build(
    opts,
    subset='train' if train else 'validation',
    train=train,
    batch_size=3,
    num_streams=2,
  )
  expected = [3, size, size, 3] if data_format == 'NHWC' else [3, 3, size, size]
  num_classes = 1001 if data_name == 'imagenet' else 10
  assert len(inputs.batches) == 2
  for images, labels in inputs.batches:
    assert images.shape.as_list() == expected  # static
    assert images.dtype == tf.float32 and labels.dtype == tf.int32
    assert labels.shape.as_list() == [3]
  steps = run_batches(graph, inputs, 2)
  assert len(steps) == 2
  for step in steps:
    for images, labels in step:
      assert list(images.shape) == expected
      assert images.min() >= -1.0 and images.max() <= 1.0
      assert images.max() - images.min() > 0.1  # not a constant
      assert ((0 <= labels) & (labels < num_classes)).all()


@pytest.mark.parametrize('train', [True, False])
def test_every_resize_method(stream_imagenet_dir, train):
  graph = tf.Graph()
  with graph.as_default():
    batches = [
      helpers.add_streams(
        options(stream_imagenet_dir, resize_method=method),
        subset='train' if train else 'validation',
        train=train,
      )
      for method in preprocessing.RESIZE_METHODS
    ]
    with tf1.Session() as sess:
      sess.run([b.initializer for b in batches])
      results = sess.run([b.batches[0][0] for b in batches])
  for images in results:
    assert images.shape == (4, MODEL_SIZE, MODEL_SIZE, 3)
    assert -1.0 <= images.min() and images.max() <= 1.0
  # Same examples and seeds: the methods differ only in how they resize.
  assert not np.array_equal(results[1], results[3])  # nearest vs bicubic


def test_eval_image_is_the_central_crop():
  # A non-square image whose outer 1/16 per side is white, the rest black:
  # the central 87.5% crop is all black (borders on JPEG block edges).
  pixels = np.zeros((128, 256, 3), np.uint8)
  pixels[:8], pixels[-8:], pixels[:, :16], pixels[:, -16:] = 255, 255, 255, 255
  graph = tf.Graph()
  with graph.as_default():
    encoded = tf.io.encode_jpeg(tf.constant(pixels), quality=100)
    image = preprocessing.imagenet_eval_image(
      encoded,
      image_size=28,
      resize_method='bilinear',
      index=tf.constant(0, tf.int64),
    )
    with tf1.Session() as sess:
      result = sess.run(image)
  assert result.shape == (28, 28, 3)
  assert result.max() < -0.9  # black, scaled to -1


def test_cifar_eval_images_are_the_stored_pixels(stream_cifar):
  data_dir, written = stream_cifar
  graph, inputs = build(
    options(data_dir, 'cifar10'),
    subset='validation',
    train=False,
    batch_size=CIFAR_VALIDATION,
  )
  ((images, labels),) = run_batches(graph, inputs, 1)[0]
  stored = (
    written['images']['validation'].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
  )
  np.testing.assert_allclose((images + 1) / 2 * 255, stored, atol=1e-3)
  np.testing.assert_array_equal(labels, written['labels']['validation'])


def test_training_is_reproducible_and_seeded(stream_imagenet_dir):
  def first_batch(seed):
    graph, inputs = build(options(stream_imagenet_dir, seed=seed), batch_size=4)
    return run_batches(graph, inputs, 1)[0][0]

  a, b, c = first_batch(5), first_batch(5), first_batch(6)
  np.testing.assert_array_equal(a[0], b[0])
  np.testing.assert_array_equal(a[1], b[1])
  assert not np.array_equal(a[0], c[0])


# ---- streams are disjoint ---------------------------------------------------


@pytest.mark.parametrize('num_streams', [2, 3, 6])  # 6 > 4 files: records
def test_imagenet_training_streams_are_disjoint(
  stream_imagenet_dir, num_streams
):
  graph, inputs = build(
    options(stream_imagenet_dir), batch_size=4, num_streams=num_streams
  )
  # 4 files of 12: streams of 24 | 24, 12, 12 | 8 examples; stay within the
  # first epoch of the smallest.
  steps = run_batches(graph, inputs, {2: 6, 3: 3, 6: 2}[num_streams])
  seen = [labels_per_tower(steps, t) for t in range(num_streams)]
  for t, labels in enumerate(seen):
    assert len(set(labels)) == len(labels), (t, labels)  # one epoch: no repeat
    for u in range(t):
      assert not set(labels) & set(seen[u]), (t, u)


def test_imagenet_worker_streams_are_disjoint(stream_imagenet_dir):
  # Two workers of 2 towers each: streams 0, 1 and 2, 3 of 4.
  seen = []
  for first in (0, 2):
    graph, inputs = build(
      options(stream_imagenet_dir),
      batch_size=4,
      first_stream=first,
      num_streams=4,
      num_local_towers=2,
    )
    steps = run_batches(graph, inputs, 3)
    seen += [set(labels_per_tower(steps, t)) for t in range(2)]
  for t in range(4):
    assert len(seen[t]) == 12
    for u in range(t):
      assert not seen[t] & seen[u]


@pytest.mark.parametrize('num_streams', [1, 2, 3, 5])  # 5 > 4 files: records
def test_imagenet_eval_is_one_pass_covering_each_stream_part(
  stream_imagenet_dir, num_streams
):
  graph, inputs = build(
    options(stream_imagenet_dir),
    subset='validation',
    train=False,
    batch_size=2,
    num_streams=num_streams,
  )
  steps = run_batches(graph, inputs, 100)
  # 20 examples in 4 files of 5: streams get files {0,2},{1,3} (10 each,
  # 5 batches) with 2 streams; 2,1,1 files with 3 streams (the pass ends
  # with the shortest, 2 batches); 1 record of each file with 5 streams.
  expected_batches = {1: 10, 2: 5, 3: 2, 5: 2}[num_streams]
  assert len(steps) == expected_batches
  labels = [labels_per_tower(steps, t) for t in range(num_streams)]
  flat = [x for ls in labels for x in ls]
  assert len(flat) == len(set(flat)) == expected_batches * 2 * num_streams
  if num_streams == 1:
    assert sorted(flat) == list(range(1, IMAGENET_VALIDATION + 1))


def test_eval_pass_ends_and_restarts(stream_imagenet_dir):
  # 20 examples, batch 3: 6 batches (2 examples dropped), then OutOfRange;
  # the initializer starts the pass again.
  graph, inputs = build(
    options(stream_imagenet_dir), subset='validation', train=False, batch_size=3
  )
  with tf1.Session(graph=graph) as sess:
    for _ in range(2):
      sess.run(inputs.initializer)
      labels = []
      for _ in range(6):
        labels += list(sess.run(inputs.batches[0][1]))
      with pytest.raises(tf.errors.OutOfRangeError):
        sess.run(inputs.batches)
      assert len(set(labels)) == 18


def _example_index(written, split):
  table = {row.tobytes(): i for i, row in enumerate(written['images'][split])}

  def index_of(image):
    pixels = np.round((image + 1) / 2 * 255).astype(np.uint8)
    return table[pixels.transpose(2, 0, 1).reshape(-1).tobytes()]

  return index_of


@pytest.mark.parametrize('num_streams', [2, 7])  # 7 > 5 files: records
def test_cifar_streams_are_disjoint_and_cover_the_split(
  stream_cifar, num_streams
):
  data_dir, written = stream_cifar
  graph, inputs = build(
    options(data_dir, 'cifar10'),
    subset='train',
    train=False,
    batch_size=1,
    num_streams=num_streams,
  )
  index_of = _example_index(written, 'train')
  seen = [[] for _ in range(num_streams)]
  with tf1.Session(graph=graph) as sess:
    sess.run(inputs.initializer)
    for t, (images, _) in enumerate(inputs.batches):
      try:
        while True:
          seen[t].append(index_of(sess.run(images)[0]))
      except tf.errors.OutOfRangeError:
        pass
  flat = [i for s in seen for i in s]
  assert sorted(flat) == list(range(CIFAR_TRAIN))  # disjoint and complete
  assert all(seen)


def test_cifar_training_streams_are_disjoint(stream_cifar):
  # Training crops and flips the images, so use labels: with 10 classes and
  # file sharding, stream 0 reads data_batch_1/3/5 and stream 1 data_batch_2/4;
  # each batch file of 20 holds 2 of every label, so compare counts instead:
  # both streams see one epoch of their own files' examples.
  data_dir, written = stream_cifar
  graph, inputs = build(
    options(data_dir, 'cifar10'), batch_size=20, num_streams=2
  )
  steps = run_batches(graph, inputs, 2)
  counts = [
    np.bincount(labels_per_tower(steps, t), minlength=10) for t in range(2)
  ]
  # One epoch of stream 0 is 60 examples (3 files), so the first 40 have no
  # label more than 6 times; stream 1's 40 are exactly its 2 files: 4 each.
  assert counts[0].max() <= 6
  np.testing.assert_array_equal(counts[1], np.full(10, 4))


# ---- errors before the graph ------------------------------------------------


def _assert_one_line_naming(error, *parts):
  message = str(error.value)
  assert '\n' not in message
  for part in parts:
    assert str(part) in message, message


def test_missing_dir(tmp_path):
  path = tmp_path / 'nowhere'
  with pytest.raises(input_options.DataError) as e:
    data_dir_checks.check_data_dir(options(str(path)), 'train')
  _assert_one_line_naming(e, '--data_dir=%s' % path, 'no such directory')


def test_not_a_dir(tmp_path):
  path = tmp_path / 'file'
  path.write_text('x')
  with pytest.raises(input_options.DataError) as e:
    data_dir_checks.check_data_dir(options(str(path)), 'train')
  _assert_one_line_naming(e, path, 'not a directory')


@pytest.mark.parametrize('data_name', ['imagenet', 'cifar10'])
def test_empty_dir(tmp_path, data_name):
  with pytest.raises(input_options.DataError) as e:
    data_dir_checks.check_data_dir(options(str(tmp_path), data_name), 'train')
  _assert_one_line_naming(e, tmp_path, 'empty')


def test_no_matching_imagenet_files(tmp_path):
  (tmp_path / 'train.tfrecord').write_text('x')
  (tmp_path / 'validation-00000-of-00001').write_text('x')
  with pytest.raises(input_options.DataError) as e:
    data_dir_checks.check_data_dir(options(str(tmp_path)), 'train')
  _assert_one_line_naming(e, tmp_path, 'no files matching train-*-of-*')


def test_imagenet_dir_without_validation(stream_imagenet_dir, tmp_path):
  for name in os.listdir(stream_imagenet_dir):
    if name.startswith('train-'):
      os.symlink(os.path.join(stream_imagenet_dir, name), tmp_path / name)
  assert (
    len(data_dir_checks.check_data_dir(options(str(tmp_path)), 'train'))
    == IMAGENET_SHARDS
  )
  with pytest.raises(input_options.DataError) as e:
    data_dir_checks.check_data_dir(options(str(tmp_path)), 'validation')
  _assert_one_line_naming(e, tmp_path, 'validation-*-of-*')


def test_cifar_dir_missing_a_batch(stream_cifar, tmp_path):
  for name in os.listdir(stream_cifar[0]):
    if name != 'data_batch_3':
      os.symlink(os.path.join(stream_cifar[0], name), tmp_path / name)
  assert data_dir_checks.check_data_dir(
    options(str(tmp_path), 'cifar10'), 'validation'
  )
  with pytest.raises(input_options.DataError) as e:
    data_dir_checks.check_data_dir(options(str(tmp_path), 'cifar10'), 'train')
  _assert_one_line_naming(e, tmp_path, 'missing data_batch_3')
  assert 'data_batch_1' not in str(e.value)


def test_wrong_data_name_gets_a_hint(stream_cifar):
  with pytest.raises(input_options.DataError) as e:
    data_dir_checks.check_data_dir(
      options(stream_cifar[0], 'imagenet'), 'train'
    )
  _assert_one_line_naming(e, stream_cifar[0], '--data_name=cifar10')


def test_cifar_file_that_is_not_a_batch(stream_cifar, tmp_path):
  for name in os.listdir(stream_cifar[0]):
    os.symlink(os.path.join(stream_cifar[0], name), tmp_path / name)
  os.remove(tmp_path / 'test_batch')
  (tmp_path / 'test_batch').write_bytes(b'not a pickle at all')
  opts = options(str(tmp_path), 'cifar10')
  files = data_dir_checks.check_data_dir(opts, 'validation')
  with pytest.raises(input_options.DataError) as e:
    build(opts, subset='validation', train=False)
  _assert_one_line_naming(e, files[0], 'not a CIFAR-10 python batch')


def test_cifar_pickle_naming_other_code_is_refused(tmp_path):
  path = tmp_path / 'test_batch'
  # A global outside numpy's array classes (harmless here) must not load.
  path.write_bytes(pickle.dumps({b'data': os.path.join, b'labels': []}))
  for k in range(1, 6):
    (tmp_path / ('data_batch_%d' % k)).write_bytes(b'')
  with pytest.raises(input_options.DataError) as e:
    build(options(str(tmp_path), 'cifar10'), subset='validation', train=False)
  _assert_one_line_naming(e, path, 'refusing to load')


@pytest.mark.parametrize('protocol', [2, 3, 4, 5])
def test_cifar_pickle_protocols(tmp_path, protocol):
  written = make_fake_data.write_cifar10(
    str(tmp_path),
    num_train=5,
    num_validation=8,
    seed=3,
    pickle_protocol=protocol,
  )
  opts = options(str(tmp_path), 'cifar10')
  if protocol == 2:
    # Python 3 writes bytes under protocol 2 as latin-1 text: no raw block.
    with pytest.raises(input_options.DataError) as e:
      build(opts, subset='validation', train=False)
    _assert_one_line_naming(e, 'test_batch', 'protocol 4')
    return
  graph, inputs = build(opts, subset='validation', train=False, batch_size=8)
  ((images, labels),) = run_batches(graph, inputs, 1)[0]
  index_of = _example_index(written, 'validation')
  assert [index_of(image) for image in images] == list(range(8))
  np.testing.assert_array_equal(labels, np.arange(8) % 10)


def test_cifar_stream_smaller_than_a_batch(stream_cifar):
  with pytest.raises(input_options.DataError) as e:
    build(
      options(stream_cifar[0], 'cifar10'),
      subset='validation',
      train=False,
      batch_size=CIFAR_VALIDATION + 1,
    )
  _assert_one_line_naming(e, stream_cifar[0], 'fewer than one batch')


@pytest.mark.parametrize(
  'flag,value',
  [
    ('prefetch_buffer_size', -1),
    ('interleave_cycle_length', 0),
    ('num_private_threads', 0),
    ('resize_method', 'lanczos'),
  ],
)
def test_bad_input_options(flag, value):
  with pytest.raises(input_options.DataError) as e:
    options('/x', **{flag: value})
  assert '\n' not in str(e.value) and str(value) in str(e.value)


def test_options_from_params():
  p = params_lib.make_params(
    device='cpu',
    data_dir='/data',
    data_name='cifar10',
    model='trivial',
    distortions=False,
    resize_method='area',
    datasets_num_private_threads=3,
    datasets_prefetch_buffer_size=4,
    datasets_use_caching=True,
    datasets_parallel_interleave_cycle_length=5,
    datasets_repeat_cached_sample=True,
    tf_random_seed=9,
  )
  assert input_options.InputOptions.from_params(p) == options(
    '/data',
    'cifar10',
    distortions=False,
    resize_method='area',
    num_private_threads=3,
    prefetch_buffer_size=4,
    use_caching=True,
    interleave_cycle_length=5,
    repeat_cached_sample=True,
    seed=9,
    data_format='NHWC',
  )


def test_caching_private_threads_and_cached_sample(stream_imagenet_dir):
  opts = options(
    stream_imagenet_dir,
    use_caching=True,
    num_private_threads=2,
    prefetch_buffer_size=3,
    interleave_cycle_length=2,
  )
  graph, inputs = build(opts, batch_size=4, num_streams=2)
  steps = run_batches(graph, inputs, 8)  # past one epoch (6 batches)
  assert len(steps) == 8
  # The classic meaning: one raw record repeated, each copy preprocessed
  # (the training crop still differs per example).
  opts = options(stream_imagenet_dir, repeat_cached_sample=True)
  graph, inputs = build(opts, batch_size=4)
  steps = run_batches(graph, inputs, 3)
  labels = [int(x) for step in steps for x in step[0][1]]
  assert len(labels) == 12 and len(set(labels)) == 1
  images = np.concatenate([step[0][0] for step in steps])
  assert not np.array_equal(images[0], images[1])
