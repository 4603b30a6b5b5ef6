"""The plan of a sweep: its grid, its points and the runs still to do.

Part of scripts/sweep.py (format of grid files and flags: its docstring).
A point's runs are its repeats (--repeats N): earlier results lines count as
done repeats, so a rerun tops up what is missing.
"""

import hashlib
import itertools
import os
import re
import sys

from tf_cnn_benchmarks.commands import results_io as rio

InputError = rio.InputError

WORKERS_FLAG = 'num_workers'
# Flags the sweep sets itself; a grid may not set them.
RESERVED_FLAGS = ('result_file',)

FLAG_NAME_RE = re.compile(r'^[A-Za-z][A-Za-z0-9_]*$')
# '#' at the start of a line or after whitespace starts a comment.
COMMENT_RE = re.compile(r'(^|\s)#.*$')
GRID_LINE_RE = re.compile(r'^(axis|fixed)\s+([^\s=]+)\s*=\s*(.*)$')
# Characters kept as they are in log file names; others become '_'.
UNSAFE_FILE_CHARS_RE = re.compile(r'[^A-Za-z0-9._,=+-]')
MAX_LOG_STEM = 150


class Grid(object):
  """Axes (name -> list of values) and fixed flags (name -> value), in order.

  `where` maps each flag name to where it was defined, for error messages.
  """

  def __init__(self):
    self.axes = []
    self.fixed = []
    self.where = {}

  def add_axis(self, name, values, where):
    """Add an axis; raises InputError for a bad name or values.

    A compound axis `a+b` sets several flags together: each value is
    `va+vb`, and an empty part leaves that flag out for the point.
    """
    parts = name.split('+')
    for part in parts:
      self._check_name(part, where)
    if len(parts) > 1 and WORKERS_FLAG in parts:
      raise InputError(
        '%s: %s cannot be part of a compound axis' % (where, WORKERS_FLAG)
      )
    values = [v.strip() for v in values.split(',')]
    if len(parts) > 1:
      for value in values:
        if len(value.split('+')) != len(parts):
          raise InputError(
            '%s: axis %s value %r needs %d parts joined by +'
            % (where, name, value, len(parts))
          )
    if any(not v for v in values):
      raise InputError(
        '%s: axis %s has an empty value (values are '
        'comma-separated, e.g. 1,2,4)' % (where, name)
      )
    duplicates = sorted(set(v for v in values if values.count(v) > 1))
    if duplicates:
      raise InputError(
        '%s: axis %s repeats value %s' % (where, name, duplicates[0])
      )
    if name == WORKERS_FLAG:
      for value in values:
        _check_workers(value, where)
    self.axes.append((name, values))

  def add_fixed(self, name, value, where):
    """Add a fixed flag; raises InputError for a bad name or value."""
    self._check_name(name, where)
    value = value.strip()
    if not value:
      raise InputError('%s: fixed %s has no value' % (where, name))
    if name == WORKERS_FLAG:
      _check_workers(value, where)
    self.fixed.append((name, value))

  def _check_name(self, name, where):
    if not FLAG_NAME_RE.match(name):
      raise InputError(
        '%s: %r is not a flag name (letters, digits and _, '
        'no dashes)' % (where, name)
      )
    if name in RESERVED_FLAGS:
      raise InputError('%s: %s is set by the sweep itself' % (where, name))
    if name in self.where:
      raise InputError(
        '%s: %s is already defined at %s' % (where, name, self.where[name])
      )
    self.where[name] = where


def _check_workers(value, where):
  """num_workers values must be positive integers: they size the cluster."""
  if not value.isdigit() or int(value) < 1:
    raise InputError(
      '%s: num_workers must be a positive integer, got %r' % (where, value)
    )


def parse_grid_text(text, source, grid=None):
  """Parse grid-file text (format in the module docstring) into a Grid.

  Errors name source:line. Returns the grid (a new one unless given).
  """
  grid = grid if grid is not None else Grid()
  for number, line in enumerate(text.splitlines(), start=1):
    line = COMMENT_RE.sub('', line).strip()
    if not line:
      continue
    where = '%s:%d' % (source, number)
    match = GRID_LINE_RE.match(line)
    if not match:
      raise InputError(
        "%s: expected 'axis FLAG = V1,V2,...' or "
        "'fixed FLAG = VALUE', got %r" % (where, line)
      )
    kind, name, value = match.groups()
    if kind == 'axis':
      grid.add_axis(name, value, where)
    else:
      grid.add_fixed(name, value, where)
  return grid


def parse_grid_file(path, grid=None):
  """Read and parse a grid file; a missing file is an InputError."""
  try:
    with open(path) as f:
      text = f.read()
  except OSError as e:
    raise InputError(
      '--grid: cannot read %s: %s' % (path, e.strerror or e)
    ) from None
  return parse_grid_text(text, path, grid)


def _split_assignment(text, flag):
  """Split a '--axis'/'--fixed' argument 'NAME=VALUE' into (NAME, VALUE)."""
  name, sep, value = text.partition('=')
  if not sep:
    raise InputError(
      '%s %s: expected NAME=%s'
      % (flag, text, 'V1,V2,...' if flag == '--axis' else 'VALUE')
    )
  return name.strip(), value


def build_grid(args):
  """Combine --grid, --axis and --fixed into one validated Grid."""
  grid = Grid()
  if args.grid:
    parse_grid_file(args.grid, grid)
  for text in args.axis:
    name, values = _split_assignment(text, '--axis')
    grid.add_axis(name, values, '--axis %s' % name)
  for text in args.fixed:
    name, value = _split_assignment(text, '--fixed')
    grid.add_fixed(name, value, '--fixed %s' % name)
  if not grid.axes:
    raise InputError(
      "no axes: give --axis FLAG=V1,V2 or an 'axis FLAG = V1,V2' line in --grid"
    )
  return grid


