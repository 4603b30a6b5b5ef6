"""Run a benchmark over a grid of flag values, one process per point.

Usage (from the repo root):

  .venv/bin/python scripts/sweep.py --name NAME [--grid FILE]
      [--axis FLAG=V1,V2,...]... [--fixed FLAG=VALUE]...
      [--results_dir DIR] [--timeout SECONDS] [--dry_run] [--retry_failed]
      [--module MODULE] [--launcher PATH]

Every combination of the axis values is a point. A point runs as

  <python> -m MODULE --FIXED=VALUE... --AXIS=VALUE... --result_file=<tmp>

(MODULE defaults to tf_cnn_benchmarks; the repo root is put first on the
child's PYTHONPATH so it is found from any working directory; <tmp> is
DIR/NAME/tmp/<point id>.jsonl). Its console output goes to
DIR/NAME/logs/<point id>.log (characters other than letters, digits and
._,=+- become '_' in file names). On success the result line(s) it wrote
are appended to DIR/NAME.jsonl with a "sweep" tag:

  "sweep": {"name": NAME, "point": {axis: value, ...}, "point_id": ID,
            "log": "NAME/logs/<file>.log"}

On failure or timeout a line with "status": "error", "error" (the last
exception line of the log, e.g. "ValueError: ...", else its last line; or
"timeout after Ns"), "returncode", "params" (the point's flags) and the same
tag is appended instead, and the sweep goes on.
Appends are atomic (tf_cnn_benchmarks/reporting/result_lines.py: one os.write
on an
O_APPEND descriptor, under a flock of the file).

Resuming: running the same sweep again skips every point that already has an
"ok" line in DIR/NAME.jsonl, so a killed sweep loses at most the point that
was running. Points that failed are skipped too unless --retry_failed is
given. The point id is built from the axis values sorted by axis name, e.g.
"num_gpus=2,variable_update=replicated", so reordering the axes keeps it.
A lock file (DIR/NAME/.lock) stops two sweeps of one name running at once.

Grid file format (plain lines, not JSON/YAML):

  # A comment: '#' at the start of a line or after whitespace.
  axis  num_gpus        = 1, 2, 4
  axis  variable_update = parameter_server, replicated
  fixed model           = resnet20
  fixed data_name       = cifar10      # inline comments are fine

- "axis FLAG = V1, V2, ..." adds an axis; values are split on commas and
  trimmed, so a value cannot contain a comma. Axes vary in file order, the
  first one slowest.
- "fixed FLAG = VALUE" passes --FLAG=VALUE to every point; VALUE is the rest
  of the line, trimmed (commas allowed).
- FLAG is a benchmark flag name without dashes. Booleans take true/false.
- --axis and --fixed on the command line add to the grid file's lines; a
  flag may be defined only once overall. result_file is set by the sweep.

A compound axis "axis FLAG1+FLAG2 = A1+A2, B1+, ..." sets several flags
together (part i goes to FLAG i; an empty part leaves that flag out), for
grids that are not a full cross product, e.g.
"axis variable_update+all_reduce_spec = parameter_server+, replicated+xring".

The special flag num_workers (as an axis or fixed, any N >= 1) runs the
point through the local cluster launcher instead, which gets N and passes
the other flags on (num_workers itself is not one of them):

  <python> scripts/launch_local_cluster.py --num_workers=N -- <flags>

Progress goes to stdout, one line per point:

  [k/n] POINT_ID ... ok 12.3s (elapsed 1m02s, ~3m left)

Exit status: 0 when every point has an ok line, 1 when some point failed,
2 for bad input (one line on stderr), 130 when interrupted.
"""

import argparse
import fcntl
import hashlib
import itertools
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import _lifetime
import _results_io as rio

# After _results_io, which puts the repository root on sys.path.
from tf_cnn_benchmarks.reporting import result_lines

InputError = rio.InputError

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODULE = 'tf_cnn_benchmarks'
DEFAULT_LAUNCHER = os.path.join(REPO_ROOT, 'scripts', 'launch_local_cluster.py')
WORKERS_FLAG = 'num_workers'
# Flags the sweep sets itself; a grid may not set them.
RESERVED_FLAGS = ('result_file',)

FLAG_NAME_RE = re.compile(r'^[A-Za-z][A-Za-z0-9_]*$')
SWEEP_NAME_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]*$')
MODULE_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$')
# '#' at the start of a line or after whitespace starts a comment.
COMMENT_RE = re.compile(r'(^|\s)#.*$')
GRID_LINE_RE = re.compile(r'^(axis|fixed)\s+([^\s=]+)\s*=\s*(.*)$')
# Characters kept as they are in log file names; others become '_'.
# An unindented 'pkg.module.SomeError: message' line of a traceback.
EXCEPTION_LINE_RE = re.compile(
  r'^([A-Za-z_]\w*\.)*[A-Za-z_]\w*(Error|Exception|Exit|Interrupt)\b:'
)
# Error messages in results lines are cut to this length.
MAX_ERROR_CHARS = 500
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
    # Distinct ids can only collide here after unsafe characters became '_'.
    if point.stem in seen:
      raise InputError(
        'points %s and %s would share the log file %s.log; '
        'rename a value' % (seen[point.stem], point.point_id, point.stem)
      )
    seen[point.stem] = point.point_id
  return points


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


