"""The steps every real-data stream shares (CIFAR-10 and ImageNet alike).

StreamSpec: which stream a tower reads and the batches it makes; shard:
which files (or records) the stream reads; finish: from the cache on, the
shuffle, repeat, preprocessing map, batching, layout and prefetch (see
data_sources.py for the whole pipeline).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import tensorflow as tf

from tf_cnn_benchmarks.inputs.input_options import InputOptions


@dataclasses.dataclass(frozen=True)
class StreamSpec:
  """One tower's stream: stream `stream` of num_streams, in batches of
  batch_size images image_size square; train: training preprocessing,
  shuffle and repeat, else evaluation preprocessing and one pass in order."""

  train: bool
  stream: int
  num_streams: int
  batch_size: int
  image_size: int
  num_classes: int

  def seed(self, options: InputOptions) -> int:
    """The seed of this stream's shuffles and random preprocessing."""
    return options.seed + self.stream


def example_seed(stream_seed: int, position) -> tf.Tensor:
  """The stateless seed of the example at `position` of a stream."""
  return tf.stack([tf.constant(stream_seed, tf.int64), position])


def shard(items: Sequence, stream: int, num_streams: int):
  """(items this stream reads, whether records must be sharded instead)."""
  if len(items) >= num_streams:
    return list(items[stream::num_streams]), False
  return list(items), True


def finish(
  dataset: tf.data.Dataset,
  example,
  options: InputOptions,
  spec: StreamSpec,
  *,
  shuffle_buffer: int,
) -> tf.data.Dataset:
  """The steps every stream shares, from the cache on (see data_sources)."""
  train = spec.train
  if options.use_caching:
    dataset = dataset.cache()
  if train and options.repeat_cached_sample:
    # Classic: one raw record repeated; decoding and preprocessing are still
    # done (and measured) for every example.
    dataset = dataset.take(1).cache().repeat()
  elif train:
    dataset = dataset.shuffle(
      shuffle_buffer, seed=spec.seed(options), reshuffle_each_iteration=True
    )
    dataset = dataset.repeat()
  # The position seeds the example's randomness and picks its round-robin
  # resize method.
  dataset = dataset.enumerate()
  dataset = dataset.map(
    example, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
  )
  dataset = dataset.batch(spec.batch_size, drop_remainder=True)
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
