"""ImageNet TFRecord shards: the record checks and the stream of records.

Each record carries its file name and index through the pipeline, so a
record whose JPEG or label is bad fails a tf.debugging.Assert whose message
names the file and record (input_failures reads it back, by BAD_RECORD_TAG).
The files are read by a parallel interleave, in deterministic order unless
--datasets_sloppy_parallel_interleave.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from tf_cnn_benchmarks.inputs import preprocessing
from tf_cnn_benchmarks.inputs import stream_steps
from tf_cnn_benchmarks.inputs.input_options import InputOptions

# Serialized ImageNet records (~110 KB each) a process's training streams
# hold in their shuffle buffers together: about 1 GB.
IMAGENET_SHUFFLE_RECORDS = 10000
TFRECORD_READ_BUFFER_BYTES = 8 << 20
# Tag of the assertion messages of bad records (see _bad_record_data).
BAD_RECORD_TAG = 'BAD_INPUT_RECORD'


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


def _records(
  options: InputOptions,
  files: Sequence[str],
  *,
  train: bool,
  stream: int,
  num_streams: int,
) -> tf.data.Dataset:
  """(path, index, serialized record) of this stream's part of the files."""
  files, shard_records = stream_steps.shard(files, stream, num_streams)
  dataset = tf.data.Dataset.from_tensor_slices(files)
  if train:
    dataset = dataset.shuffle(
      len(files), seed=options.seed + stream, reshuffle_each_iteration=True
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

  return _interleave(
    dataset,
    read_file,
    options,
    cycle_length=min(options.cycle_length, len(files)),
  )


def imagenet_stream(
  options: InputOptions,
  files: Sequence[str],
  spec: stream_steps.StreamSpec,
  shuffle_records: int,
) -> tf.data.Dataset:
  """The batches of one stream of ImageNet shards."""
  dataset = _records(
    options,
    files,
    train=spec.train,
    stream=spec.stream,
    num_streams=spec.num_streams,
  )
  stream_seed = spec.seed(options)
  size = spec.image_size

  def example(position, record):
    path, index, serialized = record
    encoded, label, bboxes = checked_imagenet_record(
      path, index, serialized, spec.num_classes
    )
    if spec.train:
      image = preprocessing.imagenet_train_image(
        encoded,
        bboxes,
        image_size=size,
        resize_method=options.resize_method,
        distortions=options.distortions,
        seed=stream_steps.example_seed(stream_seed, position),
        index=position,
        style=options.imagenet_style,
      )
    else:
      image = preprocessing.imagenet_eval_image(
        encoded,
        image_size=size,
        resize_method=options.resize_method,
        index=position,
        style=options.imagenet_style,
      )
    return image, label

  return stream_steps.finish(
    dataset, example, options, spec, shuffle_buffer=shuffle_records
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
