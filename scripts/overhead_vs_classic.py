#!/usr/bin/env python3
"""This harness against the classic tf_cnn_benchmarks, side by side.

The module tf_cnn_benchmarks.commands.overhead_vs_classic runs it, with the
same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('overhead_vs_classic')
