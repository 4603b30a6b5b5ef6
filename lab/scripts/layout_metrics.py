"""The code layout's figures: files and lines per room, sys.path edits
outside the tests, and imports inside functions, per top-level folder.

  python -m lab.scripts.layout_metrics [CHECKOUT]

Counts the Python files git tracks in CHECKOUT (default: this one), so two
commits compare with two worktrees.
"""

import argparse
import ast
import collections
import pathlib
import subprocess


def python_files(root: pathlib.Path) -> list:
  """The .py files git tracks under `root`, as relative paths."""
  out = subprocess.run(
    ['git', 'ls-files', '*.py'],
    cwd=root,
    capture_output=True,
    text=True,
    check=True,
  ).stdout.split()
  return [pathlib.PurePosixPath(p) for p in out]


def room_of(rel: pathlib.PurePosixPath) -> str:
  """The room a file counts in: its folder, down to a driver sub-room."""
  depth = 3 if rel.parts[0] == 'tf_cnn_benchmarks' else 2
  return '/'.join(rel.parts[: min(depth, len(rel.parts) - 1)]) or '.'


def function_imports(tree: ast.AST) -> int:
  """Import statements inside function bodies (nested ones count once)."""
  seen = set()
  for node in ast.walk(tree):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
      for sub in ast.walk(node):
        if isinstance(sub, (ast.Import, ast.ImportFrom)):
          seen.add(id(sub))
  return len(seen)


def main(argv=None) -> int:
  """Prints the figures; returns 0."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('checkout', nargs='?', default='.')
  root = pathlib.Path(parser.parse_args(argv).checkout)
  rooms = collections.defaultdict(lambda: [0, 0])
  late = collections.Counter()
  path_edits = 0
  for rel in python_files(root):
    text = (root / rel).read_text(encoding='utf-8')
    rooms[room_of(rel)][0] += 1
    rooms[room_of(rel)][1] += text.count('\n')
    if rel.parts[0] not in ('tests', 'lab'):
      path_edits += sum(
        (
          'sys.path.insert' in ln
          or 'sys.path.append' in ln
          or 'sys.path[' in ln
        )
        and not ln.lstrip().startswith('#')
        for ln in text.splitlines()
      )
    late[rel.parts[0]] += function_imports(ast.parse(text))
  for room in sorted(rooms):
    print('%-40s %4d files %6d lines' % (room, *rooms[room]))
  print('sys.path edits outside tests and lab: %d' % path_edits)
  print('imports inside functions: %s' % dict(sorted(late.items())))
  return 0


if __name__ == '__main__':
  raise SystemExit(main())
