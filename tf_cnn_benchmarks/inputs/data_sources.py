"""Real-data input: one tf.data stream per tower, from ImageNet or CIFAR-10.

What the driver does with it:

  options = data_sources.InputOptions.from_params(params)
  files = data_sources.check_data_dir(options, 'train')  # DataError -> exit 2
  # In the graph:
  inputs = data_sources.tower_batches(
      options, subset='train', train=True, batch_size=B, image_size=S,
      first_stream=W * T, num_streams=NUM_WORKERS * T, num_local_towers=T,
      host_device=CPU_OF_THIS_PROCESS, files=files)
  # inputs.batches[t] is tower t's (images, labels); run inputs.initializer
  # once in the session before the first step (and again before each
  # evaluation pass). On a tf.errors.OpError from sess.run:
  #   line = data_sources.describe_input_failure(options, subset, error)
  # not None: the input failed; print the line and fail the run.

Streams. Local tower t reads global stream first_stream + t of num_streams.
Every stream gets a disjoint part of the split: whole files when there are at
least as many files as streams (stream s reads files s, s + n, s + 2n, ...),
else records (stream s reads records s, s + n, ... of every file, which costs
each stream a read of every file). Training streams shuffle (files, then a
buffer of records) seeded with seed + stream and repeat forever; evaluation
streams read their part once in order and end with OutOfRangeError. Batches
drop the remainder so shapes are static: an evaluation stream yields
floor(examples of the stream / batch size) batches, and a step that fetches
every tower ends the pass with the shortest stream.

Randomness is stateless: each example's crop, flip and colour distortion come
from the seed (seed + stream, position of the example in the stream), so a
run is reproducible whatever the thread timing.

Pipeline of a stream (on host_device):
  ImageNet: file names -> [train: shuffle files] -> parallel interleave of
  TFRecordDataset (each record carries its file name and index; order
  deterministic unless --datasets_sloppy_parallel_interleave) ->
  [cache] -> [train: shuffle, repeat] -> parallel map (parse, check, decode
  and preprocess; preprocessing.py) -> batch -> [NCHW transpose] ->
  [train: repeat one cached batch] -> prefetch.
  CIFAR-10: the pixel block of each pickled batch is read in place with
  FixedLengthRecordDataset (its byte offset is found once in Python; the
  labels, 1 byte each, are graph constants), then the same steps from
  [cache] on. Nothing is fed or held in Python: the pipeline also runs on a
  remote task's CPU.

datasets_use_caching caches the examples as read, before the random
preprocessing: ImageNet serialized records (still JPEG: decoded ImageNet
would need about half a terabyte), CIFAR-10 raw pixels.
datasets_repeat_cached_sample (training only; an evaluation pass would never
end) repeats the stream's first raw record forever, as the classic harness
did: no file reads, but every example is still decoded and preprocessed.

Bad data.
  Before any graph: check_data_dir raises DataError for a missing, non-
  directory or empty --data_dir, no matching ImageNet shards, missing CIFAR-10
  batch files; tower_batches raises DataError for a CIFAR-10 file that is
  not a readable batch (it is unpickled with only numpy's array classes
  allowed) and for a CIFAR-10 stream with less than one batch. Both run
  before any session.
  While running, input_failures.describe_input_failure turns an input
  error into one line naming the bad file (see there).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import io
import os
import pickle
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from tf_cnn_benchmarks.config import datasets
from tf_cnn_benchmarks.inputs import preprocessing

tf1 = tf.compat.v1

SUBSETS = ('train', 'validation')
DATA_NAMES = ('imagenet', 'cifar10')
DATA_FORMATS = ('NHWC', 'NCHW')
# Name scope of every input op: how describe_input_failure knows an error
# came from the input pipeline.
INPUT_SCOPE = 'real_input'
DEFAULT_INTERLEAVE_CYCLE_LENGTH = 10
# Serialized ImageNet records (~110 KB each) a process's training streams
# hold in their shuffle buffers together: about 1 GB.
IMAGENET_SHUFFLE_RECORDS = 10000
TFRECORD_READ_BUFFER_BYTES = 8 << 20
CIFAR_FILES = {
  'train': tuple('data_batch_%d' % k for k in range(1, 6)),
  'validation': ('test_batch',),
}
IMAGENET_PATTERN = '%s-*-of-*'
# Tag of the assertion messages of bad records (see _bad_record_data).
BAD_RECORD_TAG = 'BAD_INPUT_RECORD'


class DataError(Exception):
  """Unusable input data or input flags; the message is one line naming the
  path (or the flag) and what is wrong."""


@dataclasses.dataclass(frozen=True)
class InputOptions:
  """Input settings of a run (the real-data and datasets_* flags)."""

  data_dir: Optional[str]
  data_name: str = 'imagenet'
  distortions: bool = True
  resize_method: str = 'bilinear'
  num_private_threads: Optional[int] = None
  prefetch_buffer_size: int = 1
  use_caching: bool = False
  interleave_cycle_length: Optional[int] = None
  # ImageNet: the file interleave may leave deterministic order; files it
  # opens ahead (None: tf.data autotunes).
  sloppy_interleave: bool = False
  interleave_prefetch: Optional[int] = None
  repeat_cached_sample: bool = False
  seed: int = 1234
  data_format: str = 'NHWC'
  # Copy each tower's batches onto its device ahead of the step, holding this
  # many there (--datasets_use_prefetch, --multi_device_iterator_max_buffer_
  # size); 0: the tower reads them from the host.
  device_prefetch: int = 0
  # ImageNet: the classic preprocessing flags (input_settings.py).
  imagenet_style: preprocessing.ImagenetStyle = preprocessing.ImagenetStyle()

  def __post_init__(self):
    checks = (
      (
        self.data_name in DATA_NAMES,
        '--data_name=%s: must be one of %s'
        % (self.data_name, ', '.join(DATA_NAMES)),
      ),
      (
        self.resize_method in preprocessing.RESIZE_METHODS,
        '--resize_method=%s: must be one of %s'
        % (self.resize_method, ', '.join(preprocessing.RESIZE_METHODS)),
      ),
      (
        self.data_format in DATA_FORMATS,
        '--data_format=%s: must be one '
        'of %s' % (self.data_format, ', '.join(DATA_FORMATS)),
      ),
      (
        self.num_private_threads is None or self.num_private_threads >= 1,
        '--datasets_num_private_threads=%s: must be >= 1 (or unset)'
        % self.num_private_threads,
      ),
      (
        self.prefetch_buffer_size >= 0,
        '--datasets_prefetch_buffer_size=%s: must be >= 0'
        % self.prefetch_buffer_size,
      ),
      (
        self.interleave_cycle_length is None
        or self.interleave_cycle_length >= 1,
        '--datasets_parallel_interleave_cycle_length=%s: must be >= 1 (or '
        'unset)' % self.interleave_cycle_length,
      ),
    )
    for ok, message in checks:
      if not ok:
        raise DataError(message)

  @classmethod
  def from_params(cls, params) -> 'InputOptions':
    """The options of a resolved params.Params."""
    return cls(
      data_dir=params.data_dir,
      data_name=params.data_name,
      distortions=params.distortions,
      resize_method=params.resize_method,
      num_private_threads=params.datasets_num_private_threads,
      prefetch_buffer_size=params.datasets_prefetch_buffer_size,
      use_caching=params.datasets_use_caching,
      interleave_cycle_length=(
        params.datasets_parallel_interleave_cycle_length
      ),
      sloppy_interleave=params.datasets_sloppy_parallel_interleave,
      interleave_prefetch=params.datasets_parallel_interleave_prefetch,
      repeat_cached_sample=params.datasets_repeat_cached_sample,
      seed=params.tf_random_seed,
      # As classic: GPU runs only (the CPU towers share the host's memory).
      device_prefetch=(
        params.multi_device_iterator_max_buffer_size
        if params.datasets_use_prefetch and params.device == 'gpu'
        else 0
      ),
      data_format=params.data_format,
      imagenet_style=preprocessing.imagenet_style(params),
    )

  @property
  def cycle_length(self) -> int:
    """Files each stream reads in parallel."""
    return self.interleave_cycle_length or DEFAULT_INTERLEAVE_CYCLE_LENGTH


@dataclasses.dataclass(frozen=True)
class TowerInputs:
  """What tower_batches built.

  Attributes:
    batches: per local tower, (images, labels): images float32 in [-1, 1],
      [B, H, W, C] (NHWC) or [B, C, H, W] (NCHW); labels int32 [B].
    initializer: starts every stream from its beginning; run it once before
      the first batch, and again to restart an evaluation pass.
    files: the files the streams read (all streams together).
  """

  batches: tuple
  initializer: tf.Operation
  files: tuple


# ---- checks before the graph ------------------------------------------------


def check_data_dir(options: InputOptions, subset: str) -> list[str]:
  """Checks --data_dir holds `subset` of the dataset; returns its files.

  Only names and kinds of files are checked here (cheap); the content is read
  by the pipeline.

  Args:
    options: the input options.
    subset: 'train' or 'validation'.

  Returns:
    The files of the subset, sorted: ImageNet shards matching
    '<subset>-*-of-*', or the CIFAR-10 batch files.

  Raises:
    DataError: the directory is unusable for this subset.
  """
  if subset not in SUBSETS:
    raise ValueError(
      'subset=%r: must be one of %s' % (subset, ', '.join(SUBSETS))
    )
  data_dir = options.data_dir
  if not data_dir:
    raise DataError('--data_dir: not set (real data needs a dataset directory)')
  flag = '--data_dir=%s' % data_dir
  if not tf.io.gfile.exists(data_dir):
    raise DataError('%s: no such directory' % flag)
  if not tf.io.gfile.isdir(data_dir):
    raise DataError('%s: not a directory' % flag)
  names = sorted(tf.io.gfile.listdir(data_dir))
  # gfile lists sub-directories with a trailing '/' on some file systems.
  names = [n.rstrip('/') for n in names]
  if not names:
    raise DataError(
      '%s: the directory is empty (expected %s)'
      % (flag, _expected(options.data_name, subset))
    )
  if options.data_name == 'imagenet':
    pattern = IMAGENET_PATTERN % subset
    files = [
      os.path.join(data_dir, n)
      for n in names
      if fnmatch.fnmatchcase(n, pattern)
    ]
    files = [f for f in files if not tf.io.gfile.isdir(f)]
    if not files:
      raise DataError(
        '%s: no files matching %s (ImageNet TFRecords)%s'
        % (flag, pattern, _other_dataset_hint(names, 'imagenet'))
      )
    for path in files:
      cut = tfrecord_cut(path)
      if cut is not None:
        raise DataError(
          '%s: truncated record at byte %d (header cut off)' % (path, cut)
        )
    return files
  wanted = CIFAR_FILES[subset]
  missing = [n for n in wanted if n not in names]
  if missing:
    raise DataError(
      '%s: missing %s (CIFAR-10 python batches)%s'
      % (flag, ', '.join(missing), _other_dataset_hint(names, 'cifar10'))
    )
  files = [os.path.join(data_dir, n) for n in wanted]
  for path in files:
    if tf.io.gfile.isdir(path):
      raise DataError(
        '%s: %s is a directory, not a CIFAR-10 batch file' % (flag, path)
      )
  return files


def tfrecord_cut(path: str) -> Optional[int]:
  """Where a TFRecord file is cut inside a record header, or None.

  TensorFlow's reader takes a file cut inside a record's 12-byte header for
  a shorter file and drops the records after the cut without a word; a cut
  inside the data it reports itself (input_failures names it). Walking the
  headers (12 bytes read per record, no checksums) finds the first kind
  before the run starts.
  """
  opener = tf.io.gfile.GFile if '://' in path else open
  with opener(path, 'rb') as f:
    f.seek(0, os.SEEK_END)
    size = f.tell()
    pos = 0
    while pos < size:
      f.seek(pos)
      header = f.read(12)
      if len(header) < 12:
        return pos
      pos += 12 + int.from_bytes(header[:8], 'little') + 4
  return None


def _expected(data_name: str, subset: str) -> str:
  if data_name == 'imagenet':
    return 'ImageNet TFRecords %s' % (IMAGENET_PATTERN % subset)
  return 'CIFAR-10 python batches %s' % ', '.join(CIFAR_FILES[subset])


def _other_dataset_hint(names: Sequence[str], data_name: str) -> str:
  """'; it holds ... use --data_name=...' when the files fit the other set."""
  if data_name == 'imagenet':
    cifar_names = CIFAR_FILES['train'] + CIFAR_FILES['validation']
    if any(n in names for n in cifar_names):
      return '; it holds CIFAR-10 batches: use --data_name=cifar10'
  elif any(
    fnmatch.fnmatchcase(n, IMAGENET_PATTERN % s) for n in names for s in SUBSETS
  ):
    return '; it holds ImageNet TFRecords: use --data_name=imagenet'
  return ''


# ---- CIFAR-10 batch files ---------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _CifarFile:
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
  def find_class(self, module, name):
    if (module, name) not in _PICKLE_GLOBALS:
      raise pickle.UnpicklingError('refusing to load %s.%s' % (module, name))
    if module.startswith('numpy.core.'):
      # numpy 2 keeps the old name only as a warning shim.
      module = 'numpy._core.' + module[len('numpy.core.') :]
    return super().find_class(module, name)


_cifar_cache: dict = {}


def _cifar_file(path: str, num_classes: int) -> _CifarFile:
  """Reads one batch file's layout (cached by path, size and mtime)."""
  stat = tf.io.gfile.stat(path)
  key = (path, stat.length, stat.mtime_nsec)
  if key not in _cifar_cache:
    _cifar_cache[key] = _read_cifar_file(path, num_classes)
  return _cifar_cache[key]


