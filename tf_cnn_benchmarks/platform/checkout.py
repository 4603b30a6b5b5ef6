"""Where this copy of the package lives, and how a child process runs one of
its modules from any directory (no sys.path edits: the child gets the copy's
root on PYTHONPATH)."""

import os
import sys
from typing import List, Mapping, Optional

# The directory that holds the tf_cnn_benchmarks package: a checkout's root,
# or site-packages when installed.
ROOT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
# A checkout (not an installed copy): its scripts/, results/ and lab/ exist.
IN_CHECKOUT = os.path.isfile(os.path.join(ROOT, 'pyproject.toml'))


def child_env(env: Optional[Mapping[str, str]] = None) -> dict:
  """`env` (default: this process's) with ROOT first on PYTHONPATH."""
  env = dict(os.environ if env is None else env)
  rest = [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p]
  env['PYTHONPATH'] = os.pathsep.join([ROOT] + [p for p in rest if p != ROOT])
  return env


def module_argv(module: str, *args: str, python: str = '') -> List[str]:
  """The argv that runs `python -m module args...` (give it child_env())."""
  return [python or sys.executable, '-m', module, *args]
