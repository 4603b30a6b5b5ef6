#!/usr/bin/env python3
"""How often a run's printed 95% interval holds what other runs measure.

The module tf_cnn_benchmarks.commands.interval_coverage runs it, with the
same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('interval_coverage')
