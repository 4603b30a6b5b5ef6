#!/usr/bin/env python3
"""One end of a link measurement between two tasks of the local launcher.

The module tf_cnn_benchmarks.commands.measure_link runs it, with the
same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('measure_link')
