"""The `env` block of a results line (reporting/environment.py).

GPU figures come from a faked TensorFlow device description and a faked
`nvidia-smi` first on PATH; git state from a temporary repository.
"""

import os
import shutil
import subprocess
import sys

import pytest
import tensorflow as tf

from tf_cnn_benchmarks.reporting import environment

GPU_KEYS = (
  'gpu_model',
  'gpu_compute_capability',
  'gpu_driver',
  'gpu_memory_mib',
)
A100 = 'NVIDIA A100-SXM4-80GB'


def fake_gpus(monkeypatch, count, details):
  """TensorFlow sees `count` GPUs, each described by `details`."""
  devices = [
    tf.config.PhysicalDevice('/physical_device:GPU:%d' % i, 'GPU')
    for i in range(count)
  ]
  monkeypatch.setattr(
    tf.config,
    'list_physical_devices',
    lambda kind=None: devices if kind == 'GPU' else [],
  )
  monkeypatch.setattr(
    tf.config.experimental, 'get_device_details', lambda device: details
  )


def path_with(tmp_path, monkeypatch, nvidia_smi_script=None):
  """PATH = a fresh bin directory holding git and (if given) nvidia-smi."""
  bin_dir = tmp_path / 'bin'
  bin_dir.mkdir()
  os.symlink(shutil.which('git'), bin_dir / 'git')
  if nvidia_smi_script is not None:
    smi = bin_dir / 'nvidia-smi'
    smi.write_text('#!/bin/sh\n' + nvidia_smi_script)
    smi.chmod(0o755)
  monkeypatch.setenv('PATH', str(bin_dir))


def check_reasons(env):
  """null_reasons names exactly the null keys of env."""
  nulls = {key for key, value in env.items() if value is None}
  assert set(env['null_reasons']) == nulls
  assert all(env['null_reasons'].values())


def test_gpu_model_and_driver_from_device_details_and_nvidia_smi(
  tmp_path, monkeypatch
):
  fake_gpus(monkeypatch, 2, {'device_name': A100, 'compute_capability': (8, 0)})
  path_with(
    tmp_path,
    monkeypatch,
    'echo "%s, 550.54.15, 81920 MiB"\necho "%s, 550.54.15, 81920 MiB"\n'
    % (A100, A100),
  )
  env = environment.environment('gpu')
  assert {key: env[key] for key in ('gpu_count',) + GPU_KEYS} == {
    'gpu_count': 2,
    'gpu_model': A100,
    'gpu_compute_capability': '8.0',
    'gpu_driver': '550.54.15',
    'gpu_memory_mib': 81920,
  }
  assert env['device_kind'] == 'gpu'
  check_reasons(env)


def test_model_from_nvidia_smi_when_tensorflow_has_no_name(
  tmp_path, monkeypatch
):
  fake_gpus(monkeypatch, 1, {})
  path_with(
    tmp_path, monkeypatch, 'echo "Tesla V100-SXM2-16GB, 535.1, 16160 MiB"\n'
  )
  env = environment.environment('gpu')
  assert env['gpu_model'] == 'Tesla V100-SXM2-16GB'
  assert env['gpu_compute_capability'] is None
  check_reasons(env)


def test_differing_gpus_and_a_failing_nvidia_smi_give_reasons(
  tmp_path, monkeypatch
):
  fake_gpus(monkeypatch, 2, {'device_name': A100, 'compute_capability': (8, 0)})
  path_with(
    tmp_path,
    monkeypatch,
    'echo "%s, 550.1, 81920 MiB"\necho "%s, 550.1, 40960 MiB"\n' % (A100, A100),
  )
  env = environment.environment('gpu')
  assert env['gpu_memory_mib'] is None
  assert env['null_reasons']['gpu_memory_mib'] == (
    'the GPUs differ in memory: 40960, 81920'
  )
  assert env['gpu_driver'] == '550.1'
  (tmp_path / 'bin' / 'nvidia-smi').write_text('#!/bin/sh\nexit 9\n')
  env = environment.environment('gpu')
  assert env['gpu_driver'] is None and env['gpu_model'] == A100
  assert env['null_reasons']['gpu_driver'].startswith('nvidia-smi failed: ')


