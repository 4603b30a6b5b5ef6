"""Where a run happened: the `env` object of every results line.

Versions (TensorFlow and how it was built, Python, the OS), the machine (CPU
model, cores, the ISA extensions that change speed, memory, GPUs and their
driver), the code (git commit and whether the tree was dirty) and how the
run was started (the command line, the host).

A value this module cannot learn is null, never a guess, and
`env['null_reasons']` says why: {key: reason} for every null key of `env`
(an empty object when nothing is null). The GPU figures come from
TensorFlow's device details and, when it is on PATH, from `nvidia-smi`
(the driver and memory TensorFlow does not report).
"""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import socket
import subprocess
import sys

from tf_cnn_benchmarks.platform import cpu_features

# The checkout this module lives in: its git commit is the code that ran.
_HERE = os.path.dirname(os.path.abspath(__file__))
_NVIDIA_SMI_QUERY = (
  'nvidia-smi',
  '--query-gpu=name,driver_version,memory.total',
  '--format=csv,noheader',
)
_SUBPROCESS_TIMEOUT_S = 5  # git and nvidia-smi answer at once or not at all
_BUILD_KEYS = (
  'cuda_version',
  'cudnn_version',
  'is_cuda_build',
  'is_rocm_build',
)


def environment(device_kind: str) -> dict:
  """The `env` object of a results line (see the module docstring).

  Args:
    device_kind: the run's --device ('cpu' or 'gpu').

  Returns:
    A JSON-ready dict; `null_reasons` names why each null key is null.
  """
  # TensorFlow late: __main__ imports this module before --help answers.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  reasons = {}
  env = {
    'tensorflow': tf.__version__,
    'python': platform.python_version(),
    'os': platform.platform(),
    'hostname': socket.gethostname(),
    # The interpreter's own argv: 'python -m tf_cnn_benchmarks ...' as typed.
    'command_line': shlex.join(sys.orig_argv),
    'device_kind': device_kind,
  }
  env.update(_tf_build(tf.sysconfig.get_build_info(), reasons))
  env.update(_cpu(reasons))
  env.update(gpus(tf, reasons))
  env.update(git_state(_HERE, reasons))
  env['null_reasons'] = reasons
  return env


def _tf_build(info: dict, reasons: dict) -> dict:
  """CUDA/cuDNN versions and build kind of TensorFlow's build info."""
  keys = {key: info.get(key) for key in _BUILD_KEYS}
  for key in ('cuda_version', 'cudnn_version'):
    if keys[key] is None:
      reasons[key] = 'TensorFlow was built without CUDA'
  for key in ('is_cuda_build', 'is_rocm_build'):
    if keys[key] is None:  # build info of a build without the key
      reasons[key] = 'not in tf.sysconfig.get_build_info()'
  return keys


def memory_total_bytes(meminfo_path: str = '/proc/meminfo'):
  """(MemTotal in bytes, None) or (None, why not)."""
  try:
    with open(meminfo_path, encoding='utf-8') as f:
      for line in f:
        if line.startswith('MemTotal:'):
          value, unit = line.split()[1:3]
          scale = 1024 if unit.lower() == 'kb' else 1
          return int(value) * scale, None
  except (OSError, ValueError) as e:
    return None, 'cannot read %s: %s' % (meminfo_path, e)
  return None, 'no MemTotal in %s' % meminfo_path


def _cpu(reasons: dict) -> dict:
  """CPU model, logical cores, the speed-relevant ISA flags, memory."""
  cpuinfo = cpu_features.read_cpuinfo()
  memory, why = memory_total_bytes()
  if why:
    reasons['memory_total_bytes'] = why
  flags = None
  if cpuinfo is None:
    reasons['cpu_flags'] = 'no /proc/cpuinfo on this system'
  else:
    flags = list(cpu_features.peak_flags(cpuinfo))
  return {
    'cpu_model': cpu_features.cpu_model(cpuinfo),
    'num_cores': os.cpu_count(),
    'cpu_flags': flags,
    'memory_total_bytes': memory,
  }


def nvidia_smi_rows():
  """([(name, driver, memory MiB)], None) from nvidia-smi, or (None, why)."""
  if shutil.which(_NVIDIA_SMI_QUERY[0]) is None:
    return None, 'nvidia-smi is not on PATH'
  try:
    out = subprocess.run(
      _NVIDIA_SMI_QUERY,
      timeout=_SUBPROCESS_TIMEOUT_S,
      capture_output=True,
      text=True,
      check=True,
    ).stdout
  except subprocess.TimeoutExpired:
    return None, 'nvidia-smi did not answer in %ds' % _SUBPROCESS_TIMEOUT_S
  except (OSError, subprocess.CalledProcessError) as e:
    return None, 'nvidia-smi failed: %s' % e
  rows = []
  for line in out.splitlines():
    parts = [part.strip() for part in line.split(',')]
    if len(parts) == 3:
      rows.append((parts[0], parts[1], _mib(parts[2])))
  if not rows:
    return None, 'nvidia-smi listed no GPU'
  return rows, None