def load_previous(results_path):
  """Point ids of earlier runs of this sweep: (ids with an ok line, failed).

  A point that failed once and later succeeded counts as ok only.
  """
  ok, failed = set(), set()
  if not os.path.exists(results_path):
    return ok, failed
  for _, record in rio.read_jsonl(
    results_path, hint='fix or delete that line, then resume'
  ):
    tag = record.get('sweep')
    if not isinstance(tag, dict) or 'point_id' not in tag:
      continue
    if record.get('status', 'ok') == 'ok':
      ok.add(tag['point_id'])
    else:
      failed.add(tag['point_id'])
  return ok, failed - ok


def format_duration(seconds):
  """'42s', '1m02s' or '1h05m': short elapsed-time text."""
  seconds = int(round(seconds))
  if seconds < 60:
    return '%ds' % seconds
  if seconds < 3600:
    return '%dm%02ds' % divmod(seconds, 60)
  return '%dh%02dm' % (seconds // 3600, seconds % 3600 // 60)


def format_eta(seconds):
  """Coarse remaining-time text: '~40s', '~3m', '~1h05m'."""
  seconds = int(round(seconds))
  if seconds < 60:
    return '~%ds' % seconds
  if seconds < 3600:
    return '~%dm' % int(round(seconds / 60.0))
  return '~%dh%02dm' % (seconds // 3600, seconds % 3600 // 60)


class _Terminated(Exception):
  """Raised by the SIGTERM handler so the running point gets cleaned up."""


def _on_sigterm(signum, frame):
  raise _Terminated()


def _kill_group(proc):
  """Stop a point's whole process group (the launcher starts several)."""
  for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, None)):
    try:
      os.killpg(proc.pid, sig)
    except ProcessLookupError:
      pass
    try:
      proc.wait(timeout=grace)
      return
    except subprocess.TimeoutExpired:
      continue


def run_process(command, log_path, timeout, env):
  """Run command with output to log_path; returns (returncode or None, secs).

  None means it ran past timeout and was killed. The child gets its own
  process group so a timeout or interrupt stops all of its descendants.
  """
  start = time.monotonic()
  with open(log_path, 'w') as log:
    log.write('$ %s\n' % shlex.join(command))
    log.flush()
    proc = subprocess.Popen(
      command,
      stdin=subprocess.DEVNULL,
      stdout=log,
      stderr=subprocess.STDOUT,
      env=env,
      start_new_session=True,
      # Killed with the sweep (even by SIGKILL): an orphan would keep
      # running and write the point's results after the rerun did.
      preexec_fn=_lifetime.die_with_parent_preexec(),
    )
    try:
      returncode = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
      _kill_group(proc)
      returncode = None
    except BaseException:
      _kill_group(proc)
      raise
  return returncode, time.monotonic() - start


def log_error_line(log_path):
  """The line of a failed point's log that best says why it failed.

  That is the last Python exception line ('ValueError: bad flag') whose
  message is not just a header ending in ':' (TensorFlow re-raises a specific
  error as 'InvalidArgumentError: Graph execution error:' followed by a stack
  dump, so the last line of the log is a stack frame). Without such a line,
  the last exception line, else the last non-empty line. Our '$ command'
  header is skipped. Returns None for an empty log.
  """
  try:
    with open(log_path, errors='replace') as f:
      lines = [
        line.strip() for line in f.read().splitlines()[1:] if line.strip()
      ]
  except OSError:
    return None
  exceptions = [line for line in lines if EXCEPTION_LINE_RE.match(line)]
  specific = [line for line in exceptions if not line.endswith(':')]
  for candidates in (specific, exceptions, lines):
    if candidates:
      return _shorten(candidates[-1], MAX_ERROR_CHARS)
  return None


def read_point_results(path):
  """Result lines a point wrote: (records, problem or None)."""
  if not os.path.exists(path):
    return [], None
  try:
    return [record for _, record in rio.read_jsonl(path, hint=None)], None
  except InputError as e:
    return [], 'benchmark wrote a bad result line: %s' % e


def point_outcome(returncode, timeout, records, problem, log_path):
  """Decide ok/error for a finished point; returns an error message or None."""
  if returncode is None:
    return 'timeout after %gs' % timeout
  if returncode != 0:
    return log_error_line(log_path) or 'exit status %d' % returncode
  if problem:
    return problem
  if not records:
    return 'exited 0 but wrote no result line'
  for record in records:
    if record.get('status', 'ok') != 'ok':
      message = str(
        record.get('error') or 'result status %r' % record.get('status')
      )
      return (message.strip().splitlines() or [''])[0]
  return None


