"""Checks TF_XLA_FLAGS before TensorFlow reads it.

TensorFlow parses TF_XLA_FLAGS when it first creates a device and aborts
the process (a fatal log, status 1) on a value it cannot use: a first token
without `--` is taken for a file of flags, and an unknown flag name is
fatal. Our entry point captures fd 2 while TensorFlow loads, so that abort
printed nothing at all. `problem()` finds it first: the syntax is checked
here, and a value naming anything besides this package's own default flag
is tried in a short child process whose fatal line is reported.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Optional

VARIABLE = 'TF_XLA_FLAGS'
# Added by tf_cnn_benchmarks/__init__.py; known to this TensorFlow.
DEFAULT_FLAG = '--tf_xla_cpu_global_jit'
_TOKEN = re.compile(r'--[A-Za-z0-9_]+(=.*)?\Z')
_PROBE = (
  'import tensorflow as tf\ntf.config.list_logical_devices("CPU")\nprint("ok")'
)


def syntax_problem(value: str) -> Optional[str]:
  """What is wrong with the tokens of `value`, else None.

  TensorFlow's grammar: space-separated `--name` or `--name=value` tokens
  (or, when the value does not start with `--`, the name of a file of them,
  which this harness does not accept).
  """
  for token in value.split():
    if not _TOKEN.match(token):
      return '%r is not a --name or --name=value flag' % token
  return None


def probe_problem(env: dict) -> Optional[str]:
  """TensorFlow's own reason for refusing env's TF_XLA_FLAGS, else None."""
  try:
    done = subprocess.run(
      [sys.executable, '-c', _PROBE],
      env=env,
      capture_output=True,
      text=True,
      timeout=300,
      check=False,
    )
  except (OSError, subprocess.TimeoutExpired):
    return None  # no verdict: let the run itself go on
  if done.returncode == 0:
    return None
  for line in done.stderr.splitlines():
    if VARIABLE in line:
      # 'F0000 ... parse_flags_from_env.cc:234] Unknown flag in ...'
      return line.split('] ', 1)[-1].strip()
  return None


def problem(env=None) -> Optional[str]:
  """One line naming TF_XLA_FLAGS and what is wrong with it, else None."""
  env = dict(os.environ if env is None else env)
  value = env.get(VARIABLE, '')
  reason = syntax_problem(value)
  if reason is None and set(value.split()) - {DEFAULT_FLAG}:
    reason = probe_problem(env)
  if reason is None:
    return None
  return '%s=%r: %s (TensorFlow would abort at its first device)' % (
    VARIABLE,
    value,
    reason,
  )
