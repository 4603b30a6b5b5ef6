"""Run a benchmark over a grid of flag values, one process per point.

Usage (from the repo root):

  .venv/bin/python scripts/sweep.py --name NAME [--grid FILE]
      [--axis FLAG=V1,V2,...]... [--fixed FLAG=VALUE]...
      [--results_dir DIR] [--timeout SECONDS] [--dry_run] [--retry_failed]
      [--repeats N] [--progress_every SECONDS]
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
            "repeat": R, "log": "NAME/logs/<file>.log"}

Repeats: --repeats N runs every point N times, interleaved (every point
once, then every point again, ...), so a slow drift of the machine spreads
over all points instead of biasing one. R is the run's 0-based repeat index;
a repeat after the first logs to <point id>.rR.log.

On failure or timeout a line with "status": "error", "error" (the last
exception line of the log, e.g. "ValueError: ...", else its last line; or
"timeout after Ns"), "returncode", "params" (the point's flags) and the same
tag is appended instead, and the sweep goes on.
Appends are atomic (tf_cnn_benchmarks/reporting/result_lines.py: one os.write
on an
O_APPEND descriptor, under a flock of the file).

Resuming: running the same sweep again skips every repeat that already has
an "ok" line in DIR/NAME.jsonl, so a killed sweep loses at most the run that
was running: a point with k < N ok repeats runs N - k more (under the
smallest repeat indices not recorded yet; lines without "repeat" count as
repeat 0). Runs that failed are skipped too unless --retry_failed is
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
- Automatic lengths pass through like any flag: "fixed num_batches = auto"
  and "fixed target_interval = 0.01" (or --fixed num_batches=auto
  --fixed target_interval=0.01) stop each point once its interval is that
  tight (docs/performance.md#run-length); the closing line then says how
  many runs reached the target. num_batches=auto (or num_warmup_batches)
  with num_workers is refused: a cluster's workers must stop together.
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

Progress goes to stdout, one line per run (with repeats, n counts runs and
the line names the repeat: "[k/n] POINT_ID repeat=R ..."):

  [k/n] POINT_ID ... ok 12.3s (elapsed 1m02s, ~3m left)

While a point runs, its elapsed time and the step its log's table reached
show as a tqdm progress bar on a terminal, and as a plain line every
--progress_every seconds (default 30) elsewhere (_sweep_progress.py):

  [k/n] POINT_ID ... running 30s, step 120/500

Exit status: 0 when every run has an ok line, 1 when some point failed,
2 for bad input (one line on stderr), 130 when interrupted.
"""

import argparse
import collections
import fcntl
import os
import re
import shlex
import signal
import sys
import time

from tf_cnn_benchmarks.commands import results_io as rio
from tf_cnn_benchmarks.commands import sweep_plan as plan
from tf_cnn_benchmarks.commands import sweep_points as points_lib
from tf_cnn_benchmarks.commands import sweep_progress as progress
from tf_cnn_benchmarks.platform import checkout

# After results_io, which puts the repository root on sys.path.
from tf_cnn_benchmarks.reporting import result_lines

# The names tests and callers use: the sweep's parts live in _sweep_*.py.
InputError = rio.InputError
Grid = plan.Grid
parse_grid_text = plan.parse_grid_text
parse_grid_file = plan.parse_grid_file
build_grid = plan.build_grid
make_point_id = plan.make_point_id
log_stem = plan.log_stem
make_points = plan.make_points
build_command = plan.build_command
load_previous = plan.load_previous
plan_runs = plan.plan_runs
MAX_LOG_STEM = plan.MAX_LOG_STEM
WORKERS_FLAG = plan.WORKERS_FLAG
log_error_line = points_lib.log_error_line
run_process = points_lib.run_process
format_duration = progress.format_duration
format_eta = progress.format_eta