def error_record(point, message, returncode, tag):
  """The line recorded for a point that failed or timed out."""
  return {
    'schema_version': 2,  # results.SCHEMA_VERSION
    'status': 'error',
    'error': message,
    'utc_time': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
    'returncode': returncode,
    'params': dict(point.flags),
    'sweep': tag,
  }


def child_env():
  """Environment for points: repo root on PYTHONPATH so -m finds the package
  from any working directory (entries already there are kept after it)."""
  env = dict(os.environ)
  parts = [REPO_ROOT] + [
    p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p
  ]
  env['PYTHONPATH'] = os.pathsep.join(parts)
  return env


class Sweep(object):
  """Runs the planned points of one sweep and reports progress."""

  def __init__(self, args, points):
    self.args = args
    self.points = points
    self.results_dir = os.path.abspath(args.results_dir)
    self.results_path = os.path.join(self.results_dir, args.name + '.jsonl')
    self.shown_results_path = os.path.join(
      args.results_dir, args.name + '.jsonl'
    )
    self.sweep_dir = os.path.join(self.results_dir, args.name)
    self.log_dir = os.path.join(self.sweep_dir, 'logs')
    self.tmp_dir = os.path.join(self.sweep_dir, 'tmp')
    self.launcher = args.launcher
    self.ok, self.failed = load_previous(self.results_path)

  def action(self, point):
    """'run', or why the point is skipped."""
    if point.point_id in self.ok:
      return 'skipped (ok in %s)' % self.shown_results_path
    if point.point_id in self.failed and not self.args.retry_failed:
      return 'skipped (failed before; --retry_failed re-runs it)'
    return 'run'

  def result_file(self, point):
    """Per-point file the benchmark writes; moved into NAME.jsonl after."""
    return os.path.join(self.tmp_dir, point.stem + '.jsonl')

  def command(self, point):
    """argv that runs a point, writing to its temporary result file."""
    return build_command(
      point, self.args.module, self.launcher, self.result_file(point)
    )

  def dry_run(self):
    """Print every point and what a real run would do with it."""
    n = len(self.points)
    for k, point in enumerate(self.points, start=1):
      action = self.action(point)
      shown = shlex.join(self.command(point)) if action == 'run' else action
      print('[%d/%d] %s: %s' % (k, n, point.point_id, shown))
    return 0

  def run(self):
    """Run all points that need it; returns the exit status."""
    self._prepare()
    n = len(self.points)
    todo = sum(1 for p in self.points if self.action(p) == 'run')
    start = time.monotonic()
    durations = []
    for k, point in enumerate(self.points, start=1):
      action = self.action(point)
      if action != 'run':
        print('[%d/%d] %s ... %s' % (k, n, point.point_id, action), flush=True)
        continue
      message, seconds = self.run_point(point)
      durations.append(seconds)
      outcome = 'ok' if message is None else 'error'
      detail = '' if message is None else ': ' + _shorten(message)
      left = todo - len(durations)
      timing = 'elapsed %s' % format_duration(time.monotonic() - start)
      if left:
        eta = sum(durations) / len(durations) * left
        timing += ', %s left' % format_eta(eta)
      print(
        '[%d/%d] %s ... %s %.1fs (%s)%s'
        % (k, n, point.point_id, outcome, seconds, timing, detail),
        flush=True,
      )
    _remove_if_empty(self.tmp_dir)
    return self._summary(len(durations))

  def _prepare(self):
    """Create the result folders and take the sweep's lock."""
    if self.launcher_needed() and not os.path.isfile(self.launcher):
      raise InputError(
        '--launcher: %s does not exist (needed by the '
        'num_workers flag)' % self.launcher
      )
    for path in (self.log_dir, self.tmp_dir):
      try:
        os.makedirs(path, exist_ok=True)
      except OSError as e:
        raise InputError(
          '--results_dir: cannot create %s: %s' % (path, e.strerror or e)
        ) from None
    # Two sweeps of the same name would run the same points twice.
    self._lock = open(os.path.join(self.sweep_dir, '.lock'), 'w')
    try:
      fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
      raise InputError(
        '--name: another sweep named %s is running' % self.args.name
      ) from None

  def launcher_needed(self):
    """True when some point runs through the local cluster launcher."""
    return any(
      name == WORKERS_FLAG for point in self.points for name, _ in point.flags
    )

  def run_point(self, point):
    """Run one point and append its line(s); returns (error or None, secs)."""
    command = self.command(point)
    result_file = self.result_file(point)
    log_path = os.path.join(self.log_dir, point.stem + '.log')
    if os.path.exists(result_file):
      os.remove(result_file)  # left by an earlier killed run of this point
    returncode, seconds = run_process(
      command, log_path, self.args.timeout, child_env()
    )
    records, problem = read_point_results(result_file)
    message = point_outcome(
      returncode, self.args.timeout, records, problem, log_path
    )
    tag = {
      'name': self.args.name,
      'point': dict(point.point),
      'point_id': point.point_id,
      'log': os.path.relpath(log_path, self.results_dir),
    }
    if message is None:
      for record in records:
        record['sweep'] = tag
      result_lines.append_json_lines(self.results_path, records)
      self.ok.add(point.point_id)
      self.failed.discard(point.point_id)
    else:
      result_lines.append_json_line(
        self.results_path, error_record(point, message, returncode, tag)
      )
      self.failed.add(point.point_id)
    if os.path.exists(result_file):
      os.remove(result_file)
    return message, seconds

  def _summary(self, ran):
    """Print the closing line; exit status 1 if any point lacks an ok line."""
    ok = sum(1 for p in self.points if p.point_id in self.ok)
    failed = len(self.points) - ok
    print(
      '%s: %d points, %d ok, %d failed (%d run now, %d skipped) -> %s'
      % (
        self.args.name,
        len(self.points),
        ok,
        failed,
        ran,
        len(self.points) - ran,
        self.shown_results_path,
      ),
      flush=True,
    )
    return 1 if failed else 0


