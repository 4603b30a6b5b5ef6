#!/usr/bin/env python3
"""Writes a small fake ImageNet or CIFAR-10 dataset in the real on-disk format.

  python scripts/make_fake_data.py --data_name=imagenet|cifar10 --output_dir=DIR
      [--num_train=N] [--num_validation=N] [--num_shards=K] [--image_size=S]
      [--num_classes=C] [--separable] [--seed=S]

imagenet: DIR/train-00000-of-0000K .. and DIR/validation-00000-of-0000K ..
  (K = --num_shards for both splits; a shard may be empty when there are
  fewer examples than shards): TFRecords of tf.train.Example with the TF-slim
  field names (image/encoded JPEG, image/class/label, image/object/bbox/*,
  image/height, image/width, image/format, image/filename, ...), S x S
  images, 0 to 2 random boxes each.
cifar10: DIR/data_batch_1..5, DIR/test_batch, DIR/batches.meta: pickled
  dicts as in the CIFAR-10 python version (b'data' uint8 [N, 3072] in CHW
  order, b'labels', b'batch_label', b'filenames'; --image_size is 32).

Labels: example i of a split has label 1 + i % C for imagenet (0 is the
background class of the TF-slim label space) and i % C for cifar10, so with
C >= N every example of a split has its own label.

Images: by default a smooth random colour field plus noise (so JPEGs have
about the size and decode cost of photos). With --separable, every image is
one solid grey level that its label alone determines, spread over 0..255, so
even a linear model separates the classes. ImageNet's training colour
distortion shifts brightness by up to 32/255 (the grey levels stay
separable only when they are further apart, i.e. C <= 4); train with
--nodistortions for a separable ImageNet input with more classes.

Deterministic for a given --seed (and TensorFlow version, which encodes the
JPEGs). Exit status: 0 on success, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys

import numpy as np

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
from tf_cnn_benchmarks.platform import quiet  # noqa: E402


def _asks_for_help_only() -> bool:
  """`make_fake_data.py --help`: answered before TensorFlow loads (seconds)."""
  return __name__ == '__main__' and bool({'-h', '--help'} & set(sys.argv[1:]))


if _asks_for_help_only():
  tf = tf1 = None  # parse_args prints the help and exits
else:
  with quiet.captured_stderr_fd():  # TensorFlow's start-up lines off stderr
    import tensorflow as tf  # pylint: disable=wrong-import-position

  tf1 = tf.compat.v1

CIFAR_BATCHES = 5
CIFAR_SIZE = 32
CIFAR_LABEL_NAMES = (
  b'airplane',
  b'automobile',
  b'bird',
  b'cat',
  b'deer',
  b'dog',
  b'frog',
  b'horse',
  b'ship',
  b'truck',
)
# Protocol 4 stores the pixel array as one raw bytes block, as the original
# (Python 2 cPickle) files do; protocol 2 written by Python 3 would not.
CIFAR_PICKLE_PROTOCOL = 4
JPEG_QUALITY = 90
# Side of the random colour grid the default images are smooth
# interpolations of.
_GRID = 5


def shard_name(split: str, shard: int, num_shards: int) -> str:
  """'train-00001-of-00004': the classic ImageNet TFRecord file name."""
  return '%s-%05d-of-%05d' % (split, shard, num_shards)


def grey_level(label: int, num_labels: int) -> int:
  """The solid grey level (0..255) of a --separable image of `label`.

  Args:
    label: 0-based position of the class among the num_labels classes.
    num_labels: how many classes there are.

  Returns:
    The levels of all classes, evenly spread over 0..255.
  """
  if num_labels <= 1:
    return 128
  return int(round(255.0 * label / (num_labels - 1)))


class _ImageMaker:
  """Makes uint8 images and JPEG bytes in its own graph and session.

  An own graph keeps it usable from eager code (the CLI) and from graph-mode
  code (the tests disable eager execution) alike.
  """

  def __init__(self):
    self._graph = tf.Graph()
    with self._graph.as_default():
      self._grid = tf1.placeholder(tf.float32, [_GRID, _GRID, 3])
      self._noise = tf1.placeholder(tf.float32, [None, None, 3])
      size = tf.shape(self._noise)[:2]
      smooth = tf.image.resize(self._grid[tf.newaxis], size)[0]
      self._smooth = tf.cast(
        tf.clip_by_value(tf.round(smooth + self._noise), 0, 255), tf.uint8
      )
      self._pixels = tf1.placeholder(tf.uint8, [None, None, 3])
      self._jpeg = tf.io.encode_jpeg(self._pixels, quality=JPEG_QUALITY)
    self._session = tf1.Session(graph=self._graph)

  def random_image(self, rng: np.random.Generator, size: int) -> np.ndarray:
    grid = rng.uniform(0, 255, (_GRID, _GRID, 3)).astype(np.float32)
    noise = rng.normal(0, 12, (size, size, 3)).astype(np.float32)
    return self._session.run(
      self._smooth, {self._grid: grid, self._noise: noise}
    )

  def jpeg(self, pixels: np.ndarray) -> bytes:
    return self._session.run(self._jpeg, {self._pixels: pixels})

  def close(self):
    self._session.close()


def _random_boxes(rng: np.random.Generator, count: int) -> np.ndarray:
  """count boxes (ymin, xmin, ymax, xmax), normalised, each inside [0, 1]."""
  start = rng.uniform(0.0, 0.5, (count, 2))
  extent = rng.uniform(0.3, 0.5, (count, 2))
  return np.concatenate([start, start + extent], axis=1).astype(np.float32)


def _float_feature(values):
  return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def _int_feature(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _bytes_feature(values):
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=list(values)))


def imagenet_example(
  jpeg: bytes,
  *,
  label: int,
  height: int,
  width: int,
  boxes: np.ndarray,
  filename: str,
) -> tf.train.Example:
  """A tf.train.Example with the TF-slim ImageNet field names.

  Args:
    jpeg: the encoded image.
    label: class in 1..1000 (TF-slim label space; 0 is background).
    height: image height in pixels.
    width: image width in pixels.
    boxes: float [N, 4] (ymin, xmin, ymax, xmax), normalised.
    filename: stored as image/filename.

  Returns:
    The example.
  """
  synset = b'n%08d' % label
  feature = {
    'image/height': _int_feature([height]),
    'image/width': _int_feature([width]),
    'image/colorspace': _bytes_feature([b'RGB']),
    'image/channels': _int_feature([3]),
    'image/class/label': _int_feature([label]),
    'image/class/synset': _bytes_feature([synset]),
    'image/class/text': _bytes_feature([b'fake class %d' % label]),
    'image/object/bbox/ymin': _float_feature(boxes[:, 0]),
    'image/object/bbox/xmin': _float_feature(boxes[:, 1]),
    'image/object/bbox/ymax': _float_feature(boxes[:, 2]),
    'image/object/bbox/xmax': _float_feature(boxes[:, 3]),
    'image/object/bbox/label': _int_feature([label] * len(boxes)),
    'image/format': _bytes_feature([b'JPEG']),
    'image/filename': _bytes_feature([filename.encode()]),
    'image/encoded': _bytes_feature([jpeg]),
  }
  return tf.train.Example(features=tf.train.Features(feature=feature))


def write_imagenet(
  output_dir: str,
  *,
  num_train: int = 64,
  num_validation: int = 32,
  num_shards: int = 4,
  image_size: int = 256,
  num_classes: int = 1000,
  separable: bool = False,
  seed: int = 0,
) -> dict:
  """Writes fake ImageNet TFRecords (train and validation) into output_dir.

  Example i of a split goes to shard i * num_shards // n (contiguous runs, as
  the classic conversion script writes them) and has label
  1 + i % num_classes.

  Args:
    output_dir: created if missing.
    num_train: training examples.
    num_validation: validation examples.
    num_shards: files per split.
    image_size: every image is image_size x image_size.
    num_classes: labels are 1..num_classes (at most 1000).
    separable: solid grey images whose level the label determines.
    seed: seed of all the randomness.

  Returns:
    {'train': [paths], 'validation': [paths]}.
  """
  _check_counts(num_train, num_validation, num_classes, 1000)
  if num_shards < 1 or image_size < 1:
    raise ValueError('num_shards and image_size must be >= 1')
  os.makedirs(output_dir, exist_ok=True)
  rng = np.random.default_rng(seed)
  maker = _ImageMaker()
  paths = {}
  try:
    for split, count in (('train', num_train), ('validation', num_validation)):
      paths[split] = [
        os.path.join(output_dir, shard_name(split, k, num_shards))
        for k in range(num_shards)
      ]
      examples = _imagenet_examples(
        maker, rng, split, count, image_size, num_classes, separable
      )
      writers = [tf.io.TFRecordWriter(p) for p in paths[split]]
      try:
        for i, example in enumerate(examples):
          writers[i * num_shards // count].write(example.SerializeToString())
      finally:
        for writer in writers:
          writer.close()
  finally:
    maker.close()
  return paths


def _imagenet_examples(
  maker, rng, split, count, image_size, num_classes, separable
):
  """Yields the `count` examples of a split, example i with label
  1 + i % num_classes (drawing from rng in order)."""
  for i in range(count):
    label = 1 + i % num_classes
    if separable:
      level = grey_level(label - 1, num_classes)
      pixels = np.full((image_size, image_size, 3), level, np.uint8)
    else:
      pixels = maker.random_image(rng, image_size)
    yield imagenet_example(
      maker.jpeg(pixels),
      label=label,
      height=image_size,
      width=image_size,
      boxes=_random_boxes(rng, i % 3),
      filename='%s_%06d.JPEG' % (split, i),
    )


def write_cifar10(
  output_dir: str,
  *,
  num_train: int = 500,
  num_validation: int = 100,
  num_classes: int = 10,
  separable: bool = False,
  seed: int = 0,
  pickle_protocol: int = CIFAR_PICKLE_PROTOCOL,
) -> dict:
  """Writes fake CIFAR-10 python batches into output_dir.

  The training examples are split over data_batch_1..5 in order (example i
  of the split is in the batch np.array_split puts it in) and have label
  i % num_classes.

  Args:
    output_dir: created if missing.
    num_train: training examples (over the 5 batches).
    num_validation: examples of test_batch.
    num_classes: labels are 0..num_classes-1 (at most 10).
    separable: solid grey images whose level the label determines.
    seed: seed of all the randomness.
    pickle_protocol: pickle protocol of the batch files.

  Returns:
    {'train': [paths], 'validation': [path], 'images': {'train': uint8
    [num_train, 3072], 'validation': ...}, 'labels': {...}} (the arrays as
    written, for tests).
  """
  _check_counts(num_train, num_validation, num_classes, 10)
  os.makedirs(output_dir, exist_ok=True)
  rng = np.random.default_rng(seed)
  result = {'images': {}, 'labels': {}}
  for split, count in (('train', num_train), ('validation', num_validation)):
    images, labels = _cifar_arrays(rng, count, num_classes, separable)
    result['images'][split] = images
    result['labels'][split] = labels
  splits = _write_cifar_train(output_dir, result, num_train, pickle_protocol)
  path = os.path.join(output_dir, 'test_batch')
  _write_cifar_batch(
    path,
    b'testing batch 1 of 1',
    result['images']['validation'],
    result['labels']['validation'],
    np.arange(num_validation),
    pickle_protocol,
  )
  result['validation'] = [path]
  _write_cifar_meta(output_dir, len(splits[0]), pickle_protocol)
  return result


def _write_cifar_train(output_dir, result, num_train, protocol):
  """Writes data_batch_1..5 (result['train'] gets their paths); returns the
  example indices of each batch."""
  splits = np.array_split(np.arange(num_train), CIFAR_BATCHES)
  result['train'] = []
  for k, indices in enumerate(splits, start=1):
    path = os.path.join(output_dir, 'data_batch_%d' % k)
    _write_cifar_batch(
      path,
      b'training batch %d of %d' % (k, CIFAR_BATCHES),
      result['images']['train'][indices],
      result['labels']['train'][indices],
      indices,
      protocol,
    )
    result['train'].append(path)
  return splits


def _cifar_arrays(rng, count, num_classes, separable):
  """(uint8 images [count, 3072], labels [count]) of one CIFAR-10 split."""
  labels = np.arange(count) % num_classes
  if separable:
    levels = np.array(
      [grey_level(c, num_classes) for c in labels], np.uint8
    ).reshape(-1, 1)
    images = np.repeat(levels, CIFAR_SIZE * CIFAR_SIZE * 3, axis=1)
  else:
    images = rng.integers(
      0, 256, (count, CIFAR_SIZE * CIFAR_SIZE * 3), dtype=np.uint8
    )
  return images, labels


def _write_cifar_meta(output_dir, cases_per_batch, protocol):
  meta = {
    b'label_names': list(CIFAR_LABEL_NAMES),
    b'num_cases_per_batch': cases_per_batch,
    b'num_vis': 3072,
  }
  with open(os.path.join(output_dir, 'batches.meta'), 'wb') as f:
    pickle.dump(meta, f, protocol=protocol)


def _write_cifar_batch(path, batch_label, images, labels, indices, protocol):
  # Bytes keys: what pickle.load(..., encoding='bytes') gives for the
  # original Python 2 files.
  batch = {
    b'batch_label': batch_label,
    b'labels': [int(c) for c in labels],
    b'data': np.ascontiguousarray(images, dtype=np.uint8),
    b'filenames': [b'fake_%06d.png' % i for i in indices],
  }
  with open(path, 'wb') as f:
    pickle.dump(batch, f, protocol=protocol)


def _check_counts(num_train, num_validation, num_classes, max_classes):
  if num_train < 0 or num_validation < 0:
    raise ValueError('num_train and num_validation must be >= 0')
  if not 1 <= num_classes <= max_classes:
    raise ValueError(
      'num_classes=%d: must be in 1..%d' % (num_classes, max_classes)
    )


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
    description=__doc__.splitlines()[0],
    formatter_class=argparse.RawDescriptionHelpFormatter,
    epilog='\n'.join(__doc__.splitlines()[1:]),
  )
  parser.add_argument(
    '--data_name', required=True, choices=('imagenet', 'cifar10')
  )
  parser.add_argument('--output_dir', required=True)
  for name, help_text in (
    ('num_train', 'training examples (default 64 imagenet, 500 cifar10)'),
    (
      'num_validation',
      'validation examples (default 32 imagenet, 100 cifar10)',
    ),
  ):
    parser.add_argument('--' + name, type=int, default=None, help=help_text)
  parser.add_argument(
    '--num_shards', type=int, default=4, help='imagenet: files per split'
  )
  for name, help_text in (
    ('image_size', 'image side (default 256 imagenet; cifar10: 32 only)'),
    ('num_classes', 'labels used (default 1000 imagenet, 10 cifar10)'),
  ):
    parser.add_argument('--' + name, type=int, default=None, help=help_text)
  parser.add_argument(
    '--separable',
    action='store_true',
    help='solid grey images determined by the label',
  )
  parser.add_argument('--seed', type=int, default=0)
  return parser


def parse_args(argv):
  """The parsed command line (argparse.Namespace)."""
  parser = _parser()
  args = parser.parse_args(argv)
  imagenet = args.data_name == 'imagenet'
  for name, imagenet_default, cifar_default in (
    ('num_train', 64, 500),
    ('num_validation', 32, 100),
    ('image_size', 256, CIFAR_SIZE),
    ('num_classes', 1000, 10),
  ):
    if getattr(args, name) is None:
      setattr(args, name, imagenet_default if imagenet else cifar_default)
  if not imagenet and args.image_size != CIFAR_SIZE:
    parser.error(
      '--image_size=%d: cifar10 images are %d x %d'
      % (args.image_size, CIFAR_SIZE, CIFAR_SIZE)
    )
  max_classes = 1000 if imagenet else 10
  if not 1 <= args.num_classes <= max_classes:
    parser.error(
      '--num_classes=%d: must be in 1..%d' % (args.num_classes, max_classes)
    )
  for name, least in (
    ('num_train', 0),
    ('num_validation', 0),
    ('num_shards', 1),
    ('image_size', 1),
  ):
    if getattr(args, name) < least:
      parser.error(
        '--%s=%d: must be >= %d' % (name, getattr(args, name), least)
      )
  return args


def main(argv=None) -> int:
  args = parse_args(sys.argv[1:] if argv is None else argv)
  common = dict(
    num_train=args.num_train,
    num_validation=args.num_validation,
    num_classes=args.num_classes,
    separable=args.separable,
    seed=args.seed,
  )
  if args.data_name == 'imagenet':
    paths = write_imagenet(
      args.output_dir,
      num_shards=args.num_shards,
      image_size=args.image_size,
      **common,
    )
  else:
    paths = write_cifar10(args.output_dir, **common)
  print(
    'wrote %d train and %d validation examples (%s) in %d + %d files '
    'under %s'
    % (
      args.num_train,
      args.num_validation,
      args.data_name,
      len(paths['train']),
      len(paths['validation']),
      args.output_dir,
    )
  )
  return 0


if __name__ == '__main__':
  sys.exit(main())
