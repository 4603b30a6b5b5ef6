"""Classic Python callers run unchanged (issue 29, items 4 and 5).

Each caller runs in a fresh `python` process started without the command
line, where TensorFlow executes eagerly by default.
"""

import os
import textwrap

from tests import helpers

_FROZEN_CALLER = textwrap.dedent(
  """
  from tf_cnn_benchmarks import benchmark_cnn
  params = benchmark_cnn.make_params(
    model='trivial', device='cpu', batch_size=2, num_batches=2,
    num_warmup_batches=0, forward_only=True, freeze_when_forward_only=True,
    peak_tflops_per_device='none')
  params = benchmark_cnn.setup(params)
  stats = benchmark_cnn.BenchmarkCNN(params).run()
  print('images_per_sec > 0:', stats['images_per_sec'] > 0)
  """
)


def test_freeze_when_forward_only_runs_from_python():
  # Item 4: freezing raised 'RuntimeError: This operation is not supported
  # when eager execution is enabled' from a Python caller.
  proc = helpers.run_python(
    ['-c', _FROZEN_CALLER], env=helpers.task_env(), timeout=600
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'images_per_sec > 0: True' in proc.stdout
  assert 'total images/sec:' in proc.stdout


# Item 5: the classic folder scripts/tf_cnn_benchmarks/ and its modules.
_CLASSIC_FOLDER = os.path.join(helpers.ROOT, 'scripts', 'tf_cnn_benchmarks')
_CLASSIC_CALLER = textwrap.dedent(
  """
  import benchmark_cnn
  import cnn_util
  import flags

  flags.DEFINE_string('my_tag', 'x', 'a caller parameter of its own')
  flags.define_flags()
  benchmark_cnn.define_flags()
  assert flags.FLAGS['my_tag'].default == 'x'
  assert flags.param_specs['num_batches'].flag_type == 'integer'
  params = benchmark_cnn.make_params(
    model='trivial', device='cpu', batch_size=2, num_batches=2,
    num_warmup_batches=0, peak_tflops_per_device='none')
  params = benchmark_cnn.set_default_param_values_and_env_vars(params)
  params = benchmark_cnn.setup(params)
  cnn_util.log_fn('TensorFlow: %d.%d' % cnn_util.tensorflow_version_tuple()[:2])
  bench = benchmark_cnn.BenchmarkCNN(params)
  stats = bench.run()
  print('num_steps', stats['num_steps'])
  try:
    cnn_util.ImageProducer(None, None, 1, True)
  except NotImplementedError as e:
    print('refused:', e)
  """
)


def test_a_classic_caller_runs_from_the_classic_folder():
  proc = helpers.run_python(
    ['-c', _CLASSIC_CALLER],
    env=helpers.task_env(),
    cwd=_CLASSIC_FOLDER,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'num_steps 2' in proc.stdout
  assert 'total images/sec:' in proc.stdout
  assert 'TensorFlow: 2.' in proc.stdout
  assert 'refused: cnn_util.ImageProducer is not part' in proc.stdout


def test_the_classic_script_path_is_the_entry_point():
  script = os.path.join(_CLASSIC_FOLDER, 'tf_cnn_benchmarks.py')
  common = ['--model=trivial', '--device=cpu', '--num_batches=2']
  proc = helpers.run_python(
    [script, *common, '--batch_size=2', '--peak_tflops_per_device=none'],
    env=helpers.task_env(),
    cwd=_CLASSIC_FOLDER,  # the folder's names must not shadow the package
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'total images/sec:' in proc.stdout
  bad = helpers.run_python(
    [script, '--model=nosuch'], env=helpers.task_env(), timeout=600
  )
  assert bad.returncode == 2
  assert bad.stderr.strip().splitlines()[-1].startswith('error: --model=')


def test_classic_helpers():
  import sys

  sys.path.insert(0, _CLASSIC_FOLDER)
  try:
    import cnn_util
  finally:
    sys.path.remove(_CLASSIC_FOLDER)
  import numpy as np

  rolled = cnn_util.roll_numpy_batches(np.arange(6), 2, 0.34)
  assert rolled.tolist() == [2, 3, 4, 5, 0, 1]
  assert cnn_util.tensorflow_version() >= 2000
  barrier = cnn_util.Barrier(2)
  barrier.abort()
  barrier.wait()  # returns at once once aborted
