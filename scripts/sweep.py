#!/usr/bin/env python3
"""Run a benchmark over a grid of flag values, one process per point.

The module tf_cnn_benchmarks.commands.sweep runs it, with the
same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('sweep')