def test_on_a_cpu_every_gpu_field_is_null_with_its_reason(
  tmp_path, monkeypatch
):
  fake_gpus(monkeypatch, 0, {})
  path_with(tmp_path, monkeypatch)  # no nvidia-smi
  env = environment.environment('cpu')
  assert env['gpu_count'] == 0  # a true count, not unknown
  assert [env[key] for key in GPU_KEYS] == [None] * 4
  reasons = env['null_reasons']
  assert reasons['gpu_model'].startswith('TensorFlow sees no GPU')
  assert reasons['gpu_compute_capability'].startswith('TensorFlow sees no GPU')
  assert reasons['gpu_driver'] == 'nvidia-smi is not on PATH'
  assert reasons['gpu_memory_mib'] == 'nvidia-smi is not on PATH'
  check_reasons(env)


def test_the_rest_of_the_machine_and_the_build(monkeypatch):
  env = environment.environment('cpu')
  build = tf.sysconfig.get_build_info()
  assert env['tensorflow'] == tf.__version__
  assert env['is_cuda_build'] == build['is_cuda_build']
  assert env['cuda_version'] == build.get('cuda_version')
  assert env['python'] == '%d.%d.%d' % sys.version_info[:3]
  assert env['num_cores'] == os.cpu_count() and env['os']
  with open('/proc/meminfo') as f:
    kb = int(f.readline().split()[1])
  assert env['memory_total_bytes'] == kb * 1024
  assert set(env['cpu_flags']) <= {
    'avx2',
    'avx512f',
    'avx512_bf16',
    'avx512_fp16',
    'amx_bf16',
    'amx_fp16',
    'amx_tile',
  }
  check_reasons(env)


def test_the_command_line_is_the_interpreters_shell_quoted(monkeypatch):
  monkeypatch.setattr(
    sys,
    'orig_argv',
    ['python3', '-m', 'tf_cnn_benchmarks', '--model=trivial', '--x=a b'],
  )
  env = environment.environment('cpu')
  assert env['command_line'] == (
    "python3 -m tf_cnn_benchmarks --model=trivial '--x=a b'"
  )


def git(repo, *args):
  subprocess.run(
    ['git', '-c', 'user.name=t', '-c', 'user.email=t@t', *args],
    cwd=repo,
    check=True,
    capture_output=True,
  )


def test_the_dirty_flag_of_a_git_checkout(tmp_path):
  repo = tmp_path / 'repo'
  repo.mkdir()
  git(repo, 'init', '-q')
  (repo / 'code.py').write_text('a = 1\n')
  git(repo, 'add', 'code.py')
  git(repo, 'commit', '-qm', 'one')
  head = subprocess.run(
    ['git', 'rev-parse', 'HEAD'], cwd=repo, capture_output=True, text=True
  ).stdout.strip()
  reasons = {}
  assert environment.git_state(str(repo), reasons) == {
    'git_commit': head,
    'git_dirty': False,
  }
  # A results file written into the checkout is untracked: still clean.
  (repo / 'results.jsonl').write_text('{}\n')
  assert environment.git_state(str(repo), reasons)['git_dirty'] is False
  (repo / 'code.py').write_text('a = 2\n')
  assert environment.git_state(str(repo), reasons)['git_dirty'] is True
  assert reasons == {}


def test_outside_a_git_checkout_commit_and_dirty_are_null_with_a_reason(
  tmp_path,
):
  reasons = {}
  assert environment.git_state(str(tmp_path), reasons) == {
    'git_commit': None,
    'git_dirty': None,
  }
  assert reasons == {
    'git_commit': 'not a git checkout: %s' % tmp_path,
    'git_dirty': 'not a git checkout: %s' % tmp_path,
  }


@pytest.mark.parametrize(
  'text,expected',
  [
    ('MemTotal:       24684084 kB\n', (24684084 * 1024, None)),
    ('MemFree: 1 kB\n', (None, 'no MemTotal in %s')),
  ],
)
def test_memory_total(tmp_path, text, expected):
  path = tmp_path / 'meminfo'
  path.write_text(text)
  value, why = environment.memory_total_bytes(str(path))
  assert (value, why) == (expected[0], expected[1] and expected[1] % path)


def test_gpus_tensorflow_cannot_see_are_named_in_the_reason(
  tmp_path, monkeypatch
):
  fake_gpus(monkeypatch, 0, {})
  path_with(tmp_path, monkeypatch, 'echo "%s, 550.1, 81920 MiB"\n' % A100)
  env = environment.environment('cpu')
  assert env['gpu_model'] is None and env['gpu_driver'] == '550.1'
  assert env['null_reasons']['gpu_model'] == (
    'TensorFlow sees no GPU; nvidia-smi lists 1: %s' % A100
  )