def make_point_id(point):
  """Stable readable id of a point: 'a=1,b=x' with axes sorted by name."""
  return ','.join('%s=%s' % (name, point[name]) for name in sorted(point))


def log_stem(point_id):
  """File-name-safe form of a point id (long ids are cut and hashed)."""
  stem = UNSAFE_FILE_CHARS_RE.sub('_', point_id)
  if len(stem) > MAX_LOG_STEM:
    digest = hashlib.sha1(point_id.encode('utf-8')).hexdigest()[:10]
    stem = '%s-%s' % (stem[: MAX_LOG_STEM - 11], digest)
  return stem


class Point(object):
  """One grid point: axis values, its id, its log stem and all its flags."""

  def __init__(self, grid, values):
    self.point = dict(zip([name for name, _ in grid.axes], values))
    self.point_id = make_point_id(self.point)
    self.stem = log_stem(self.point_id)
    # Fixed flags first, then axes, both in definition order; compound axes
    # expand to their parts, empty parts left out.
    self.flags = list(grid.fixed)
    for (name, _), value in zip(grid.axes, values):
      for part, part_value in zip(name.split('+'), value.split('+')):
        if part_value:
          self.flags.append((part, part_value))


def make_points(grid):
  """All points of the grid, first axis varying slowest."""
  points = [
    Point(grid, values)
    for values in itertools.product(*[v for _, v in grid.axes])
  ]
  seen = {}
  for point in points:
    _check_auto_lengths(point)
    # Distinct ids can only collide here after unsafe characters became '_'.
    if point.stem in seen:
      raise InputError(
        'points %s and %s would share the log file %s.log; '
        'rename a value' % (seen[point.stem], point.point_id, point.stem)
      )
    seen[point.stem] = point.point_id
  return points


# The benchmark flags that take 'auto' for a length decided during the run;
# a cluster's workers must stop at the same step, so not with num_workers.
AUTO_LENGTH_FLAGS = ('num_batches', 'num_warmup_batches')


def _check_auto_lengths(point):
  """Refuses a point that runs an automatic length in a cluster."""
  names = dict(point.flags)
  if WORKERS_FLAG not in names:
    return
  for name in AUTO_LENGTH_FLAGS:
    if names.get(name, '').strip().lower() == 'auto':
      raise InputError(
        'point %s: %s=auto is not allowed with %s (every worker must stop '
        'at the same step); give a number'
        % (point.point_id, name, WORKERS_FLAG)
      )


def build_command(point, module, launcher, result_file):
  """The argv that runs one point (through the launcher for num_workers)."""
  workers = None
  flags = []
  for name, value in point.flags:
    if name == WORKERS_FLAG:
      workers = value
    else:
      flags.append('--%s=%s' % (name, value))
  flags.append('--result_file=%s' % result_file)
  if workers is None:
    return [sys.executable, '-m', module] + flags
  return [sys.executable, launcher, '--num_workers=%s' % workers, '--'] + flags


def record_repeat(tag):
  """The repeat index a sweep tag records (lines before --repeats: 0)."""
  repeat = tag.get('repeat', 0)
  return repeat if isinstance(repeat, int) and repeat >= 0 else 0


def load_previous(results_path):
  """Repeats of earlier runs of this sweep, by point id: (ok, failed).

  Both map a point id to a set of repeat indices; a repeat that failed once
  and later succeeded counts as ok only. A point that ran before repeats
  existed (no `repeat` in its tag) counts as repeat 0.
  """
  ok, failed = {}, {}
  if os.path.exists(results_path):
    records = rio.read_jsonl(
      results_path, hint='fix or delete that line, then resume'
    )
  else:
    records = []
  for _, record in records:
    tag = record.get('sweep')
    if not isinstance(tag, dict) or 'point_id' not in tag:
      continue
    into = ok if record.get('status', 'ok') == 'ok' else failed
    into.setdefault(tag['point_id'], set()).add(record_repeat(tag))
  for point_id, done in ok.items():
    failed[point_id] = failed.get(point_id, set()) - done
  return ok, failed


class Run(object):
  """One run of a point: `repeat` is the index its results line records.

  slot: its place among the point's N repeats (0..N-1): runs go slot by
  slot, every point once per slot. done: an earlier ok line has it.
  """

  def __init__(self, point, slot, repeat, done):
    self.point = point
    self.slot = slot
    self.repeat = repeat
    self.done = done

  @property
  def stem(self):
    """File-name stem of the run's log: the point's, '.rK' after repeat 0."""
    if self.repeat == 0:
      return self.point.stem
    return '%s.r%d' % (self.point.stem, self.repeat)


def plan_runs(points, repeats, ok):
  """Every point's `repeats` runs, interleaved: all points once, then again.

  ok: point id -> repeat indices with an ok line (load_previous). A point
  with k of them (k < repeats) keeps k as done and gets repeats - k new
  runs, under the smallest indices not used yet, so a rerun tops up what
  is missing and no index is recorded twice.
  """
  runs = []
  for order, point in enumerate(points):
    done = sorted(ok.get(point.point_id, ()))[:repeats]
    fresh = (i for i in itertools.count() if i not in set(done))
    indices = done + list(itertools.islice(fresh, repeats - len(done)))
    for slot, index in enumerate(indices):
      runs.append((slot, order, Run(point, slot, index, slot < len(done))))
  runs.sort(key=lambda item: item[:2])
  return [run for _, _, run in runs]
