"""Tabulate benchmark results: images/sec, speed-up and scaling efficiency.

Usage (from the repo root):

  .venv/bin/python scripts/compare.py FILE [FILE...] [--by devices|workers]
      [--baseline FILE]... [--fail_below RATIO] [--csv | --markdown]
      [--plot OUT.png|OUT.svg|OUT.pdf] [--skip_bad]

Reads results files (JSON lines, schema in results/README.md). Rows are
configurations: model / variable_update / all_reduce_spec / precision /
batch_size_per_device (plus data_name, the hardware, gradient_compression,
gradient_accumulation_steps, the collectives and num_workers, when
those vary; with --by workers, num_devices is a row key). Columns are
the device count (num_devices), or the worker count with --by workers.
Each configuration gets these metric rows:

  images_per_sec             median over the repeats of the same point
  speedup                    ips(N) / ips(1)
  efficiency                 ips(N) / (N * ips(1))
  images_per_sec_per_device  median of the per-device figure
  mfu                        median model FLOPs utilisation, when recorded
  runs                       number of runs, shown when some point repeats
  baseline_ratio             with --baseline: candidate ips / baseline ips,
                             matched on the row keys and the column count

Intervals ([low, high] after a figure). A point's repeats are its lines
with the same row keys and count (sweep.py --repeats writes them; any
duplicate runs count, with or without sweep.repeat). With 2 or more, the
interval of the median is distribution-free: the order statistics
[x_(k), x_(n+1-k)] with the largest k whose coverage is still >= 95%;
under 6 repeats that is their full range (coverage 1 - 2^(1-n): 75% for
3). With one line, it is the line's own images_per_sec_spread 95%
interval (over its steps), and none if the line has no spread. Speed-up,
efficiency and the baseline ratio take the ratio of the intervals:
speedup in [low(N)/high(1), high(N)/low(1)] (conservative: every ratio
of two values inside the intervals), efficiency that over N.

Within noise. An efficiency over 100% (speed-up over N) whose interval
still holds 100% (the intervals of ips(N) and N*ips(1) overlap) prints
'within noise [low, high]' instead of the figure; over 100% with no
interval at all prints the figure with a '?'. A speed-up whose interval
holds 1x (ips(N) and ips(1) overlap) and a baseline ratio whose interval
holds 1 (the two images/sec intervals overlap) are within noise too.
--csv keeps the raw numbers and adds <metric>_low and <metric>_high rows.

Lines with status "error" are noted on stderr and left out. A malformed line
(not strict JSON, nested too deep, breaking results/schema.json, or missing
a key the table needs) stops the script with exit status 2 naming FILE:LINE
and the key, unless --skip_bad is given (then it is skipped: a warning and
a count). Files are read a line at a time.

Exit status: 0; 1 when --fail_below is given and some baseline ratio is
below it (or no configuration matches the baseline); 2 for bad input.
"""

import collections
import csv
import math
import sys

from tf_cnn_benchmarks.commands import plot
from tf_cnn_benchmarks.commands import results_io as rio

InputError = rio.InputError

# Metric rows in display order, with their terminal/markdown formats.
METRIC_FORMATS = (
  ('images_per_sec', '{:.1f}'),
  ('speedup', '{:.2f}x'),
  ('efficiency', '{:.1%}'),
  ('images_per_sec_per_device', '{:.1f}'),
  ('mfu', '{:.1%}'),
  ('runs', '{:d}'),
  ('baseline_ratio', '{:.3f}'),
)


def summarize_files(paths, by='devices', baseline_paths=(), skip_bad=False):
  """Read candidate (and baseline) files into one summary DataFrame.

  Returns (summary, keys): summary is results_io.summarize's table for the
  candidate files, plus 'baseline_ips', 'baseline_ratio' and its interval
  ('baseline_ratio_low', 'baseline_ratio_high', the ratio of the two
  images/sec intervals) when baseline files are given; keys are the
  row-key columns.
  """
  frame = rio.load_frame(paths, skip_bad)
  if not baseline_paths:
    keys = rio.row_keys(frame, by)
    return rio.summarize(frame, by, keys), keys
  import pandas as pd  # pandas only once files are read: --help starts at once

  base_frame = rio.load_frame(baseline_paths, skip_bad)
  # Decide the keys on both sets so the two summaries line up; a baseline
  # from another machine is still matched, unless the candidates themselves
  # span several machines.
  keys = rio.row_keys(pd.concat([frame, base_frame]), by)
  if 'hardware' in keys and frame['hardware'].nunique() == 1:
    keys.remove('hardware')
  summary = rio.summarize(frame, by, keys)
  base = rio.summarize(base_frame, by, keys)
  base = base[keys + ['count', 'images_per_sec', 'ips_low', 'ips_high']]
  base = base.rename(
    columns={
      'images_per_sec': 'baseline_ips',
      'ips_low': '_base_low',
      'ips_high': '_base_high',
    }
  )
  summary = summary.merge(base, on=keys + ['count'], how='left')
  summary['baseline_ratio'] = (
    summary['images_per_sec'] / summary['baseline_ips']
  )
  summary['baseline_ratio_low'] = summary['ips_low'] / summary['_base_high']
  summary['baseline_ratio_high'] = summary['ips_high'] / summary['_base_low']
  return summary.drop(columns=['_base_low', '_base_high']), keys


