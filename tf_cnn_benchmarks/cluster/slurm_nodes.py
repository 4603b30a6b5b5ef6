"""The nodes of a Slurm step, read with a bound: {host: tasks on it}.

TensorFlow's SlurmClusterResolver expands SLURM_STEP_NODELIST in full
before it compares it with anything: 'n[1-999999999]' is a billion names
(a MemoryError after a minute, or a process that grows until it is
killed). Here SLURM_STEP_TASKS_PER_NODE is counted without being expanded
(its tasks must add up to SLURM_STEP_NUM_TASKS), the node list is counted
range by range, and it is expanded only when it names exactly as many
nodes as the tasks-per-node list places tasks on (so never more names than
the step has tasks). Each name must be a host name. The resolver is handed
the result (its tasks_per_node argument) and never reads the list itself.

The grammar is the resolver's: comma-separated parts, each a prefix and at
most one bracketed list of numbers and ranges at its end ('n[1-3,7],gpu05';
a range keeps the width of its first number: n[08-10] is n08, n09, n10).
"""

from __future__ import annotations

import re
from typing import Iterator, Mapping

from tf_cnn_benchmarks.cluster import spec

NODELIST = 'SLURM_STEP_NODELIST'
TASKS_PER_NODE = 'SLURM_STEP_TASKS_PER_NODE'
NUM_TASKS = 'SLURM_STEP_NUM_TASKS'

_COUNT = re.compile(r'(\d+)(?:\(x(\d+)\))?')
_PART = re.compile(r'([^\[\]]*)(?:\[([^\[\]]+)\])?')
_RANGE = re.compile(r'(\d+)(?:-(\d+))?')
# More digits than this is no count or node number of a step.
_MAX_DIGITS = 9
NODELIST_FORMAT = 'want node names and ranges such as n[1-4,7],gpu05'


def _error(name: str, value: str, why: str) -> spec.ClusterError:
  return spec.ClusterError('%s=%s: %s' % (name, spec.shown(value), why))


def _number(text: str) -> int:
  """int(text) of a run of digits, or -1 when it has too many."""
  return int(text) if len(text) <= _MAX_DIGITS else -1


def tasks_per_node(text: str, num_tasks: int) -> list:
  """[(tasks, nodes)] of SLURM_STEP_TASKS_PER_NODE ('2(x3),1': 2 tasks on
  each of 3 nodes, then 1), unexpanded; the tasks add up to num_tasks."""
  runs, total = [], 0
  for part in text.split(','):
    match = _COUNT.fullmatch(part)
    if match is None:
      raise _error(TASKS_PER_NODE, text, 'want tasks per node such as 2(x3),1')
    tasks, nodes = _number(match.group(1)), _number(match.group(2) or '1')
    if tasks < 1 or nodes < 1:
      raise _error(
        TASKS_PER_NODE,
        text,
        'each count must be in 1..%d' % (10**_MAX_DIGITS - 1),
      )
    runs.append((tasks, nodes))
    total += tasks * nodes
  if total != num_tasks:
    raise spec.ClusterError(
      '%s=%s: places %d task(s), but %s=%d'
      % (TASKS_PER_NODE, spec.shown(text), total, NUM_TASKS, num_tasks)
    )
  return runs


def _parts(text: str) -> list:
  """The node list split at the commas outside brackets."""
  parts, current, inside = [], [], False
  for c in text:
    if c == ',' and not inside:
      parts.append(''.join(current))
      current = []
      continue
    if c in '[]':
      if inside == (c == '['):  # '[' inside, or ']' outside, brackets
        raise _error(NODELIST, text, NODELIST_FORMAT)
      inside = c == '['
    current.append(c)
  if inside:
    raise _error(NODELIST, text, NODELIST_FORMAT)
  return parts + [''.join(current)]


def _ranges(text: str, part: str) -> tuple:
  """(prefix, [(first, last, width)]) of one part of the node list."""
  match = _PART.fullmatch(part)
  if not part or match is None:
    raise _error(NODELIST, text, NODELIST_FORMAT)
  prefix, numbers = match.group(1), match.group(2)
  if numbers is None:
    return prefix, [(None, None, 0)]
  out = []
  for item in numbers.split(','):
    found = _RANGE.fullmatch(item)
    if found is None:
      raise _error(NODELIST, text, NODELIST_FORMAT)
    first = _number(found.group(1))
    last = _number(found.group(2) or found.group(1))
    if first < 0 or last < first:
      raise _error(
        NODELIST,
        text,
        'range [%s]: want FIRST-LAST with FIRST <= LAST, at most %d digits'
        % (item, _MAX_DIGITS),
      )
    out.append((first, last, len(found.group(1))))
  return prefix, out


def _count(parsed: list) -> int:
  """How many names the parsed node list stands for (not expanded)."""
  return sum(
    1 if first is None else last - first + 1
    for _, ranges in parsed
    for first, last, _ in ranges
  )


def _names(parsed: list) -> Iterator[str]:
  """The node names, in the list's order (lazily)."""
  for prefix, ranges in parsed:
    for first, last, width in ranges:
      if first is None:
        yield prefix
        continue
      for number in range(first, last + 1):
        yield prefix + str(number).zfill(width)


def step_nodes(env: Mapping[str, str], num_tasks: int) -> dict:
  """{host: tasks} of the step, in SLURM_STEP_NODELIST's order.

  Raises spec.ClusterError (one line naming the variable, its value
  escaped) for a malformed list, a node count other than the tasks-per-node
  list's, a name that is no host name, or a node listed twice.
  """
  text = env[NODELIST]
  runs = tasks_per_node(env[TASKS_PER_NODE], num_tasks)
  parsed = [_ranges(text, part) for part in _parts(text)]
  wanted, listed = sum(nodes for _, nodes in runs), _count(parsed)
  if listed != wanted:
    raise spec.ClusterError(
      '%s=%s: lists %d node(s), but %s=%s places the tasks on %d'
      % (
        NODELIST,
        spec.shown(text),
        listed,
        TASKS_PER_NODE,
        spec.shown(env[TASKS_PER_NODE]),
        wanted,
      )
    )
  counts = (tasks for tasks, nodes in runs for _ in range(nodes))
  out = {}
  for name, tasks in zip(_names(parsed), counts):
    if not spec.is_host(name):
      raise _error(
        NODELIST,
        text,
        'node %s is no host name (%s)' % (spec.shown(name), spec.HOST_RULE),
      )
    if name in out:
      raise _error(NODELIST, text, 'node %s is listed twice' % name)
    out[name] = tasks
  return out
