#!/usr/bin/env python3
"""Writes a small fake ImageNet or CIFAR-10 dataset in the real on-disk format.

The module tf_cnn_benchmarks.commands.make_fake_data runs it, with the
same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('make_fake_data')
