#!/usr/bin/env python3
"""Score the hardware model on the published scaling tables (results/published).

The module tf_cnn_benchmarks.commands.validate_on_paper runs it, with
the same arguments (`--help` says how to use it)."""

import _entry  # beside this script

if __name__ == '__main__':
  _entry.run('validate_on_paper')
