"""The classic path `python scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py`.

A thin launcher: the same run, output and exit status as
`python -m tf_cnn_benchmarks` with the same flags.
"""

import sys

import _classic_root  # noqa: F401  (first: the package, not this script)

if __name__ == '__main__':
  from tf_cnn_benchmarks import __main__ as entry  # pylint: disable=g-import-not-at-top

  entry.exit_process(entry.main(sys.argv))