class Cell(collections.namedtuple('Cell', 'value low high mark')):
  """One table cell: the figure, its interval (NaN when none) and a mark:
  WITHIN_NOISE, UNSURE or ''."""

  def has_interval(self):
    """Whether both bounds are known."""
    return not (_missing(self.low) or _missing(self.high))


# Marks of a cell whose difference is not shown to be real.
WITHIN_NOISE = 'within noise'
UNSURE = 'unsure'
# Metrics shown with an interval: metric -> (low column, high column).
INTERVAL_COLUMNS = {
  'images_per_sec': ('ips_low', 'ips_high'),
  'speedup': ('speedup_low', 'speedup_high'),
  'efficiency': ('efficiency_low', 'efficiency_high'),
  'baseline_ratio': ('baseline_ratio_low', 'baseline_ratio_high'),
}


def _missing(value):
  return value is None or (isinstance(value, float) and math.isnan(value))


def cell_mark(metric, row):
  """WITHIN_NOISE, UNSURE or '' for one metric of one summary row.

  Efficiency above 100% (speed-up above N) claims super-linear scaling: it
  is WITHIN_NOISE when the efficiency interval still holds 100% (the
  intervals of ips(N) and N * ips(1) overlap), UNSURE when there is no
  interval at all (one run without a recorded spread). A speed-up whose
  interval holds 1 (the intervals of ips(N) and ips(1) overlap: N devices
  are not shown to differ from one) is WITHIN_NOISE too. A baseline ratio
  is WITHIN_NOISE when the candidate's and the baseline's images/sec
  intervals overlap (its interval holds 1).
  """
  if metric not in ('speedup', 'efficiency', 'baseline_ratio'):
    return ''
  if metric == 'baseline_ratio':
    return _holds(row['baseline_ratio_low'], row['baseline_ratio_high'], 1)
  if row['count'] <= 1:
    return ''
  if row['efficiency'] > 1:
    if _missing(row['efficiency_low']):
      return UNSURE
    return _holds(row['efficiency_low'], row['efficiency_high'], 1)
  if metric == 'speedup':
    return _holds(row['speedup_low'], row['speedup_high'], 1)
  return ''


def _holds(low, high, reference):
  """WITHIN_NOISE when [low, high] is known and holds reference, else ''."""
  if _missing(low) or _missing(high) or not low <= reference <= high:
    return ''
  return WITHIN_NOISE


def _cell(summary_row, metric):
  """The Cell of one metric in one summary row (a pandas Series)."""
  value = summary_row.get(metric, math.nan)
  low_col, high_col = INTERVAL_COLUMNS.get(metric, (None, None))
  low = float(summary_row.get(low_col, math.nan)) if low_col else math.nan
  high = float(summary_row.get(high_col, math.nan)) if high_col else math.nan
  return Cell(value, low, high, cell_mark(metric, summary_row))


EMPTY_CELL = Cell(math.nan, math.nan, math.nan, '')


def table_rows(summary, keys):
  """Wide table: returns (counts, rows); each row is (key values, metric,
  [Cell per count]). Cell values are floats (NaN when absent) or ints
  (runs)."""
  counts = sorted(int(c) for c in summary['count'].unique())
  metrics = [name for name, _ in METRIC_FORMATS if _show_metric(summary, name)]
  rows = []
  for key_values, group in summary.groupby(keys, sort=True):
    by_count = {int(row['count']): row for _, row in group.iterrows()}
    for metric in metrics:
      if metric == 'mfu' and group['mfu'].isna().all():
        continue  # MFU needs a known peak; most CPU runs have none
      cells = [
        _cell(by_count[c], metric) if c in by_count else EMPTY_CELL
        for c in counts
      ]
      rows.append((tuple(key_values), metric, cells))
  return counts, rows


def _show_metric(summary, metric):
  """Optional rows appear only when they carry information."""
  if metric == 'runs':
    return bool((summary['runs'] > 1).any())
  return metric in summary.columns


