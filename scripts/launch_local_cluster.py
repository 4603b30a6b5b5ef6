#!/usr/bin/env python3
"""Runs one multi-worker benchmark as a cluster of local processes.

The module tf_cnn_benchmarks.commands.launch_local_cluster runs it, with the
same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('launch_local_cluster')
