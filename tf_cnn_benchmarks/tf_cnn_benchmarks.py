"""The classic entry script: `python tf_cnn_benchmarks/tf_cnn_benchmarks.py`.

Classic users' scripts call this path; it behaves exactly like
`python -m tf_cnn_benchmarks` with the same flags (same output, results line
and exit status). The classic `ml_perf_compliance_logging` flag is one of
the classic flags every entry point accepts (see classic_flags.py).
"""

import os
import sys


def _fix_import_path() -> None:
  """Imports the package, not this script's directory, as top level.

  Run as a script, Python puts this file's directory first on sys.path, where
  `tf_cnn_benchmarks` would name this very file and `datasets` the package's
  module; the repository root is what `python -m` would put there.
  """
  here = os.path.dirname(os.path.abspath(__file__))
  root = os.path.dirname(here)
  sys.path[:] = [p for p in sys.path if os.path.abspath(p or '.') != here]
  sys.path.insert(0, root)


if __name__ == '__main__':
  _fix_import_path()
  from tf_cnn_benchmarks import __main__ as entry  # pylint: disable=g-import-not-at-top

  entry.exit_process(entry.main(sys.argv))
