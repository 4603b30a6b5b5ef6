"""Real-data input: one tf.data stream per tower, from ImageNet or CIFAR-10.

What the driver does with it:

  options = input_options.InputOptions.from_params(params)
  # DataError -> exit 2:
  files = data_dir_checks.check_data_dir(options, 'train')
  # In the graph:
  inputs = data_sources.tower_batches(
      options, subset='train', train=True, batch_size=B, image_size=S,
      first_stream=W * T, num_streams=NUM_WORKERS * T, num_local_towers=T,
      host_device=CPU_OF_THIS_PROCESS, files=files)
  # inputs.batches[t] is tower t's (images, labels); run inputs.initializer
  # once in the session before the first step (and again before each
  # evaluation pass). On a tf.errors.OpError from sess.run:
  #   line = input_failures.describe_input_failure(options, subset, error)
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
  and preprocess; imagenet_records.py, preprocessing.py) -> batch ->
  [NCHW transpose] -> [train: repeat one cached batch] -> prefetch.
  CIFAR-10 (cifar_files.py): the pixel block of each pickled batch is read in
  place with FixedLengthRecordDataset (its byte offset is found once in
  Python; the labels, 1 byte each, are graph constants), then the same steps
  from [cache] on (stream_steps.py). Nothing is fed or held in Python: the
  pipeline also runs on a remote task's CPU.

datasets_use_caching caches the examples as read, before the random
preprocessing: ImageNet serialized records (still JPEG: decoded ImageNet
would need about half a terabyte), CIFAR-10 raw pixels.
datasets_repeat_cached_sample (training only; an evaluation pass would never
end) repeats the stream's first raw record forever, as the classic harness
did: no file reads, but every example is still decoded and preprocessed.

Bad data.
  Before any graph: data_dir_checks.check_data_dir raises DataError for a
  missing, non-directory or empty --data_dir, no matching ImageNet shards,
  missing CIFAR-10 batch files; tower_batches raises DataError for a
  CIFAR-10 file that is not a readable batch (it is unpickled with only
  numpy's array classes allowed) and for a CIFAR-10 stream with less than
  one batch. Both run before any session.
  While running, input_failures.describe_input_failure turns an input
  error into one line naming the bad file (see there).
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import tensorflow as tf

from tf_cnn_benchmarks.config import datasets
from tf_cnn_benchmarks.inputs import cifar_files
from tf_cnn_benchmarks.inputs import data_dir_checks
from tf_cnn_benchmarks.inputs import imagenet_records
from tf_cnn_benchmarks.inputs import stream_steps
from tf_cnn_benchmarks.inputs.input_options import INPUT_SCOPE
from tf_cnn_benchmarks.inputs.input_options import InputOptions

tf1 = tf.compat.v1


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
      per worker); tower t of num_local_towers reads first_stream + t.
    num_streams: streams of the whole run (all workers' towers).
    num_local_towers: towers of this graph.
    host_device: where the pipelines run: this process's CPU, e.g.
      '/device:CPU:0' or '/job:worker/replica:0/task:1/device:CPU:0'.
    files: the subset's files as check_data_dir returned them (None: check
      again).
    tower_devices: the local towers' devices; with options.device_prefetch
      each stream's batches are copied onto its tower's device ahead of use.

  Returns TowerInputs: batches, the initializer op to run, the files. Raises
  DataError when the data directory or a CIFAR-10 file is unusable, or a
  stream would hold no batch.
  """
  _check_sizes(
    first_stream, num_streams, num_local_towers, batch_size, image_size
  )
  if files is None:
    files = data_dir_checks.check_data_dir(options, subset)
  streams = _Streams(options, list(files), subset, num_local_towers)
  sizes = dict(
    train=train,
    num_streams=num_streams,
    batch_size=batch_size,
    image_size=image_size,
  )
  return streams.build(sizes, first_stream, host_device, tower_devices)


def _check_sizes(
  first_stream, num_streams, num_local_towers, batch_size, image_size
) -> None:
  """ValueError unless the local towers' streams lie within num_streams and
  the sizes are positive."""
  if first_stream < 0 or first_stream + num_local_towers > num_streams:
    raise ValueError(
      'streams [%d, %d) not within the %d streams'
      % (first_stream, first_stream + num_local_towers, num_streams)
    )
  if batch_size < 1 or image_size < 1 or num_local_towers < 1:
    raise ValueError('batch_size, image_size and num_local_towers must be >= 1')


class _Streams:
  """Builds the streams of one tower_batches call, one tower at a time."""

  def __init__(self, options: InputOptions, files, subset, num_local_towers):
    self.options = options
    self.files = files
    self.subset = subset
    self.num_local_towers = num_local_towers
    self.num_classes = datasets.get(options.data_name).num_classes
    self.cifar = None
    if options.data_name == 'cifar10':
      self.cifar = [cifar_files.cifar_file(p, self.num_classes) for p in files]

  def build(self, sizes, first_stream, host_device, tower_devices):
    """The TowerInputs of the local towers (see tower_batches)."""
    # The subset in the scope tells describe_input_failure which pipeline
    # failed.
    with (
      tf.device(host_device),
      tf1.name_scope(INPUT_SCOPE),
      tf1.name_scope(self.subset),
    ):
      iterators = []
      for tower in range(self.num_local_towers):
        spec = stream_steps.StreamSpec(
          stream=first_stream + tower, num_classes=self.num_classes, **sizes
        )
        iterators.append(self._tower(tower, spec, tower_devices))
      initializer = tf.group(
        *[it.initializer for it, _ in iterators], name='initializer'
      )
    return TowerInputs(
      tuple(batch for _, batch in iterators), initializer, tuple(self.files)
    )

  def _tower(self, tower: int, spec, tower_devices):
    """(iterator, (images, labels)) of local tower `tower`'s stream."""
    with tf1.name_scope('tower_%d' % tower):
      dataset = self._dataset(spec)
      iterator = self._iterator(dataset, tower_devices, tower)
      return iterator, iterator.get_next()

  def _iterator(self, dataset, tower_devices, tower: int):
    """The stream's iterator: on the host, or on the tower's device when the
    batches are prefetched there (the iterator of a copy lives on its
    target).
    """
    prefetch = self.options.device_prefetch
    if not (prefetch and tower_devices):
      return tf1.data.make_initializable_iterator(dataset)
    device = tower_devices[tower]
    dataset = dataset.apply(
      tf.data.experimental.prefetch_to_device(device, buffer_size=prefetch)
    )
    with tf.device(device):
      return tf1.data.make_initializable_iterator(dataset)

  def _dataset(self, spec) -> tf.data.Dataset:
    """The dataset of one tower's stream (CIFAR-10 or ImageNet)."""
    if self.cifar is not None:
      return cifar_files.cifar_stream(
        self.options, self.cifar, spec, self.subset
      )
    # The towers of one process share the shuffle memory.
    return imagenet_records.imagenet_stream(
      self.options,
      self.files,
      spec,
      max(
        1, imagenet_records.IMAGENET_SHUFFLE_RECORDS // self.num_local_towers
      ),
    )