REPO_ROOT = points_lib.REPO_ROOT
DEFAULT_MODULE = 'tf_cnn_benchmarks'
# scripts/launch_local_cluster.py in a checkout; installed, the launcher's
# module file (run by path: the points get the package's root on PYTHONPATH).
DEFAULT_LAUNCHER = (
  os.path.join(REPO_ROOT, 'scripts', 'launch_local_cluster.py')
  if checkout.IN_CHECKOUT
  else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), 'launch_local_cluster.py'
  )
)
# Plain progress lines of a running point (not on a terminal): this often.
DEFAULT_PROGRESS_EVERY = 30.0

SWEEP_NAME_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]*$')
MODULE_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$')


class Sweep(object):
  """Runs the planned runs of one sweep and reports progress."""

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
    # --num_batches=auto runs of this sweep: stopped_by -> count.
    self.auto_stops = collections.Counter()
    self.runs = plan_runs(points, args.repeats, self.ok)

  def action(self, run):
    """'run', or why the run is skipped."""
    if run.done:
      return 'skipped (ok in %s)' % self.shown_results_path
    if run.repeat in self.failed.get(run.point.point_id, ()):
      if not self.args.retry_failed:
        return 'skipped (failed before; --retry_failed re-runs it)'
    return 'run'

  def label(self, k, run):
    """'[k/n] POINT_ID', with the repeat index when there are repeats."""
    text = '[%d/%d] %s' % (k, len(self.runs), run.point.point_id)
    if self.args.repeats > 1:
      text += ' repeat=%d' % run.repeat
    return text

  def result_file(self, run):
    """Per-run file the benchmark writes; moved into NAME.jsonl after."""
    return os.path.join(self.tmp_dir, run.stem + '.jsonl')

  def command(self, run):
    """argv that runs a point, writing to its temporary result file."""
    return build_command(
      run.point, self.args.module, self.launcher, self.result_file(run)
    )

  def dry_run(self):
    """Print every run and what a real sweep would do with it."""
    for k, run in enumerate(self.runs, start=1):
      action = self.action(run)
      shown = shlex.join(self.command(run)) if action == 'run' else action
      print('%s: %s' % (self.label(k, run), shown))
    return 0

  def run(self):
    """Run all runs that need it; returns the exit status."""
    self._prepare()
    todo = sum(1 for r in self.runs if self.action(r) == 'run')
    start = time.monotonic()
    durations = []
    for k, run in enumerate(self.runs, start=1):
      label = self.label(k, run)
      action = self.action(run)
      if action != 'run':
        print('%s ... %s' % (label, action), flush=True)
        continue
      message, seconds = self.run_point(run, label)
      durations.append(seconds)
      outcome = 'ok' if message is None else 'error'
      detail = '' if message is None else ': ' + points_lib.shorten(message)
      left = todo - len(durations)
      timing = 'elapsed %s' % format_duration(time.monotonic() - start)
      if left:
        eta = sum(durations) / len(durations) * left
        timing += ', %s left' % format_eta(eta)
      print(
        '%s ... %s %.1fs (%s)%s' % (label, outcome, seconds, timing, detail),
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

  def run_point(self, run, label):
    """Run one run of a point and append its line(s): (error or None, secs).

    label: the run's '[k/n] POINT_ID' for the live progress display.
    """
    result_file = self.result_file(run)
    log_path = os.path.join(self.log_dir, run.stem + '.log')
    if os.path.exists(result_file):
      os.remove(result_file)  # left by an earlier killed run of this point
    shown = progress.PointProgress(
      label, run.point, log_path, self.args.progress_every
    )
    try:
      returncode, seconds = run_process(
        self.command(run),
        log_path,
        self.args.timeout,
        points_lib.child_env(),
        on_tick=shown.tick,
      )
    finally:
      shown.close()
    records, problem = points_lib.read_point_results(result_file)
    message = points_lib.point_outcome(
      returncode, self.args.timeout, records, problem, log_path
    )
    self._record(run, log_path, records, message, returncode)
    if os.path.exists(result_file):
      os.remove(result_file)
    return message, seconds

  def _record(self, run, log_path, records, message, returncode):
    """Appends the run's lines (or its error line) with the sweep tag."""
    point_id = run.point.point_id
    tag = {
      'name': self.args.name,
      'point': dict(run.point.point),
      'point_id': point_id,
      'repeat': run.repeat,
      'log': os.path.relpath(log_path, self.results_dir),
    }
    if message is None:
      for record in records:
        record['sweep'] = tag
        length = record.get('run_length') or {}
        if length.get('length_rule') == 'target':
          self.auto_stops[length['stopped_by']] += 1
      result_lines.append_json_lines(self.results_path, records)
      self.ok.setdefault(point_id, set()).add(run.repeat)
      self.failed.get(point_id, set()).discard(run.repeat)
    else:
      result_lines.append_json_line(
        self.results_path,
        points_lib.error_record(run.point, message, returncode, tag),
      )
      self.failed.setdefault(point_id, set()).add(run.repeat)

  def _summary(self, ran):
    """Print the closing line; exit status 1 if any run lacks an ok line."""
    ok = sum(
      1 for r in self.runs if r.repeat in self.ok.get(r.point.point_id, ())
    )
    failed = len(self.runs) - ok
    counted = '%d points' % len(self.points)
    if self.args.repeats > 1:
      counted += ' x %d repeats = %d runs' % (
        self.args.repeats,
        len(self.runs),
      )
    print(
      '%s: %s, %d ok, %d failed (%d run now, %d skipped) -> %s'
      % (
        self.args.name,
        counted,
        ok,
        failed,
        ran,
        len(self.runs) - ran,
        self.shown_results_path,
      ),
      flush=True,
    )
    line = auto_length_line(self.auto_stops)
    if line:
      print(line, flush=True)
    return 1 if failed else 0


def auto_length_line(stops) -> str | None:
  """'--num_batches=auto: 7 of 8 runs reached --target_interval (1 stopped
  by time)' for this sweep's runs (stops: stopped_by -> count), or None."""
  total = sum(stops.values())
  if not total:
    return None
  others = ', '.join(
    '%d stopped by %s' % (stops[why], why)
    for why in ('time', 'cap')
    if stops[why]
  )
  return '--num_batches=auto: %d of %d runs reached --target_interval%s' % (
    stops['target'],
    total,
    ' (%s)' % others if others else '',
  )


def _remove_if_empty(path):
  """Tidy up the per-point temporary folder once nothing is left in it."""
  try:
    os.rmdir(path)
  except OSError:
    pass


def _sweep_name(text):
  """argparse type for --name: safe as a file name."""
  if not SWEEP_NAME_RE.match(text):
    raise argparse.ArgumentTypeError(
      '%r: use letters, digits, ".", "_" and "-" (no "/")' % text
    )
  return text


def _repeats(text):
  """argparse type for --repeats: an integer >= 1."""
  if not text.strip().isdigit() or int(text) < 1:
    raise argparse.ArgumentTypeError('%r: use an integer >= 1' % text)
  return int(text)


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
    '--repeats',
    type=_repeats,
    default=1,
    metavar='N',
    help='run every point N times, interleaved: all points once, then '
    'again; a rerun tops up missing repeats (default: 1)',
  )
  parser.add_argument(
    '--progress_every',
    type=rio.positive_number('a number of seconds > 0'),
    default=DEFAULT_PROGRESS_EVERY,
    metavar='SECONDS',
    help="not on a terminal: a line with the running point's elapsed time "
    'and step every SECONDS (default: %(default)g)',
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
  signal.signal(signal.SIGTERM, points_lib.on_sigterm)
  try:
    return sweep.run()
  except (KeyboardInterrupt, points_lib.Terminated):
    sys.stderr.write(
      'sweep.py: interrupted; run the same command again to resume\n'
    )
    return 130


if __name__ == '__main__':
  sys.exit(rio.run_main(main, 'sweep.py'))
