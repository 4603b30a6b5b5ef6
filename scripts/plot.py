#!/usr/bin/env python3
"""Plot images/sec and scaling efficiency against the device count.

The module tf_cnn_benchmarks.commands.plot runs it, with the
same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('plot')