def _read_cifar_file(path: str, num_classes: int) -> _CifarFile:
  with tf.io.gfile.GFile(path, 'rb') as f:
    raw = f.read()

  def bad(what):
    return DataError('%s: not a CIFAR-10 python batch: %s' % (path, what))

  try:
    batch = _ArrayUnpickler(io.BytesIO(raw), encoding='bytes').load()
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
  return _CifarFile(
    path, offset, len(raw) - offset - len(pixels), labels.astype(np.uint8)
  )


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


# ---- the streams ------------------------------------------------------------


def tower_batches(
  options: InputOptions,
  *,
  subset: str,
  train: bool,
  batch_size: int,
  image_size: int,
  first_stream: int,
  num_streams: int,
  num_local_towers: int,
  host_device: str,
  files: Optional[Sequence[str]] = None,
  tower_devices: Optional[Sequence[str]] = None,
) -> TowerInputs:
  """Builds one input stream per local tower in the current default graph.

  Args:
    options: the input options.
    subset: 'train' or 'validation': which files to read.
    train: training preprocessing, shuffle and repeat; else evaluation
      preprocessing and one pass in order.
    batch_size: examples per tower batch.
    image_size: side of the model's square input.
    first_stream: global stream of local tower 0 (e.g. worker index * towers
      per worker).
    num_streams: streams of the whole run (all workers' towers).
    num_local_towers: towers of this graph; tower t reads stream
      first_stream + t.
    host_device: where the pipelines run: this process's CPU, e.g.
      '/device:CPU:0' or '/job:worker/replica:0/task:1/device:CPU:0'.
    files: the subset's files as check_data_dir returned them (None: check
      again).
    tower_devices: the local towers' devices; with options.device_prefetch
      each stream's batches are copied onto its tower's device ahead of use.

  Returns:
    TowerInputs: batches, the initializer op to run, the files.

  Raises:
    DataError: the data directory or a CIFAR-10 file is unusable, or a
      stream would hold no batch.
  """
  if first_stream < 0 or first_stream + num_local_towers > num_streams:
    raise ValueError(
      'streams [%d, %d) not within the %d streams'
      % (first_stream, first_stream + num_local_towers, num_streams)
    )
  if batch_size < 1 or image_size < 1 or num_local_towers < 1:
    raise ValueError('batch_size, image_size and num_local_towers must be >= 1')
  files = list(files) if files is not None else check_data_dir(options, subset)
  num_classes = datasets.get(options.data_name).num_classes
  cifar_files = None
  if options.data_name == 'cifar10':
    cifar_files = [_cifar_file(p, num_classes) for p in files]
  batches, initializers = [], []
  # The subset in the scope tells describe_input_failure which pipeline
  # failed.
  with (
    tf.device(host_device),
    tf1.name_scope(INPUT_SCOPE),
    tf1.name_scope(subset),
  ):
    for tower in range(num_local_towers):
      stream = first_stream + tower
      with tf1.name_scope('tower_%d' % tower):
        common = dict(
          train=train,
          stream=stream,
          num_streams=num_streams,
          batch_size=batch_size,
          image_size=image_size,
          num_classes=num_classes,
        )
        dataset = _stream(
          options, files, cifar_files, subset, num_local_towers, common
        )
        iterator = _iterator(dataset, options, tower_devices, tower)
        images, labels = iterator.get_next()
      batches.append((images, labels))
      initializers.append(iterator.initializer)
    initializer = tf.group(*initializers, name='initializer')
  return TowerInputs(tuple(batches), initializer, tuple(files))


