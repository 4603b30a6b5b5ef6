"""The classic module `cnn_util`, for callers in this folder.

The helpers a benchmark caller uses (log_fn, the TensorFlow version,
roll_numpy_batches, Barrier). The classic pipeline and cluster internals
(ImageProducer, BaseClusterManager, GrpcClusterManager) are not part of this
harness: constructing one raises NotImplementedError naming what to use.
"""

import threading

import _classic_root  # noqa: F401  (first: the package, not this folder)


def log_fn(log) -> None:
  """Prints one log line (the classic harness's console logger)."""
  print(log, flush=True)


def tensorflow_version_tuple() -> tuple:
  """(major, minor, patch text) of the installed TensorFlow."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  major, minor, patch = tf.__version__.split('.', 2)
  return int(major), int(minor), patch


def tensorflow_version() -> int:
  """major * 1000 + minor: 2021 for TensorFlow 2.21."""
  major, minor, _ = tensorflow_version_tuple()
  return major * 1000 + minor


def roll_numpy_batches(array, batch_size: int, shift_ratio: float):
  """`array` with its first int(batches * shift_ratio) batches moved to the
  end (the batch dimension is the first; it holds whole batches)."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  if array.shape[0] % batch_size:
    raise ValueError(
      'roll_numpy_batches: %d items are not whole batches of %d'
      % (array.shape[0], batch_size)
    )
  moved = int(array.shape[0] // batch_size * shift_ratio) * batch_size
  return np.roll(array, -moved, axis=0)


class Barrier:
  """Blocks `parties` threads in wait() until all have called it.

  abort() releases the waiting threads and makes later waits return at
  once (the classic behaviour: no BrokenBarrierError).
  """

  def __init__(self, parties: int):
    self._barrier = threading.Barrier(parties)
    self.parties = parties

  def wait(self) -> None:
    """Waits for the other parties (returns at once once aborted)."""
    try:
      self._barrier.wait()
    except threading.BrokenBarrierError:
      pass

  def abort(self) -> None:
    """Releases every waiting thread and disables the barrier."""
    self._barrier.abort()


class _NotInThisHarness:
  """A classic class this harness does not have."""

  _instead = ''

  def __init__(self, *args, **kwargs):
    del args, kwargs
    raise NotImplementedError(
      'cnn_util.%s is not part of this harness: %s'
      % (type(self).__name__, self._instead)
    )


class ImageProducer(_NotInThisHarness):
  """Classic staging-area feeder; the input pipeline here is tf.data."""

  _instead = 'the input pipeline is tf.data (see --datasets_* flags)'


class BaseClusterManager(_NotInThisHarness):
  """Classic cluster manager; clusters come from the cluster flags."""

  _instead = (
    'give --job_name, --task_index, --ps_hosts and --worker_hosts '
    '(or TF_CONFIG) to BenchmarkCNN'
  )


class GrpcClusterManager(BaseClusterManager):
  """Classic gRPC cluster manager; see BaseClusterManager."""
