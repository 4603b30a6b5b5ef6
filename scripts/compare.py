#!/usr/bin/env python3
"""Tabulate benchmark results: images/sec, speed-up and scaling efficiency.

The module tf_cnn_benchmarks.commands.compare runs it, with the
same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('compare')
