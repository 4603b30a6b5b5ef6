#!/usr/bin/env python3
"""Rewrites results/README.md's field tables from results/schema.json.

The module tf_cnn_benchmarks.commands.schema_tables runs it, with the
same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('schema_tables')
