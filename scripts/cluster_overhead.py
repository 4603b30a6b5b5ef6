#!/usr/bin/env python3
"""What a cluster on one host costs against one process with the same towers.

The module tf_cnn_benchmarks.commands.cluster_overhead runs it, with the
same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('cluster_overhead')