def _remove_if_empty(path):
  """Tidy up the per-point temporary folder once nothing is left in it."""
  try:
    os.rmdir(path)
  except OSError:
    pass


def _shorten(text, limit=120):
  """Cut long error messages for the one-line progress output."""
  return text if len(text) <= limit else text[: limit - 3] + '...'


def _sweep_name(text):
  """argparse type for --name: safe as a file name."""
  if not SWEEP_NAME_RE.match(text):
    raise argparse.ArgumentTypeError(
      '%r: use letters, digits, ".", "_" and "-" (no "/")' % text
    )
  return text


def _module_name(text):
  """argparse type for --module: a dotted Python module name."""
  if not MODULE_RE.match(text):
    raise argparse.ArgumentTypeError('%r is not a module name' % text)
  return text


def parse_args(argv):
  """Command-line flags of the sweep (see the module docstring)."""
  parser = rio.OneLineParser(
    prog='sweep.py',
    description='Run a benchmark over a grid of flag values.',
    epilog='Grid file format and behaviour: see the docstring of '
    'scripts/sweep.py.',
  )
  parser.add_argument(
    '--name',
    required=True,
    type=_sweep_name,
    help='sweep name: results go to RESULTS_DIR/NAME.jsonl',
  )
  parser.add_argument('--grid', help='grid file (axis/fixed lines)')
  parser.add_argument(
    '--axis',
    action='append',
    default=[],
    metavar='FLAG=V1,V2,...',
    help='add an axis (repeatable)',
  )
  parser.add_argument(
    '--fixed',
    action='append',
    default=[],
    metavar='FLAG=VALUE',
    help='pass a flag to every point (repeatable)',
  )
  _add_run_flags(parser)
  return parser.parse_args(argv)


def _add_run_flags(parser):
  """The flags of where results go and how the points run."""
  parser.add_argument(
    '--results_dir',
    default='results',
    help='folder for NAME.jsonl and NAME/logs (default: results)',
  )
  parser.add_argument(
    '--timeout',
    type=rio.positive_number('a number of seconds > 0'),
    default=None,
    metavar='SECONDS',
    help='kill a point after this long (default: no limit)',
  )
  parser.add_argument(
    '--dry_run',
    action='store_true',
    help='print the points and their commands, run nothing',
  )
  parser.add_argument(
    '--retry_failed',
    action='store_true',
    help='re-run points whose earlier run failed',
  )
  parser.add_argument(
    '--module',
    default=DEFAULT_MODULE,
    type=_module_name,
    help='benchmark module run with python -m (default: %(default)s)',
  )
  parser.add_argument(
    '--launcher',
    default=DEFAULT_LAUNCHER,
    help='local cluster launcher used for num_workers '
    '(default: scripts/launch_local_cluster.py)',
  )


def main(argv=None):
  """Entry point: returns the exit status (see the module docstring)."""
  args = parse_args(argv)
  points = make_points(build_grid(args))
  sweep = Sweep(args, points)
  if args.dry_run:
    return sweep.dry_run()
  signal.signal(signal.SIGTERM, _on_sigterm)
  try:
    return sweep.run()
  except (KeyboardInterrupt, _Terminated):
    sys.stderr.write(
      'sweep.py: interrupted; run the same command again to resume\n'
    )
    return 130


if __name__ == '__main__':
  sys.exit(rio.run_main(main, 'sweep.py'))
