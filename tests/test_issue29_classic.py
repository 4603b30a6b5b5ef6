"""Classic Python callers run unchanged (issue 29, items 4 and 5).

Each caller runs in a fresh `python` process started without the command
line, where TensorFlow executes eagerly by default.
"""

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
