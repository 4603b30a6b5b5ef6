#!/usr/bin/env python3
"""Rewrites docs/models.md's model table from models/declared.py.

The module tf_cnn_benchmarks.commands.model_doc_table runs it, with the
same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('model_doc_table')
