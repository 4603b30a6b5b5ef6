"""CIFAR-10 python batch files: their layout, checked, and their streams.

A batch file is unpickled once in Python with only numpy's array classes
allowed (a hostile file cannot run code); what is kept is where its pixel
block lies and its labels. The stream then reads the pixels in place with
FixedLengthRecordDataset (the labels, 1 byte each, are graph constants), so
nothing is fed or held in Python and the pipeline also runs on a remote
task's CPU. tower_batches raises DataError for a file that is not a readable
batch and for a stream with less than one batch.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import pickle
from typing import Sequence

import numpy as np
import tensorflow as tf

from tf_cnn_benchmarks.inputs import preprocessing
from tf_cnn_benchmarks.inputs import stream_steps
from tf_cnn_benchmarks.inputs.input_options import DataError
from tf_cnn_benchmarks.inputs.input_options import InputOptions


@dataclasses.dataclass(frozen=True)
class CifarFile:
  """Where the pixels of one CIFAR-10 batch file lie, and its labels."""

  path: str
  header_bytes: int
  footer_bytes: int
  labels: np.ndarray  # uint8 [num_records]

  @property
  def num_records(self) -> int:
    return len(self.labels)


# The only globals a CIFAR-10 batch may name: numpy's array reconstruction
# (old and new module names) and the codec Python 3 uses for protocol-2
# bytes. Anything else is refused, so a hostile file cannot run code.
_PICKLE_GLOBALS = frozenset(
  [
    ('numpy.core.multiarray', '_reconstruct'),
    ('numpy._core.multiarray', '_reconstruct'),
    ('numpy.core.numeric', '_frombuffer'),
    ('numpy._core.numeric', '_frombuffer'),
    ('numpy', 'ndarray'),
    ('numpy', 'dtype'),
    ('_codecs', 'encode'),
  ]
)


class _ArrayUnpickler(pickle.Unpickler):
  """Unpickles numpy arrays only, none larger than the file itself.

  Every byte of a real batch's arrays is stored in the file, so an array
  asked for with more bytes than the file holds is a crafted one (a 100-byte
  file can ask numpy for gigabytes of empty array): refused before numpy
  allocates it.
  """

  def __init__(self, raw: bytes, **kwargs):
    super().__init__(io.BytesIO(raw), **kwargs)
    self.max_array_bytes = len(raw)

  def find_class(self, module, name):
    if (module, name) not in _PICKLE_GLOBALS:
      raise pickle.UnpicklingError('refusing to load %s.%s' % (module, name))
    if module.startswith('numpy.core.'):
      # numpy 2 keeps the old name only as a warning shim.
      module = 'numpy._core.' + module[len('numpy.core.') :]
    found = super().find_class(module, name)
    if name == 'ndarray':  # called (ndarray(shape)) or passed as a type
      return _bounded_ndarray_type(self.max_array_bytes)
    if name == '_reconstruct':  # _reconstruct(subtype, shape, dtype)
      return functools.partial(
        _bounded_reconstruct, found, self.max_array_bytes
      )
    return found


def _bounded_ndarray_type(max_bytes: int) -> type:
  """np.ndarray, whose call makes no array of more than max_bytes."""

  class BoundedNdarray(np.ndarray):
    def __new__(cls, shape, dtype=float, *args, **kwargs):
      del cls  # a plain ndarray is made
      _check_array_bytes(shape, dtype, max_bytes)
      return np.ndarray.__new__(np.ndarray, shape, dtype, *args, **kwargs)

  return BoundedNdarray


def _bounded_reconstruct(reconstruct, max_bytes, subtype, shape, dtype):
  """numpy's _reconstruct, of a plain ndarray no larger than max_bytes."""
  _check_array_bytes(shape, dtype, max_bytes)
  if issubclass(subtype, np.ndarray):
    subtype = np.ndarray
  return reconstruct(subtype, shape, dtype)


def _check_array_bytes(shape, dtype, max_bytes: int) -> None:
  """UnpicklingError unless an array of shape and dtype fits in max_bytes."""
  try:
    dims = [int(d) for d in np.atleast_1d(np.asarray(shape, dtype=object))]
    size = np.dtype(dtype).itemsize
  except (TypeError, ValueError) as e:
    raise pickle.UnpicklingError('bad array shape or dtype (%s)' % e) from None
  for d in dims:  # Python ints: no overflow on a crafted shape
    size *= d
  if min(dims, default=0) < 0 or size > max_bytes:
    raise pickle.UnpicklingError(
      'an array of shape %s %s (%d bytes) in a file of %d bytes'
      % (dims, np.dtype(dtype), size, max_bytes)
    )


_cifar_cache: dict = {}


def cifar_file(path: str, num_classes: int) -> CifarFile:
  """Reads one batch file's layout (cached by path, size and mtime)."""
  stat = tf.io.gfile.stat(path)
  key = (path, stat.length, stat.mtime_nsec)
  if key not in _cifar_cache:
    _cifar_cache[key] = _read_cifar_file(path, num_classes)
  return _cifar_cache[key]


