"""When a run wants a GPU and TensorFlow sees none, TensorFlow's own reasons.

TensorFlow's start-up lines are kept off stderr (platform/quiet.py); when
--device=gpu finds no GPU they are what says why (a CUDA library it could
not load, the driver), so they are printed before the harness's one error
line (issue 30). The fixtures are start-up logs: tf_startup_cpu_host.log
captured on this project's CPU-only machine (TensorFlow 2.21, verbose, as
the driver's probe asks for it); tf_startup_missing_cuda_libs.log composed
from this TensorFlow's message strings for a GPU host without the CUDA
wheels (no GPU machine here to capture one).
"""

import os
import stat
import sys

import pytest

from tests import helpers
from tf_cnn_benchmarks.platform import quiet

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures')


def _fixture(name):
  with open(os.path.join(FIXTURES, name)) as f:
    return f.read()


def _messages(lines):
  """The messages of TensorFlow log lines, without time, thread and file."""
  return [line.split('] ', 1)[-1] for line in lines]


def test_missing_cuda_libraries_are_named_in_order_once_each():
  lines = quiet.gpu_reason_lines(_fixture('tf_startup_missing_cuda_libs.log'))
  assert _messages(lines) == [
    'Could not find cuda drivers on your machine, GPU will not be used.',
    "Could not load dynamic library 'libcudart.so.12'; dlerror: "
    'libcudart.so.12: cannot open shared object file: No such file or '
    'directory; LD_LIBRARY_PATH: /usr/local/nvidia/lib64',
    "Could not load dynamic library 'libcudnn.so.9'; dlerror: "
    'libcudnn.so.9: cannot open shared object file: No such file or '
    'directory; LD_LIBRARY_PATH: /usr/local/nvidia/lib64',
    'Cannot dlopen some GPU libraries. Please make sure the missing '
    'libraries mentioned above are installed properly if you would like to '
    'use GPU. Follow the guide at https://www.tensorflow.org/install/gpu for '
    'how to download and setup the required libraries for your platform.',
    'Skipping registering GPU devices...',
  ]
  # As TensorFlow printed them: its log header kept.
  assert lines[1].startswith('I0000 00:00:1795550002.000000    1234 dso_loader')


def test_cpu_host_log_names_the_driver():
  lines = quiet.gpu_reason_lines(_fixture('tf_startup_cpu_host.log'))
  messages = _messages(lines)
  assert messages[0] == (
    'Could not find cuda drivers on your machine, GPU will not be used.'
  )
  assert any(
    m.startswith("Could not load dynamic library 'libcuda.so.1'")
    for m in messages
  )
  assert any(m.startswith('failed call to cuInit') for m in messages)
  assert any(
    m.startswith('kernel driver does not appear to be running')
    for m in messages
  )
  # Start-up chatter that says nothing about GPUs is not selected.
  assert not any('oneDNN' in m or 'cpu_feature_guard' in m for m in lines)
  assert len(messages) == len(set(messages)) == 4


def test_nothing_selected_from_a_log_without_reasons():
  assert quiet.gpu_reason_lines('') == []
  assert (
    quiet.gpu_reason_lines(
      'I0000 00:00:1.0  1 port.cc:153] oneDNN custom operations are on.\n'
      'E0000 00:00:1.0  1 cuda_fft.cc:467] Unable to register cuFFT factory\n'
    )
    == []
  )


def test_start_up_capture_is_kept_bounded(tmp_path):
  kept = []
  limit = quiet.KEPT_CAPTURE_BYTES
  with quiet.captured_stderr_fd(kept):
    os.write(2, b'first line\n' + b'x' * (3 * limit) + b'\nlast line\n')
  (text,) = kept
  assert text.startswith('first line\n')
  assert text.endswith('last line\n')
  assert '[...]' in text
  assert len(text) <= 2 * limit + len('\n[...]\n')


def test_why_no_gpu_reads_the_given_start_up_log():
  from tf_cnn_benchmarks.platform import devices  # pylint: disable=g-import-not-at-top

  lines = devices.why_no_gpu(
    _fixture('tf_startup_missing_cuda_libs.log'), probe=False
  )
  assert "Could not load dynamic library 'libcudnn.so.9'" in lines[2]


def _error_output(proc):
  lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
  assert proc.returncode == 2, proc.stderr
  assert 'Traceback' not in proc.stderr
  return lines[:-1], lines[-1]


def test_device_gpu_prints_tensorflows_reason_before_the_error(tmp_path):
  """End to end on this CPU-only machine: TensorFlow's real lines first."""
  result_file = tmp_path / 'r.jsonl'
  proc = helpers.run_benchmark(
    '--device=gpu',
    '--model=trivial',
    '--num_batches=2',
    '--result_file=%s' % result_file,
    timeout=600,
  )
  if proc.returncode == 0:
    pytest.skip('this machine has a GPU TensorFlow can use')
  reasons, error = _error_output(proc)
  assert error.startswith('error: --device=gpu: ')
  assert reasons, proc.stderr
  assert quiet.gpu_reason_lines('\n'.join(reasons)) == reasons
  messages = _messages(reasons)
  # What TensorFlow 2.21 says on a machine without NVIDIA's driver.
  assert (
    'Could not find cuda drivers on your machine, GPU will not be used.'
    in (messages)
  )
  assert any(m.startswith('failed call to cuInit') for m in messages)
  assert not result_file.exists()


@pytest.mark.slow  # a run plus a verbose TensorFlow re-probe (~20 s loaded)
def test_gpu_expected_but_missing_warns_and_picks_the_cpu(tmp_path):
  """--device unset, nvidia-smi lists a GPU, TensorFlow sees none."""
  fake_bin = tmp_path / 'bin'
  fake_bin.mkdir()
  smi = fake_bin / 'nvidia-smi'
  smi.write_text(
    '#!%s\nprint("NVIDIA A100-SXM4-80GB, 550.54.15, 81920 MiB")\n'
    % sys.executable
  )
  smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
  env = helpers.quiet_env(PATH='%s:%s' % (fake_bin, os.environ['PATH']))
  # --only_check_args: the flags resolve (device: cpu), nothing is built.
  proc = helpers.run_benchmark(
    '--model=trivial', '--only_check_args', env=env, timeout=600
  )
  assert proc.returncode == 0, proc.stderr
  if 'warning: nvidia-smi' not in proc.stderr:
    from tf_cnn_benchmarks.platform import devices  # pylint: disable=g-import-not-at-top

    assert devices.gpu_visible(), proc.stderr
    pytest.skip('this machine has a GPU TensorFlow can use')
  lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
  warning = [ln for ln in lines if ln.startswith('warning: nvidia-smi lists')]
  assert warning == [
    'warning: nvidia-smi lists 1 GPU(s) but TensorFlow sees none: running '
    'on the CPU (--device=gpu makes this an error; docs/gpu.md)'
  ]
  before = lines[: lines.index(warning[0])]
  assert before and quiet.gpu_reason_lines('\n'.join(before)) == before
