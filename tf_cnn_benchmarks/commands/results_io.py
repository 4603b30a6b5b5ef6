"""Shared helpers for the scripts that write and read results files.

Results files hold one JSON object per line (see results/README.md). This
module keeps the parts that sweep.py, compare.py and plot.py have in common:

- ``InputError`` and ``run_main``: bad input ends a script with one line on
  stderr and exit status 2, never a traceback.
- ``OneLineParser``: an argparse parser whose usage errors are one line too.
- ``read_jsonl``: strict reading with file:line error messages (the reader
  of tf_cnn_benchmarks/reporting/result_lines.py, its errors as
  ``InputError``). Lines
  are appended with ``result_lines.append_json_lines``, the one atomic append
  that the benchmark driver uses as well.
- ``load_frame`` / ``summarize``: results records -> pandas tables of
  images/sec, speed-up and scaling efficiency per configuration (the
  reading itself: tf_cnn_benchmarks/reporting/result_rows.py).

Only the frame helpers need pandas; they import it lazily so that sweep.py
(which only reads and appends lines) starts quickly.
"""

import argparse
import math
import os
import subprocess
import sys

from tf_cnn_benchmarks.platform import checkout
from tf_cnn_benchmarks.reporting import outputs
from tf_cnn_benchmarks.reporting import result_lines
from tf_cnn_benchmarks.reporting import result_rows

REPO_ROOT = checkout.ROOT

# Configuration keys that identify a table row, in display order.
BASE_ROW_KEYS = (
  'model',
  'variable_update',
  'all_reduce_spec',
  'precision',
  'batch_size_per_device',
)

# Shown instead of a null all_reduce_spec (and other missing key values).
MISSING = result_rows.MISSING

# --by choice -> (count column, the other count column).
BY_COLUMNS = {
  'devices': ('num_devices', 'num_workers'),
  'workers': ('num_workers', 'num_devices'),
}


class InputError(Exception):
  """Bad input from the user: reported as one stderr line and exit status 2."""


class OneLineParser(argparse.ArgumentParser):
  """ArgumentParser whose usage errors are a single line on stderr, exit 2."""

  def error(self, message):
    """Print '<prog>: error: <message> (see --help)' and exit with status 2."""
    sys.stderr.write('%s: error: %s (see --help)\n' % (self.prog, message))
    sys.exit(2)


def results_parser(prog, description, by_help):
  """A OneLineParser taking the results files (JSON lines) as FILE ...

  With the flags every reader of results shares: --by (what the columns or
  the x axis count; `by_help` says it for this script) and --skip_bad.
  """
  parser = OneLineParser(prog=prog, description=description)
  parser.add_argument(
    'files', nargs='+', metavar='FILE', help='results files (JSON lines)'
  )
  parser.add_argument(
    '--by', choices=sorted(BY_COLUMNS), default='devices', help=by_help
  )
  parser.add_argument(
    '--skip_bad',
    action='store_true',
    help='warn about malformed lines instead of failing',
  )
  return parser


def positive_number(expected):
  """An argparse type for a number > 0; a bad value's error says
  'expected <expected>, got <value>'."""

  def parse(text):
    try:
      value = float(text)
    except ValueError:
      value = -1.0
    if not value > 0:
      raise argparse.ArgumentTypeError('expected %s, got %r' % (expected, text))
    return value

  return parse


def run_main(main, prog, argv=None):
  """Call main(argv) and turn InputError into one stderr line and exit 2.

  prog names the script in that line. Returns the exit status main returned
  (0 when it returned None).
  """
  try:
    status = main(argv)
  except InputError as e:
    sys.stderr.write('%s: error: %s\n' % (prog, e))
    return 2
  except BrokenPipeError:
    # `compare.py ... | head` closing the pipe early is not an error worth a
    # traceback; silence the second error Python raises at exit as well.
    sys.stderr.close()
    return 0
  return 0 if status is None else status


def run_for_records(argv, result_file, timeout, label, preexec_fn=None):
  """Runs one benchmark command that writes result_file; its records.

  The file is removed first, so what is read is this run's. A failed run
  (exit status or no file) raises RuntimeError naming `label` and the last
  line the command printed.

  Returns:
    [(line_number, record)] as result_lines.read_json_lines reads them.
  """
  if os.path.exists(result_file):
    os.remove(result_file)
  proc = subprocess.run(
    argv + ['--result_file=%s' % result_file],
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=timeout,
    preexec_fn=preexec_fn,
  )
  if proc.returncode != 0 or not os.path.exists(result_file):
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
    raise RuntimeError('%s failed: %s' % (label, tail))
  return result_lines.read_json_lines(result_file)


