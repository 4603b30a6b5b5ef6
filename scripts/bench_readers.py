#!/usr/bin/env python3
"""Peak memory and time of the results readers on a large results file.

The module tf_cnn_benchmarks.commands.bench_readers runs it, with the same
arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('bench_readers')
