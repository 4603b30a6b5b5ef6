"""Makes this project importable from the classic script folder.

Classic callers run with this folder as their working directory or on
sys.path (`import benchmark_cnn`, `python tf_cnn_benchmarks.py`). Here
`tf_cnn_benchmarks` would name the launcher script, not the package, so the
project root goes first on sys.path; this folder stays on it (after the
root) for the caller's own `import flags` / `import cnn_util`. Imported
first by every launcher of the folder.
"""

import os
import sys

FOLDER = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(FOLDER))


def put_root_first() -> None:
  """The project root first on sys.path; a shadowing module forgotten."""
  sys.path[:] = [p for p in sys.path if os.path.abspath(p or '.') != ROOT]
  sys.path.insert(0, ROOT)
  loaded = sys.modules.get('tf_cnn_benchmarks')
  if loaded is not None and not hasattr(loaded, '__path__'):
    # The launcher script imported as a module (`import tf_cnn_benchmarks`
    # from this folder): the package must take its name.
    del sys.modules['tf_cnn_benchmarks']


put_root_first()