def _iterator(dataset, options: InputOptions, tower_devices, tower: int):
  """The stream's iterator: on the host, or on the tower's device when the
  batches are prefetched there (the iterator of a copy lives on its target).
  """
  if not (options.device_prefetch and tower_devices):
    return tf1.data.make_initializable_iterator(dataset)
  device = tower_devices[tower]
  dataset = dataset.apply(
    tf.data.experimental.prefetch_to_device(
      device, buffer_size=options.device_prefetch
    )
  )
  with tf.device(device):
    return tf1.data.make_initializable_iterator(dataset)


def _stream(
  options: InputOptions,
  files,
  cifar_files,
  subset: str,
  num_local_towers: int,
  common: dict,
) -> tf.data.Dataset:
  """The dataset of one tower's stream (CIFAR-10 or ImageNet)."""
  if cifar_files is not None:
    return _cifar_stream(options, cifar_files, subset=subset, **common)
  # The towers of one process share the shuffle memory.
  return _imagenet_stream(
    options,
    files,
    shuffle_records=max(1, IMAGENET_SHUFFLE_RECORDS // num_local_towers),
    **common,
  )


def _shard(items: Sequence, stream: int, num_streams: int):
  """(items this stream reads, whether records must be sharded instead)."""
  if len(items) >= num_streams:
    return list(items[stream::num_streams]), False
  return list(items), True


def _bad_record_data(path, index, what: str) -> list:
  """Assert data that input_failures reads back out of the error message."""
  return [BAD_RECORD_TAG, path, 'record', index, what]


def checked_imagenet_record(path, index, serialized, num_classes: int):
  """Parses a record; the JPEG and label checks name the file when failing.

  Returns:
    (encoded, label int32, bboxes), each depending on both checks.
  """
  parsed = preprocessing.parse_imagenet_record(serialized)
  label_ok = tf.logical_and(parsed.label >= 0, parsed.label < num_classes)
  checks = [
    tf.debugging.Assert(
      tf.io.is_jpeg(parsed.encoded),
      _bad_record_data(path, index, 'image/encoded is missing or not a JPEG'),
    ),
    tf.debugging.Assert(
      label_ok,
      _bad_record_data(
        path,
        index,
        'image/class/label is missing or outside 0..%d' % (num_classes - 1),
      )
      + ['label', parsed.label],
    ),
  ]
  with tf.control_dependencies(checks):
    return (
      tf.identity(parsed.encoded),
      tf.cast(parsed.label, tf.int32),
      tf.identity(parsed.bboxes),
    )


def _imagenet_stream(
  options: InputOptions,
  files: Sequence[str],
  *,
  train: bool,
  stream: int,
  num_streams: int,
  batch_size: int,
  image_size: int,
  num_classes: int,
  shuffle_records: int,
) -> tf.data.Dataset:
  files, shard_records = _shard(files, stream, num_streams)
  stream_seed = options.seed + stream
  dataset = tf.data.Dataset.from_tensor_slices(files)
  if train:
    dataset = dataset.shuffle(
      len(files), seed=stream_seed, reshuffle_each_iteration=True
    )

  def read_file(path):
    records = tf.data.TFRecordDataset(
      path, buffer_size=TFRECORD_READ_BUFFER_BYTES
    ).enumerate()
    if shard_records:
      # By index within each file, so the shards stay disjoint whatever
      # order each stream reads the files in.
      records = records.shard(num_streams, stream)
    return records.map(lambda index, record: (path, index, record))

  dataset = _interleave(
    dataset,
    read_file,
    options,
    cycle_length=min(options.cycle_length, len(files)),
  )

  def example(position, record):
    path, index, serialized = record
    encoded, label, bboxes = checked_imagenet_record(
      path, index, serialized, num_classes
    )
    if train:
      seed = tf.stack([tf.constant(stream_seed, tf.int64), position])
      image = preprocessing.imagenet_train_image(
        encoded,
        bboxes,
        image_size=image_size,
        resize_method=options.resize_method,
        distortions=options.distortions,
        seed=seed,
        index=position,
        style=options.imagenet_style,
      )
    else:
      image = preprocessing.imagenet_eval_image(
        encoded,
        image_size=image_size,
        resize_method=options.resize_method,
        index=position,
        style=options.imagenet_style,
      )
    return image, label

  return _finish(
    dataset,
    example,
    options,
    train=train,
    seed=stream_seed,
    shuffle_buffer=shuffle_records,
    batch_size=batch_size,
  )


def _interleave(dataset, read_file, options: InputOptions, *, cycle_length):
  """The parallel interleave of the files' records.

  Deterministic order unless --datasets_sloppy_parallel_interleave.
  --datasets_parallel_interleave_prefetch needs the classic transformation,
  tf.data.experimental.parallel_interleave (Dataset.interleave offers no
  prefetch_input_elements).
  """
  if options.interleave_prefetch is not None:
    return dataset.apply(
      tf.data.experimental.parallel_interleave(
        read_file,
        cycle_length=cycle_length,
        block_length=1,
        sloppy=options.sloppy_interleave,
        prefetch_input_elements=options.interleave_prefetch,
      )
    )
  return dataset.interleave(
    read_file,
    cycle_length=cycle_length,
    block_length=1,
    num_parallel_calls=tf.data.AUTOTUNE,
    deterministic=not options.sloppy_interleave,
  )


def _cifar_stream(
  options: InputOptions,
  cifar_files: Sequence[_CifarFile],
  *,
  subset: str,
  train: bool,
  stream: int,
  num_streams: int,
  batch_size: int,
  image_size: int,
  num_classes: int,
) -> tf.data.Dataset:
  del num_classes  # Labels were checked when the files were read.
  chosen, shard_records = _shard(cifar_files, stream, num_streams)
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
  if count < (1 if train else batch_size):
    raise DataError(
      '--data_dir=%s: input stream %d of %d holds %d %s examples, fewer '
      'than one batch of %d'
      % (options.data_dir, stream, num_streams, count, subset, batch_size)
    )
  dataset = functools.reduce(lambda a, b: a.concatenate(b), parts)
  stream_seed = options.seed + stream

  def example(position, record):
    pixels, label = record
    image = preprocessing.cifar_record_image(pixels)
    if train and options.distortions:  # classic: --distortions is crop/flip
      seed = tf.stack([tf.constant(stream_seed, tf.int64), position])
      image = preprocessing.cifar_train_image(
        image, image_size=image_size, seed=seed
      )
    else:
      image = preprocessing.cifar_eval_image(image, image_size=image_size)
    return image, tf.cast(label, tf.int32)

  # The whole stream fits in the shuffle buffer (all streams together hold
  # the 150 MB training set once): a full shuffle every epoch.
  return _finish(
    dataset,
    example,
    options,
    train=train,
    seed=stream_seed,
    shuffle_buffer=count,
    batch_size=batch_size,
  )


def _finish(
  dataset: tf.data.Dataset,
  example,
  options: InputOptions,
  *,
  train: bool,
  seed: int,
  shuffle_buffer: int,
  batch_size: int,
) -> tf.data.Dataset:
  """The steps every stream shares, from the cache on (see the module doc)."""
  if options.use_caching:
    dataset = dataset.cache()
  if train and options.repeat_cached_sample:
    # Classic: one raw record repeated; decoding and preprocessing are still
    # done (and measured) for every example.
    dataset = dataset.take(1).cache().repeat()
  elif train:
    dataset = dataset.shuffle(
      shuffle_buffer, seed=seed, reshuffle_each_iteration=True
    )
    dataset = dataset.repeat()
  # The position seeds the example's randomness and picks its round-robin
  # resize method.
  dataset = dataset.enumerate()
  dataset = dataset.map(
    example, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
  )
  dataset = dataset.batch(batch_size, drop_remainder=True)
  if options.data_format == 'NCHW':
    dataset = dataset.map(
      lambda images, labels: (tf.transpose(images, [0, 3, 1, 2]), labels)
    )
  if options.prefetch_buffer_size:
    dataset = dataset.prefetch(options.prefetch_buffer_size)
  data_options = tf.data.Options()
  # Transformations that name their own order (the map) keep it.
  data_options.deterministic = not options.sloppy_interleave
  if options.num_private_threads:
    data_options.threading.private_threadpool_size = options.num_private_threads
  return dataset.with_options(data_options)
