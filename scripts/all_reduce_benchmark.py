#!/usr/bin/env python3
"""Times every all-reduce algorithm over device counts and tensor sizes.

The module tf_cnn_benchmarks.commands.all_reduce_benchmark runs it, with the
same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('all_reduce_benchmark')
