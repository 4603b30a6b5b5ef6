#!/usr/bin/env python3
"""What each gradient compressor buys and costs on a throttled local cluster.

The module tf_cnn_benchmarks.commands.compression_benchmark runs it, with the
same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('compression_benchmark')
