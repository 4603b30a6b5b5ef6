"""A crafted CIFAR-10 batch and a batch too big for memory: one line each.

Issue 29, item 12.
"""

import pickle
import tracemalloc

import numpy as np
import pytest
import tensorflow as tf

import models
from tf_cnn_benchmarks import __main__ as entry
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import limits
from tf_cnn_benchmarks.config import params as params_lib
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


OOM_TEXT = (
  'OOM when allocating tensor with shape[64,224,224,3] and type float on '
  '/job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu'
)


def _raise_oom(*args, **kwargs):
  del args, kwargs
  raise tf.errors.ResourceExhaustedError(None, None, OOM_TEXT)


def test_out_of_memory_is_one_line_naming_batch_size(
  monkeypatch, capsys, tmp_path
):
  # Running really out of memory would take the machine's 24 GiB: the
  # step loop raises TensorFlow's error instead.
  monkeypatch.setattr(benchmark_cnn._StepLoop, 'run', _raise_oom)
  result_file = tmp_path / 'results.jsonl'
  status = entry.main(
    [
      'tf_cnn_benchmarks',
      '--model=trivial',
      '--device=cpu',
      '--batch_size=64',
      '--num_batches=2',
      '--result_file=%s' % result_file,
    ]
  )
  err = capsys.readouterr().err.strip()
  assert status == 2
  assert err.count('\n') == 0
  assert err.startswith('error: --batch_size=64 x 1 tower(s): out of memory')
  assert 'allocating 36.8 MiB (float) tensor [64,224,224,3]' in err
  assert 'Traceback' not in err
  assert not result_file.exists()  # no result: the run did not happen


def test_python_callers_get_the_same_error(monkeypatch):
  monkeypatch.setattr(benchmark_cnn._StepLoop, 'run', _raise_oom)
  bench = benchmark_cnn.BenchmarkCNN(
    benchmark_cnn.make_params(
      model='trivial', device='cpu', batch_size=64, num_batches=2
    )
  )
  with pytest.raises(limits.BatchTooLargeError, match='--batch_size=64'):
    bench.run()


def test_out_of_memory_message_without_a_tensor_named():
  p = params_lib.make_params(model='trivial', device='cpu', batch_size=8)
  model = models.create_model('trivial', 'imagenet')
  message = limits.out_of_memory_message(p, 'imagenet', model, 'OOM')
  assert message.startswith('--batch_size=8 x 1 tower(s): out of memory;')
  # The input lower bound: 2 copies x 8 x (an image in float32 + label).
  side = model.image_size
  needed = 2 * 8 * (side * side * 3 * 4 + 4)
  assert 'need at least %.1f MiB' % (needed / 2**20) in message
