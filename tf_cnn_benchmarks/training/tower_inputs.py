"""The (images, labels) of each tower: synthetic, or --data_dir's records.

Training and evaluation both draw their towers' batches here, from an
InputSource the driver describes once.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import tensorflow as tf

from tf_cnn_benchmarks.inputs import data_sources
from tf_cnn_benchmarks.inputs import input_options
from tf_cnn_benchmarks.inputs import inputs
from tf_cnn_benchmarks.training import xla


@dataclasses.dataclass(frozen=True)
class InputSource:
  """Where a run's examples come from and what shape they have."""

  options: input_options.InputOptions | None  # None: synthetic data
  image_size: int
  depth: int
  num_classes: int
  data_format: str
  seed: int


def tower_batches(
  source: InputSource,
  devices: Sequence[str],
  *,
  subset: str,
  train: bool,
  first_stream: int,
  num_streams: int,
  batch_size: int,
  host_device: str,
  micro_steps: tuple | None = None,
) -> tuple:
  """([(images, labels)] per device, [ops to run once after init]).

  Synthetic data, or streams read from the records (their iterators start
  with the returned ops). batch_size: per device. host_device: where the
  record pipeline runs. micro_steps: (K, the micro-step's index tensor)
  with gradient accumulation: each tower holds the K x batch_size
  synthetic examples a step of that batch would, and micro-step m reads
  its m-th slice (records: each micro-step reads the next batch).
  """
  if source.options is None:
    if micro_steps is not None:
      return _micro_batches(
        source, devices, first_stream, batch_size, *micro_steps
      ), []
    return _synthetic_batches(source, devices, first_stream, batch_size), []
  streams = data_sources.tower_batches(
    source.options,
    subset=subset,
    train=train,
    batch_size=batch_size,
    image_size=source.image_size,
    first_stream=first_stream,
    num_streams=num_streams,
    num_local_towers=len(devices),
    host_device=host_device,
    tower_devices=devices,
  )
  return list(streams.batches), [streams.initializer]


def _synthetic_batches(
  source: InputSource, devices: Sequence[str], first_stream: int, batch_size
) -> list:
  batches = []
  for index, device in enumerate(devices):
    # Never XLA-compiled: XLA would draw other random examples.
    with tf.device(device), xla.not_compiled():
      # Global tower index: worker w's tower t holds the examples a local
      # run's tower w*T+t would hold.
      batches.append(
        inputs.tower_synthetic_batch(
          first_stream + index,
          batch_size,
          image_size=source.image_size,
          depth=source.depth,
          num_classes=source.num_classes,
          data_format=source.data_format,
          seed=source.seed,
        )
      )
  return batches


def _micro_batches(
  source: InputSource,
  devices: Sequence[str],
  first_stream: int,
  batch_size: int,
  steps: int,
  index: tf.Tensor,
) -> list:
  """Micro-step `index`'s slice of the synthetic batches of K x batch_size:
  K micro-steps together see exactly one step of that batch's examples."""
  out = []
  whole = _synthetic_batches(source, devices, first_stream, steps * batch_size)
  for device, (images, labels) in zip(devices, whole):
    with tf.device(device), xla.not_compiled():
      start = tf.cast(index, tf.int32) * batch_size
      parts = []
      for t in (images, labels):
        part = t[start : start + batch_size]
        part.set_shape([batch_size, *t.shape[1:]])
        parts.append(part)
    out.append(tuple(parts))
  return out