def warn(message):
  """Write one 'warning:' line to stderr."""
  sys.stderr.write('warning: %s\n' % message)


def check_files(paths, flag=None):
  """Raise InputError for the first path that is not a readable file.

  Called on every input before any is read, so a typo in the last file name
  is the only line printed, not one after notes about the other files.
  """
  for path in paths:
    where = '%s %s' % (flag, path) if flag else path
    if not os.path.exists(path):
      raise InputError('%s: no such results file' % where)
    if not os.path.isfile(path):
      raise InputError('%s: not a regular file' % where)
    if not os.access(path, os.R_OK):
      raise InputError('%s: not readable' % where)


def read_jsonl(
  path, skip_bad=False, validate=None, hint='use --skip_bad to skip such lines'
):
  """Read a JSON-lines file into a list of (line_number, record) pairs.

  result_lines.read_json_lines with the scripts' hint and warnings: a
  malformed line raises InputError naming path:line (followed by hint, if
  any), or with skip_bad it is reported as a warning on stderr and skipped.
  """
  try:
    return result_lines.read_json_lines(
      path, skip_bad=skip_bad, validate=validate, hint=hint, warn=warn
    )
  except result_lines.ResultsFileError as e:
    raise InputError(str(e)) from None


def load_frame(paths, skip_bad=False, env=False):
  """Read results files into a DataFrame with one row per successful run.

  result_rows.load_columns streams the files (each line checked against
  results/schema.json, only the table's columns kept); with env, each row
  also has its line's env block. Records with status other than "ok" are
  skipped with one stderr note each. Raises InputError for missing files,
  bad lines (unless skip_bad: then skipped and counted) and when no
  successful run is left.
  """
  import pandas as pd  # pandas only for tables: commands start at once

  try:
    columns = result_rows.load_columns(
      paths,
      skip_bad,
      hint='use --skip_bad to skip such lines',
      keep_env=env,
      warn=warn,
    )
  except result_lines.ResultsFileError as e:
    raise InputError(str(e)) from None
  return pd.DataFrame(columns)


def row_keys(frame, by='devices'):
  """Configuration keys that name a table row for this frame and --by choice.

  Beyond the fixed keys, data_name, the hardware, the gradient compression,
  the gradient accumulation steps, the collectives (implementation and
  settings) and the count that is not a column become keys when they
  vary, so different setups are never merged into one median.
  """
  _, other = BY_COLUMNS[by]
  keys = list(BASE_ROW_KEYS)
  if frame['gradient_compression'].nunique() > 1:
    keys.insert(keys.index('all_reduce_spec') + 1, 'gradient_compression')
  if frame['gradient_accumulation_steps'].nunique() > 1:
    # A step of K micro-batches is another batch: never one median.
    keys.insert(
      keys.index('batch_size_per_device') + 1, 'gradient_accumulation_steps'
    )
  if frame['collectives'].nunique() > 1:
    keys.insert(keys.index('all_reduce_spec') + 1, 'collectives')
  if frame['data_name'].nunique() > 1:
    keys.insert(1, 'data_name')
  if frame['hardware'].nunique() > 1:
    keys.insert(0, 'hardware')
  if by == 'workers' or frame[other].nunique() > 1:
    keys.append(other)
  return keys


# Confidence the interval of a point's median aims at (see median_interval).
CONFIDENCE = 0.95


