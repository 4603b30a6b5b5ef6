"""Tabulate benchmark results: images/sec, speed-up and scaling efficiency.

Usage (from the repo root):

  .venv/bin/python scripts/compare.py FILE [FILE...] [--by devices|workers]
      [--baseline FILE]... [--fail_below RATIO] [--csv | --markdown]
      [--plot OUT.png] [--skip_bad]

Reads results files (JSON lines, schema in results/README.md). Rows are
configurations: model / variable_update / all_reduce_spec / precision /
batch_size_per_device (plus data_name, and num_workers, when those vary;
with --by workers, num_devices is a row key). Columns are the device count
(num_devices), or the worker count with --by workers. Each configuration
gets these metric rows:

  images_per_sec             median over duplicate runs of the same point
  speedup                    ips(N) / ips(1)
  efficiency                 ips(N) / (N * ips(1))
  images_per_sec_per_device  median of the per-device figure
  mfu                        median model FLOPs utilisation, when recorded
  runs                       number of runs, shown when some point repeats
  baseline_ratio             with --baseline: candidate ips / baseline ips,
                             matched on the row keys and the column count

Lines with status "error" are noted on stderr and left out. A malformed line
(not JSON, or missing a required key) stops the script with exit status 2
naming FILE:LINE, unless --skip_bad is given (then it is a warning).

Exit status: 0; 1 when --fail_below is given and some baseline ratio is
below it (or no configuration matches the baseline); 2 for bad input.
"""

import csv
import math
import sys

import _results_io as rio

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

  Returns (summary, keys): summary is _results_io.summarize's table for the
  candidate files, plus 'baseline_ips' and 'baseline_ratio' columns when
  baseline files are given; keys are the row-key columns.
  """
  frame = rio.load_frame(paths, skip_bad)
  if not baseline_paths:
    keys = rio.row_keys(frame, by)
    return rio.summarize(frame, by, keys), keys
  import pandas as pd

  base_frame = rio.load_frame(baseline_paths, skip_bad)
  # Decide the keys on both sets so the two summaries line up.
  keys = rio.row_keys(pd.concat([frame, base_frame]), by)
  summary = rio.summarize(frame, by, keys)
  base = rio.summarize(base_frame, by, keys)[keys + ['count', 'images_per_sec']]
  base = base.rename(columns={'images_per_sec': 'baseline_ips'})
  summary = summary.merge(base, on=keys + ['count'], how='left')
  summary['baseline_ratio'] = (
    summary['images_per_sec'] / summary['baseline_ips']
  )
  return summary, keys


def table_rows(summary, keys):
  """Wide table: returns (counts, rows); each row is (key values, metric,
  [value per count]). Values are floats (NaN when absent) or ints (runs)."""
  counts = sorted(int(c) for c in summary['count'].unique())
  metrics = [name for name, _ in METRIC_FORMATS if _show_metric(summary, name)]
  rows = []
  for key_values, group in summary.groupby(keys, sort=True):
    by_count = group.set_index('count')
    for metric in metrics:
      if metric == 'mfu' and group['mfu'].isna().all():
        continue  # MFU needs a known peak; most CPU runs have none
      values = [by_count[metric].get(c, math.nan) for c in counts]
      rows.append((tuple(key_values), metric, values))
  return counts, rows


def _show_metric(summary, metric):
  """Optional rows appear only when they carry information."""
  if metric == 'runs':
    return bool((summary['runs'] > 1).any())
  return metric in summary.columns


def _format_value(metric, value):
  """Human form of one table cell ('-' for a missing value)."""
  if value is None or (isinstance(value, float) and math.isnan(value)):
    return '-'
  fmt = dict(METRIC_FORMATS)[metric]
  return fmt.format(int(value) if metric == 'runs' else float(value))


def _display_cells(keys, counts, rows):
  """Header and string cells, with repeated keys blanked for readability."""
  header = list(keys) + ['metric'] + [str(c) for c in counts]
  cells, previous = [], None
  for key_values, metric, values in rows:
    shown = [str(v) for v in key_values]
    if key_values == previous:
      shown = [''] * len(shown)
    previous = key_values
    cells.append(shown + [metric] + [_format_value(metric, v) for v in values])
  return header, cells


def render_text(keys, counts, rows, caption):
  """Aligned plain-text table for the terminal."""
  header, cells = _display_cells(keys, counts, rows)
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
  return '\n'.join(out) + '\n'


def render_markdown(keys, counts, rows, caption):
  """GitHub-flavoured markdown table, preceded by the caption."""
  header, cells = _display_cells(keys, counts, rows)
  first_number = len(keys) + 1
  align = ['---' if i < first_number else '---:' for i in range(len(header))]
  out = [caption, '']
  for row in [header, align] + cells:
    out.append('| ' + ' | '.join(c.replace('|', '\\|') for c in row) + ' |')
  return '\n'.join(out) + '\n'


def write_csv(keys, counts, rows, stream):
  """CSV with raw numbers (empty when absent) and every key on every row."""
  writer = csv.writer(stream, lineterminator='\n')
  writer.writerow(list(keys) + ['metric'] + [str(c) for c in counts])
  for key_values, metric, values in rows:
    writer.writerow(
      list(key_values) + [metric] + [_raw_value(metric, v) for v in values]
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
    'Columns: %s. images_per_sec is the median over duplicate runs; '
    'speedup = ips(N)/ips(1); efficiency = ips(N)/(N*ips(1)).' % column
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
    'compare.py', 'Tabulate images/sec, speed-up and scaling efficiency.'
  )
  parser.add_argument(
    '--by',
    choices=sorted(rio.BY_COLUMNS),
    default='devices',
    help='column count: num_devices (default) or num_workers',
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
    help='also save a scaling plot (see scripts/plot.py)',
  )
  parser.add_argument(
    '--skip_bad',
    action='store_true',
    help='warn about malformed lines instead of failing',
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
    import plot

    plot.plot_scaling(summary, keys, args.plot, by=args.by)
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