def _mib(text: str):
  """'81920 MiB' -> 81920; None when not a number."""
  try:
    return int(text.split()[0])
  except (IndexError, ValueError):
    return None


def _tf_gpu_details(tf):
  """(count, [device details]) of the physical GPUs TensorFlow sees."""
  found = tf.config.list_physical_devices('GPU')
  details = []
  for device in found:
    try:
      details.append(tf.config.experimental.get_device_details(device))
    except (ValueError, RuntimeError):
      details.append({})
  return len(found), details


def _one_value(values, what: str):
  """(the one distinct value, None) or (None, why) for a list of values."""
  distinct = sorted({v for v in values if v is not None}, key=str)
  if len(distinct) == 1:
    return distinct[0], None
  if not distinct:
    return None, '%s: not reported' % what
  return None, 'the GPUs differ in %s: %s' % (
    what,
    ', '.join(str(v) for v in distinct),
  )


def gpus(tf, reasons: dict) -> dict:
  """gpu_count (GPUs TensorFlow sees), gpu_model, gpu_compute_capability,
  gpu_memory_mib and gpu_driver; reasons gets why each null one is null."""
  count, details = _tf_gpu_details(tf)
  smi, smi_why = nvidia_smi_rows()
  keys = {'gpu_count': count}
  if count:
    keys['gpu_model'], why = _one_value(
      [d.get('device_name') for d in details], 'model'
    )
    if keys['gpu_model'] is None and smi:
      keys['gpu_model'], why = _one_value([r[0] for r in smi], 'model')
    capability = [d.get('compute_capability') for d in details]
    keys['gpu_compute_capability'], cc_why = _one_value(
      ['%d.%d' % tuple(c) if c else None for c in capability],
      'compute capability',
    )
    reasons.update(
      _why_null(keys, gpu_model=why, gpu_compute_capability=cc_why)
    )
  else:
    none = 'TensorFlow sees no GPU' + (
      '' if tf.test.is_built_with_cuda() else ' (a build without CUDA)'
    )
    if smi:  # the host has some: hidden (CUDA_VISIBLE_DEVICES) or unusable
      none += '; nvidia-smi lists %d: %s' % (
        len(smi),
        ', '.join(sorted({r[0] for r in smi})),
      )
    keys['gpu_model'] = keys['gpu_compute_capability'] = None
    reasons['gpu_model'] = reasons['gpu_compute_capability'] = none
  if smi is None:
    keys['gpu_driver'] = keys['gpu_memory_mib'] = None
    reasons['gpu_driver'] = reasons['gpu_memory_mib'] = smi_why
  else:
    keys['gpu_driver'], driver_why = _one_value([r[1] for r in smi], 'driver')
    keys['gpu_memory_mib'], memory_why = _one_value(
      [r[2] for r in smi], 'memory'
    )
    reasons.update(
      _why_null(keys, gpu_driver=driver_why, gpu_memory_mib=memory_why)
    )
  return keys


def _why_null(keys: dict, **why) -> dict:
  """{key: reason} of the keys given that are null in `keys`."""
  return {key: reason for key, reason in why.items() if keys[key] is None}


def _git(directory: str, *args: str) -> str:
  """stdout of `git args` in directory; raises OSError/SubprocessError."""
  return subprocess.run(
    ('git',) + args,
    cwd=directory,
    timeout=_SUBPROCESS_TIMEOUT_S,
    capture_output=True,
    text=True,
    check=True,
  ).stdout


def git_state(directory: str, reasons: dict) -> dict:
  """git_commit (HEAD) and git_dirty of the checkout holding `directory`.

  Dirty means a tracked file differs from HEAD (`git status --porcelain
  --untracked-files=no` is not empty): results files a sweep writes into
  the checkout are untracked and would otherwise mark every later run dirty.
  """
  if shutil.which('git') is None:
    why = 'git is not on PATH'
  else:
    try:
      commit = _git(directory, 'rev-parse', 'HEAD').strip()
      status = _git(directory, 'status', '--porcelain', '--untracked-files=no')
      return {'git_commit': commit, 'git_dirty': bool(status.strip())}
    except subprocess.TimeoutExpired:
      why = 'git did not answer in %ds' % _SUBPROCESS_TIMEOUT_S
    except (OSError, subprocess.CalledProcessError):
      why = 'not a git checkout: %s' % directory
  reasons['git_commit'] = reasons['git_dirty'] = why
  return {'git_commit': None, 'git_dirty': None}