def format_cell(metric, cell):
  """Human form of one table cell: '-' when absent, the figure followed by
  its interval in brackets when it has one, 'within noise [low, high]'
  for a WITHIN_NOISE cell and a trailing '?' on an UNSURE one."""
  if _missing(cell.value):
    return '-'
  fmt = dict(METRIC_FORMATS)[metric]
  if metric == 'runs':
    return fmt.format(int(cell.value))
  text = fmt.format(float(cell.value))
  bounds = ''
  if cell.has_interval():
    bounds = ' [%s, %s]' % (fmt.format(cell.low), fmt.format(cell.high))
  if cell.mark == WITHIN_NOISE:
    return WITHIN_NOISE + bounds
  if cell.mark == UNSURE:
    return text + '?'
  return text + bounds


def display_cells(keys, counts, rows):
  """Header and string cells, with repeated keys blanked for readability.

  The one rendering of the comparison table's cells: the terminal,
  markdown and report.py's HTML tables all lay these out.
  """
  header = list(keys) + ['metric'] + [str(c) for c in counts]
  cells, previous = [], None
  for key_values, metric, values in rows:
    shown = [str(v) for v in key_values]
    if key_values == previous:
      shown = [''] * len(shown)
    previous = key_values
    cells.append(shown + [metric] + [format_cell(metric, v) for v in values])
  return header, cells


def table_notes(rows):
  """Lines explaining the marks that appear in the table (none if none)."""
  marks = {cell.mark for _, _, cells in rows for cell in cells}
  notes = []
  if WITHIN_NOISE in marks:
    notes.append(
      'within noise: the intervals overlap (an efficiency over 100% whose '
      'interval holds 100%, a speedup whose interval holds 1x, or a '
      'baseline ratio whose interval holds 1): the difference is not shown '
      'to be real.'
    )
  if UNSURE in marks:
    notes.append(
      '?: over 100% from a single run with no recorded spread: it cannot '
      'be told from noise (rerun with sweep.py --repeats N).'
    )
  return notes


def noise_findings(keys, counts, rows, by='devices'):
  """One sentence per WITHIN_NOISE or UNSURE cell, naming its
  configuration, count and metric (report.py lists them)."""
  unit = 'device(s)' if by == 'devices' else 'worker(s)'
  found = []
  for key_values, metric, cells in rows:
    for count, cell in zip(counts, cells):
      if not cell.mark:
        continue
      name = '/'.join(str(v) for v in key_values)
      fmt = dict(METRIC_FORMATS)[metric]
      what = '%s at %d %s: %s %s' % (
        name,
        count,
        unit,
        metric,
        fmt.format(float(cell.value)),
      )
      if cell.mark == WITHIN_NOISE:
        found.append(
          '%s, interval [%s, %s]: within noise'
          % (what, fmt.format(cell.low), fmt.format(cell.high))
        )
      else:
        found.append('%s from one run with no spread: unsure' % what)
  return found


def render_text(keys, counts, rows, caption):
  """Aligned plain-text table for the terminal."""
  header, cells = display_cells(keys, counts, rows)
  widths = [
    max(len(r[i]) for r in [header] + cells) for i in range(len(header))
  ]
  first_number = len(keys) + 1  # text columns left-aligned, numbers right

  def line(row):
    parts = [
      cell.ljust(w) if i < first_number else cell.rjust(w)
      for i, (cell, w) in enumerate(zip(row, widths))
    ]
    return '  '.join(parts).rstrip()

  out = [caption, line(header), '  '.join('-' * w for w in widths)]
  out.extend(line(row) for row in cells)
  out.extend(table_notes(rows))
  return '\n'.join(out) + '\n'


def render_markdown(keys, counts, rows, caption):
  """GitHub-flavoured markdown table, preceded by the caption."""
  header, cells = display_cells(keys, counts, rows)
  first_number = len(keys) + 1
  align = ['---' if i < first_number else '---:' for i in range(len(header))]
  out = [caption, '']
  for row in [header, align] + cells:
    out.append('| ' + ' | '.join(c.replace('|', '\\|') for c in row) + ' |')
  notes = table_notes(rows)
  if notes:
    out.append('')
    out.extend(notes)
  return '\n'.join(out) + '\n'


