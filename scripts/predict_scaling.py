#!/usr/bin/env python3
"""Predict images/sec of every strategy on a cluster, from one host's profile.

The module tf_cnn_benchmarks.commands.predict_scaling runs it, with the
same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('predict_scaling')