def median_interval(values, confidence=CONFIDENCE):
  """A distribution-free confidence interval for the median of values.

  Returns (low, high, coverage): the order statistics x_(k) and x_(n+1-k)
  of the sorted values for the largest k whose coverage
  1 - 2 * P(Binomial(n, 1/2) <= k - 1) is still >= confidence. Under six
  values no pair reaches 95%: the interval is then the full range
  (min, max), whose coverage 1 - 2**(1 - n) is returned (75% for three
  repeats). Needs at least two values.
  """
  xs = sorted(float(v) for v in values)
  n = len(xs)
  if n < 2:
    raise ValueError('an interval needs 2 or more values, got %d' % n)
  low, high, coverage = xs[0], xs[-1], 1 - 2 * 0.5**n
  below = 1  # sum of comb(n, i) for i < k, for the next k
  for k in range(2, (n + 1) // 2 + 1):
    below += math.comb(n, k - 1)
    wider = 1 - 2 * below / 2**n
    if wider < confidence:
      break
    low, high, coverage = xs[k - 1], xs[n - k], wider
  return low, high, coverage


def point_interval(group):
  """(low, high, coverage, source) of one point's images/sec.

  group: the frame rows of the point's runs. Two or more runs (repeats):
  median_interval over their images/sec, source 'repeats'. One run: its
  own 95% interval from images_per_sec_spread, source 'run'. Otherwise
  NaNs and source '-'.
  """
  if len(group) >= 2:
    low, high, coverage = median_interval(group['images_per_sec'])
    return low, high, coverage, 'repeats'
  only = group.iloc[0]
  if not (
    math.isnan(only['run_ci95_low']) or math.isnan(only['run_ci95_high'])
  ):
    return only['run_ci95_low'], only['run_ci95_high'], CONFIDENCE, 'run'
  return math.nan, math.nan, math.nan, MISSING


def _join_unique(series):
  """The distinct values of a column, joined by ', ' in first-seen order."""
  return ', '.join(dict.fromkeys(str(v) for v in series))


def summarize(frame, by='devices', keys=None):
  """Aggregate runs per configuration and device (or worker) count.

  Returns a DataFrame with the key columns, 'count' (num_devices or
  num_workers per `by`), the medians of images_per_sec,
  images_per_sec_per_device and mfu over duplicate runs (repeats), 'runs',
  'hardware' and the other count (as text, when they are not keys), the
  images/sec interval (ips_low, ips_high, ips_coverage, interval_source;
  see point_interval), and speedup = ips(N)/ips(1) and
  efficiency = ips(N)/(N*ips(1)) with their intervals (see
  add_scaling_columns), which are NaN when the configuration has no run at
  count 1.
  """
  count_col, other = BY_COLUMNS[by]
  keys = list(keys) if keys is not None else row_keys(frame, by)
  rows = []
  for key_values, group in frame.groupby(keys + [count_col], sort=True):
    row = dict(zip(keys + ['count'], key_values))
    low, high, coverage, source = point_interval(group)
    row.update(
      images_per_sec=group['images_per_sec'].median(),
      images_per_sec_per_device=group['images_per_sec_per_device'].median(),
      mfu=group['mfu'].median(),
      runs=len(group),
      ips_low=low,
      ips_high=high,
      ips_coverage=coverage,
      interval_source=source,
    )
    for column in ('hardware', other):  # for titles and labels
      if column not in keys:
        row[column] = _join_unique(group[column])
    rows.append(row)
  import pandas as pd  # pandas only for tables: commands start at once

  return add_scaling_columns(pd.DataFrame(rows), keys)


def add_scaling_columns(summary, keys):
  """Speed-up and efficiency against the same configuration's count-1 point.

  Intervals are propagated by interval arithmetic (the ratio of intervals):
  speedup in [low(N) / high(1), high(N) / low(1)], efficiency that divided
  by N. Every ratio in those bounds is possible when both figures lie in
  their intervals, so the result is conservative; NaN when either point
  has no interval. At count 1 the speed-up is 1 by definition, with no
  interval.
  """
  single = summary[summary['count'] == 1][
    keys + ['images_per_sec', 'ips_low', 'ips_high']
  ]
  single = single.rename(
    columns={
      'images_per_sec': '_ips1',
      'ips_low': '_low1',
      'ips_high': '_high1',
    }
  )
  summary = summary.merge(single, on=keys, how='left')
  count = summary['count']
  summary['speedup'] = summary['images_per_sec'] / summary['_ips1']
  summary['speedup_low'] = summary['ips_low'] / summary['_high1']
  summary['speedup_high'] = summary['ips_high'] / summary['_low1']
  summary.loc[count == 1, ['speedup_low', 'speedup_high']] = math.nan
  for bound in ('', '_low', '_high'):
    summary['efficiency' + bound] = summary['speedup' + bound] / count
  return summary.drop(columns=['_ips1', '_low1', '_high1'])


def check_output(flag, path, creates_dirs=True):
  """InputError unless a file can be written at `path` (the benchmark's own
  check of its output flags: reporting/outputs.py); None passes. Called
  before any work is done."""
  try:
    outputs.check_file(flag, path, creates_dirs)
  except outputs.OutputError as e:
    raise InputError(str(e)) from None
