#!/usr/bin/env python3
"""Rewrites docs/models.md's model table from models/declared.py.

  python scripts/model_doc_table.py                # rewrite the table
  python scripts/model_doc_table.py --check        # exit 1 if it is stale
  python scripts/model_doc_table.py --measure=vgg16,resnet20   # count again

The table sits between `<!-- model-table: ... -->` and `<!-- /model-table -->`
and has one row per declared model: its name, dataset, image size and
default batch from the declaration, its parameters and forward GFLOPs as
recorded in the table. A declared model without a row is built and counted
(so is every model --measure names, or all of them with --measure=all); a row
of a model no longer declared is dropped. --check builds nothing.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

from tf_cnn_benchmarks.platform import checkout
from tf_cnn_benchmarks.reporting import model_table  # no TensorFlow

REPO_ROOT = checkout.ROOT
DOC_PATH = os.path.join(REPO_ROOT, 'docs', 'models.md')


def _remeasured(spec: str) -> set:
  """The (name, dataset) keys --measure names: 'all', or names."""
  keys = set(model_table.declared().by_key())
  if spec == 'all':
    return keys
  names = {n for n in spec.split(',') if n}
  unknown = names - {name for name, _ in keys}
  if unknown:
    raise ValueError('--measure: no declared model %s' % ', '.join(unknown))
  return {key for key in keys if key[0] in names}


@functools.lru_cache(maxsize=None)
def _load_tensorflow():
  """TensorFlow, loaded once with its start-up lines kept off stderr."""
  # Only a build needs TensorFlow; --check and a fresh table never load it.
  from tf_cnn_benchmarks.platform import quiet  # pylint: disable=g-import-not-at-top

  return quiet.load_tensorflow()


def _measure_quietly(name: str, data_name: str):
  """model_table.measure, TensorFlow loaded first."""
  _load_tensorflow()
  print('counting %s (%s)' % (name, data_name), file=sys.stderr, flush=True)
  return model_table.measure(name, data_name)


def main(argv=None) -> int:
  """Rewrite (or --check) the doc's model table; the exit status."""
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument(
    '--check', action='store_true', help='only say whether it is stale'
  )
  parser.add_argument(
    '--measure',
    default='',
    help="comma list of model names to build and count again, or 'all'",
  )
  parser.add_argument('--doc', default=DOC_PATH, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  with open(args.doc, encoding='utf-8') as f:
    doc = f.read()
  if args.check:
    problems = model_table.doc_table_problems(doc)
    for problem in problems:
      print('%s: %s' % (args.doc, problem), file=sys.stderr)
    if problems:
      print('run scripts/model_doc_table.py', file=sys.stderr)
    return 1 if problems else 0
  try:
    fresh = model_table.render_doc(
      doc, _measure_quietly, _remeasured(args.measure)
    )
  except ValueError as e:
    print('model_doc_table.py: error: %s' % e, file=sys.stderr)
    return 2
  if fresh != doc:
    with open(args.doc, 'w', encoding='utf-8') as f:
      f.write(fresh)
    print('rewrote %s' % args.doc)
  return 0


if __name__ == '__main__':
  sys.exit(main())
