#!/usr/bin/env python3
"""Measures this host's scaling profile (one JSON file) and prints a summary.

The module tf_cnn_benchmarks.commands.profile_host runs it, with the
same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('profile_host')
