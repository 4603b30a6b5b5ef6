#!/usr/bin/env python3
"""How long a run takes to start, phase by phase, against the classic harness.

The module tf_cnn_benchmarks.commands.startup_vs_classic runs it, with the
same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('startup_vs_classic')