def _read_cifar_file(path: str, num_classes: int) -> CifarFile:
  with tf.io.gfile.GFile(path, 'rb') as f:
    raw = f.read()

  def bad(what):
    return DataError('%s: not a CIFAR-10 python batch: %s' % (path, what))

  data, labels = _unpickled_batch(raw, bad)
  record = preprocessing.CIFAR_RECORD_BYTES
  if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != record:
    raise bad(
      "'data' is %s %s, not uint8 [N, %d]"
      % (data.dtype, list(data.shape), record)
    )
  labels = np.asarray(labels)
  if labels.shape != (data.shape[0],):
    raise bad('%d labels for %d images' % (labels.size, data.shape[0]))
  if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
    raise bad('labels outside 0..%d' % (num_classes - 1))
  pixels = np.ascontiguousarray(data).tobytes()
  offset = _find_block(raw, pixels)
  if offset < 0:
    raise bad(
      'its pixels are not stored as one raw block (pickled with '
      'protocol 0/1, or protocol 2 by Python 3?); re-save it with '
      'pickle protocol 4'
    )
  return CifarFile(
    path, offset, len(raw) - offset - len(pixels), labels.astype(np.uint8)
  )


def _unpickled_batch(raw: bytes, bad):
  """The 'data' array and 'labels' of a pickled batch (bad(what): error)."""
  try:
    batch = _ArrayUnpickler(raw, encoding='bytes').load()
  except Exception as e:  # pylint: disable=broad-except
    # Unpickling fails in many ways (EOFError, UnpicklingError, ValueError,
    # ...); each means the same thing here.
    raise bad('unpickling failed (%s: %s)' % (type(e).__name__, e)) from None
  if not isinstance(batch, dict):
    raise bad('holds a %s, not a dict' % type(batch).__name__)
  batch = {
    k.decode('latin-1') if isinstance(k, bytes) else k: v
    for k, v in batch.items()
  }
  data, labels = batch.get('data'), batch.get('labels')
  if not isinstance(data, np.ndarray) or labels is None:
    raise bad("no 'data' array or no 'labels'")
  return data, labels


def _find_block(raw: bytes, block: bytes) -> int:
  """Offset of `block` in `raw`, -1 if absent."""
  if not block:
    return 0
  view = memoryview(raw)
  probe = block[:4096]
  start = raw.find(probe)
  while start >= 0:
    if view[start : start + len(block)] == block:
      return start
    start = raw.find(probe, start + 1)
  return -1


def _cifar_records(cifar_files: Sequence[CifarFile], stream, num_streams):
  """(dataset of (pixels, label) of this stream's part, its example count)."""
  chosen, shard_records = stream_steps.shard(cifar_files, stream, num_streams)
  parts = []
  count = 0
  for f in chosen:
    pixels = tf.data.FixedLengthRecordDataset(
      f.path,
      preprocessing.CIFAR_RECORD_BYTES,
      header_bytes=f.header_bytes,
      footer_bytes=f.footer_bytes,
    )
    part = tf.data.Dataset.zip(
      (pixels, tf.data.Dataset.from_tensor_slices(f.labels))
    )
    if shard_records:
      part = part.shard(num_streams, stream)
      count += len(range(stream, f.num_records, num_streams))
    else:
      count += f.num_records
    parts.append(part)
  return functools.reduce(lambda a, b: a.concatenate(b), parts), count


def cifar_stream(
  options: InputOptions,
  cifar_files: Sequence[CifarFile],
  spec: stream_steps.StreamSpec,
  subset: str,
) -> tf.data.Dataset:
  """The batches of one stream of CIFAR-10 (DataError: under one batch).

  The labels were checked when the files were read.
  """
  dataset, count = _cifar_records(cifar_files, spec.stream, spec.num_streams)
  if count < (1 if spec.train else spec.batch_size):
    raise DataError(
      '--data_dir=%s: input stream %d of %d holds %d %s examples, fewer '
      'than one batch of %d'
      % (
        options.data_dir,
        spec.stream,
        spec.num_streams,
        count,
        subset,
        spec.batch_size,
      )
    )
  stream_seed = spec.seed(options)

  def example(position, record):
    pixels, label = record
    image = preprocessing.cifar_record_image(pixels)
    # Classic: --distortions is the crop and flip.
    if spec.train and options.distortions:
      image = preprocessing.cifar_train_image(
        image,
        image_size=spec.image_size,
        seed=stream_steps.example_seed(stream_seed, position),
      )
    else:
      image = preprocessing.cifar_eval_image(image, image_size=spec.image_size)
    return image, tf.cast(label, tf.int32)

  # The whole stream fits in the shuffle buffer (all streams together hold
  # the 150 MB training set once): a full shuffle every epoch.
  return stream_steps.finish(
    dataset, example, options, spec, shuffle_buffer=count
  )
