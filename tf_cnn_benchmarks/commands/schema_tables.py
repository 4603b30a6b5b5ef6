#!/usr/bin/env python3
"""Rewrites results/README.md's field tables from results/schema.json.

  python scripts/schema_tables.py            # rewrite the tables in place
  python scripts/schema_tables.py --check    # exit 1 if they are stale

Each table sits between two markers naming a `$defs` entry of the schema:

  <!-- schema-table: base -->
  ...generated...
  <!-- /schema-table -->

(or several entries, `<!-- schema-table: run training eval_info -->`) and
lists their properties in the schema's order: key, type, the kind of line
(the entry's title), whether every line of that kind has it, and its
description. The schema is
the source of truth; edit it, then run this script.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from tf_cnn_benchmarks.platform import checkout

REPO_ROOT = checkout.ROOT
SCHEMA_PATH = os.path.join(REPO_ROOT, 'results', 'schema.json')
README_PATH = os.path.join(REPO_ROOT, 'results', 'README.md')
TABLE_RE = re.compile(
  r'(<!-- schema-table: (?P<name>[a-z_ ]+?) -->\n)(?P<body>.*?)'
  r'(<!-- /schema-table -->)',
  re.DOTALL,
)
_TYPE_NAMES = {
  'integer': 'int',
  'number': 'float',
  'string': 'str',
  'boolean': 'bool',
  'object': 'object',
  'null': 'null',
}


def type_text(prop: dict) -> str:
  """A property's JSON type in words: 'float or null', 'list of int'."""
  if '$ref' in prop:
    return 'object'
  types = prop.get('type', [])
  types = [types] if isinstance(types, str) else list(types)
  words = []
  for name in types:
    if name == 'array':
      item = type_text(prop.get('items', {}))
      words.append('list of ' + ('(%s)' % item if ' or ' in item else item))
    else:
      words.append(_TYPE_NAMES.get(name, name))
  return ' or '.join(words) or 'any'


def _meaning(prop: dict) -> str:
  """A property's description, plus its allowed values when it has a list."""
  text = prop.get('description', '')
  allowed = [v for v in prop.get('enum', ()) if v is not None]
  if allowed and not all('`%s`' % v in text for v in allowed):
    text += ': one of %s' % ', '.join('`%s`' % v for v in allowed)
  return text


def _cell(text: str) -> str:
  """Text fit for one Markdown table cell."""
  return text.replace('|', '\\|').replace('\n', ' ')


def table(schema: dict, names: str) -> str:
  """The Markdown table of the properties of `$defs` entries (names: one or
  more, space-separated), each row naming its entry's title."""
  rows = [
    '| key | type | lines | always there | meaning |',
    '|---|---|---|---|---|',
  ]
  for name in names.split():
    entry = schema['$defs'][name]
    required = set(entry.get('required', ()))
    for key, prop in entry['properties'].items():
      rows.append(
        '| `%s` | %s | %s | %s | %s |'
        % (
          key,
          type_text(prop),
          entry.get('title', ''),
          'yes' if key in required else 'no',
          _cell(_meaning(prop)),
        )
      )
  return '\n'.join(rows) + '\n'


def render(readme: str, schema: dict) -> str:
  """`readme` with every marked table regenerated from `schema`.

  Raises:
    KeyError: a marker names no `$defs` entry.
  """
  return TABLE_RE.sub(
    lambda m: m.group(1) + table(schema, m.group('name')) + m.group(4),
    readme,
  )


def main(argv=None) -> int:
  """Rewrite (or --check) the README's tables; the exit status."""
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument(
    '--check', action='store_true', help='only say whether they are stale'
  )
  args = parser.parse_args(argv)
  with open(SCHEMA_PATH, encoding='utf-8') as f:
    schema = json.load(f)
  with open(README_PATH, encoding='utf-8') as f:
    readme = f.read()
  try:
    fresh = render(readme, schema)
  except KeyError as e:
    print(
      'schema_tables.py: error: %s: a table marker names %s, which is no '
      '$defs entry of %s' % (README_PATH, e, SCHEMA_PATH),
      file=sys.stderr,
    )
    return 2
  if fresh == readme:
    return 0
  if args.check:
    print(
      '%s: tables differ from %s; run scripts/schema_tables.py'
      % (README_PATH, SCHEMA_PATH),
      file=sys.stderr,
    )
    return 1
  with open(README_PATH, 'w', encoding='utf-8') as f:
    f.write(fresh)
  return 0


if __name__ == '__main__':
  sys.exit(main())
