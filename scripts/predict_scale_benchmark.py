#!/usr/bin/env python3
"""Time and peak memory of predicting every strategy against cluster size.

The module tf_cnn_benchmarks.commands.predict_scale_benchmark runs it, with
the same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('predict_scale_benchmark')