def write_csv(keys, counts, rows, stream):
  """CSV with raw numbers (empty when absent) and every key on every row;
  a metric with an interval is followed by <metric>_low and <metric>_high
  rows."""
  writer = csv.writer(stream, lineterminator='\n')
  writer.writerow(list(keys) + ['metric'] + [str(c) for c in counts])
  for key_values, metric, cells in rows:
    writer.writerow(
      list(key_values) + [metric] + [_raw_value(metric, c.value) for c in cells]
    )
    if any(c.has_interval() for c in cells):
      for bound in ('low', 'high'):
        writer.writerow(
          list(key_values)
          + ['%s_%s' % (metric, bound)]
          + [_raw_value(metric, getattr(c, bound)) for c in cells]
        )


def _raw_value(metric, value):
  """Exact CSV text of one cell: '' when absent, full float precision."""
  if value is None or math.isnan(float(value)):
    return ''
  # repr of a Python float round-trips exactly; numpy scalars would print
  # as np.float64(...).
  return str(int(value)) if metric == 'runs' else repr(float(value))


def caption_for(by):
  """Line explaining the table's columns and derived metrics."""
  column = rio.BY_COLUMNS[by][0]
  return (
    'Columns: %s. images_per_sec is the median over repeats (duplicate '
    'runs); speedup = ips(N)/ips(1); efficiency = ips(N)/(N*ips(1)). '
    '[low, high]: the interval over repeats (their range under 6 repeats), '
    "or one run's 95%% interval; speedup and efficiency take the ratio of "
    'the intervals.' % column
  )


def ratios_below(summary, keys, threshold, by):
  """Messages for every configuration whose baseline ratio < threshold."""
  unit = 'device(s)' if by == 'devices' else 'worker(s)'
  failures = []
  compared = summary.dropna(subset=['baseline_ratio'])
  for _, row in compared.iterrows():
    if row['baseline_ratio'] < threshold:
      name = '/'.join(str(row[k]) for k in keys)
      failures.append(
        '%s at %d %s: ratio %.3f < %g (%.1f vs baseline %.1f '
        'images/sec)'
        % (
          name,
          row['count'],
          unit,
          row['baseline_ratio'],
          threshold,
          row['images_per_sec'],
          row['baseline_ips'],
        )
      )
  return failures, len(compared)


def parse_args(argv):
  """Command-line flags (see the module docstring)."""
  parser = rio.results_parser(
    'compare.py',
    'Tabulate images/sec, speed-up and scaling efficiency.',
    'column count: num_devices (default) or num_workers',
  )
  parser.add_argument(
    '--baseline',
    action='append',
    default=[],
    metavar='FILE',
    help='results to compare against (repeatable)',
  )
  parser.add_argument(
    '--fail_below',
    type=rio.positive_number('a ratio > 0 such as 0.95'),
    metavar='RATIO',
    help='exit 1 if any candidate/baseline ratio is lower',
  )
  form = parser.add_mutually_exclusive_group()
  form.add_argument('--csv', action='store_true', help='CSV output')
  form.add_argument(
    '--markdown', action='store_true', help='markdown table output'
  )
  parser.add_argument(
    '--plot',
    metavar='OUT.png',
    help='also save a scaling plot: .png, .svg or .pdf (see scripts/plot.py)',
  )
  args = parser.parse_args(argv)
  if args.fail_below is not None and not args.baseline:
    parser.error('--fail_below needs --baseline FILE')
  return args


def main(argv=None):
  """Entry point: prints the table and returns the exit status."""
  args = parse_args(argv)
  rio.check_files(args.files)
  rio.check_files(args.baseline, '--baseline')
  if args.plot:
    plot.output_format(args.plot, '--plot')  # before any work is done
    rio.check_output('plot', args.plot)
  summary, keys = summarize_files(
    args.files, args.by, args.baseline, args.skip_bad
  )
  counts, rows = table_rows(summary, keys)
  if args.csv:
    write_csv(keys, counts, rows, sys.stdout)
  elif args.markdown:
    sys.stdout.write(render_markdown(keys, counts, rows, caption_for(args.by)))
  else:
    sys.stdout.write(render_text(keys, counts, rows, caption_for(args.by)))
  sys.stdout.flush()
  if args.plot:
    plot.plot_scaling(summary, keys, args.plot, by=args.by, flag='--plot')
    sys.stderr.write('wrote %s\n' % args.plot)
  if args.fail_below is None:
    return 0
  failures, compared = ratios_below(summary, keys, args.fail_below, args.by)
  if not compared:
    sys.stderr.write(
      'compare.py: FAIL: no configuration matches the '
      'baseline, nothing was compared\n'
    )
    return 1
  for message in failures:
    sys.stderr.write('compare.py: FAIL: %s\n' % message)
  return 1 if failures else 0


if __name__ == '__main__':
  sys.exit(rio.run_main(main, 'compare.py'))
