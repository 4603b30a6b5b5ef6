"""A crafted CIFAR-10 batch and a batch too big for memory: one line each.

Issue 29, item 12.
"""

import pickle
import tracemalloc

import numpy as np
import pytest

from tf_cnn_benchmarks.inputs import cifar_files
from tf_cnn_benchmarks.inputs import input_options

# 360000 CIFAR-10 images: about 1.1 GB asked for by a file of ~130 bytes.
HUGE_SHAPE = (360000, 3072)


class _EmptyArrayOf:
  """Pickles as a call that makes an uninitialised array of `shape`."""

  def __init__(self, make, shape):
    self.make, self.shape = make, shape

  def __reduce__(self):
    if self.make == 'ndarray':
      return (np.ndarray, (self.shape, 'u1'))
    reconstruct = np.ndarray.__reduce__(np.zeros(1))[0]  # _reconstruct
    return (reconstruct, (np.ndarray, self.shape, b'B'))


@pytest.mark.parametrize('make', ['ndarray', '_reconstruct'])
def test_crafted_cifar_batch_is_refused_without_allocating(tmp_path, make):
  path = tmp_path / 'data_batch_1'
  crafted = {b'data': _EmptyArrayOf(make, HUGE_SHAPE), b'labels': []}
  path.write_bytes(pickle.dumps(crafted, protocol=2))
  assert path.stat().st_size < 200
  tracemalloc.start()
  try:
    with pytest.raises(input_options.DataError) as info:
      cifar_files.cifar_file(str(path), 10)
    peak = tracemalloc.get_traced_memory()[1]
  finally:
    tracemalloc.stop()
  message = str(info.value)
  assert '\n' not in message
  assert message.startswith('%s: not a CIFAR-10 python batch' % path)
  assert '1105920000 bytes' in message
  assert peak < 10 * 2**20  # the ~1.1 GB asked for was never allocated


def test_a_real_sized_batch_still_reads(tmp_path):
  path = tmp_path / 'data_batch_1'
  data = np.arange(4 * 3072, dtype=np.uint8).reshape(4, 3072)
  batch = {b'data': data, b'labels': [0, 1, 2, 3]}
  path.write_bytes(pickle.dumps(batch, protocol=4))
  read = cifar_files.cifar_file(str(path), 10)
  assert read.num_records == 4
  assert read.header_bytes + 4 * 3072 + read.footer_bytes == path.stat().st_size
