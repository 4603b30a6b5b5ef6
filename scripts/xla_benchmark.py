#!/usr/bin/env python3
"""Images/sec without XLA, with --xla and with --xla_compile, side by side.

The module tf_cnn_benchmarks.commands.xla_benchmark runs it, with the
same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('xla_benchmark')
