#!/usr/bin/env python3
"""Write one self-contained HTML page from results files.

The module tf_cnn_benchmarks.commands.report runs it, with the
same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('report')
