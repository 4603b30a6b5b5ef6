"""Plot images/sec and scaling efficiency against the device count.

Usage (from the repo root):

  .venv/bin/python scripts/plot.py FILE [FILE...] --out OUT.png
      [--by devices|workers] [--title TEXT] [--skip_bad]

Writes one PNG with two panels: images/sec (median of duplicate runs) and
scaling efficiency ips(N)/(N*ips(1)), both against num_devices (or
num_workers with --by workers) on a log2 axis. There is one line per
strategy: variable_update (+ all_reduce_spec) + precision; when the files
hold several models, batch sizes, data sets or counts of the other kind,
those prefix the line labels.

compare.py --plot calls plot_scaling() with the summary it already built.
Exit status: 0, or 2 for bad input (one line on stderr).
"""

import os
import sys

import _results_io as rio

InputError = rio.InputError

# Keys that make up the strategy part of a line label.
STRATEGY_KEYS = ('variable_update', 'all_reduce_spec', 'precision')
# Short label prefixes for the other keys, when they vary.
KEY_LABELS = {
  'model': '',
  'data_name': '',
  'batch_size_per_device': 'bs',
  'num_workers': 'workers=',
  'num_devices': 'devices=',
}


def _strategy_label(row):
  """'replicated/nccl float16' from a summary row."""
  name = row['variable_update']
  if row['all_reduce_spec'] != rio.MISSING:
    name += '/' + str(row['all_reduce_spec'])
  return '%s %s' % (name, row['precision'])


def line_label(row, varying):
  """Label of one plotted line: varying non-strategy keys, then strategy."""
  prefix = ' '.join(
    '%s%s' % (KEY_LABELS.get(k, k + '='), row[k]) for k in varying
  )
  return ('%s: ' % prefix if prefix else '') + _strategy_label(row)


def plot_scaling(summary, keys, out_path, by='devices', title=None):
  """Save a two-panel scaling plot of a compare/_results_io summary as PNG.

  summary: DataFrame from _results_io.summarize (key columns, 'count',
  'images_per_sec', 'efficiency'); keys: its row-key columns. Raises
  InputError if out_path cannot be written.
  """
  import matplotlib

  matplotlib.use('Agg')  # files only; never needs a display
  import matplotlib.pyplot as plt
  from matplotlib.ticker import NullLocator
  from matplotlib.ticker import PercentFormatter

  varying = [
    k for k in keys if k not in STRATEGY_KEYS and summary[k].nunique() > 1
  ]
  counts = sorted(int(c) for c in summary['count'].unique())
  fig, (ax_ips, ax_eff) = plt.subplots(1, 2, figsize=(12, 4.8))
  for _, group in summary.groupby(keys, sort=True):
    group = group.sort_values('count')
    label = line_label(group.iloc[0], varying)
    (line,) = ax_ips.plot(
      group['count'], group['images_per_sec'], marker='o', label=label
    )
    eff = group.dropna(subset=['efficiency'])
    if len(eff):
      ax_eff.plot(
        eff['count'],
        eff['efficiency'],
        marker='o',
        color=line.get_color(),
        label=label,
      )
  ax_eff.axhline(
    1.0, color='gray', linestyle='--', linewidth=1, label='linear scaling'
  )
  xlabel = rio.BY_COLUMNS[by][0]
  for ax, ylabel in ((ax_ips, 'images/sec'), (ax_eff, 'scaling efficiency')):
    ax.set_xscale('log', base=2)
    ax.set_xticks(counts)
    ax.set_xticklabels([str(c) for c in counts])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
  ax_ips.set_ylim(bottom=0)
  top = 1.1  # keep the 100% line visible with room above it
  if summary['efficiency'].notna().any():
    top = max(top, float(summary['efficiency'].max()) * 1.05)
  ax_eff.set_ylim(0, top)
  ax_eff.yaxis.set_major_formatter(PercentFormatter(1.0))
  ax_ips.set_title('Throughput')
  ax_eff.set_title('Scaling efficiency ips(N) / (N * ips(1))')
  ax_ips.legend(fontsize='small')
  if title:
    fig.suptitle(title)
  fig.tight_layout()
  _save(fig, out_path)
  plt.close(fig)


def _save(fig, out_path):
  """Write the figure as PNG whatever the file name ends with."""
  folder = os.path.dirname(out_path)
  try:
    if folder:
      os.makedirs(folder, exist_ok=True)
    fig.savefig(out_path, format='png', dpi=100)
  except OSError as e:
    raise InputError(
      '--out: cannot write %s: %s' % (out_path, e.strerror or e)
    ) from None


def parse_args(argv):
  """Command-line flags (see the module docstring)."""
  parser = rio.results_parser(
    'plot.py', 'Plot images/sec and scaling efficiency vs device count.'
  )
  parser.add_argument(
    '--out', required=True, metavar='OUT.png', help='PNG file to write'
  )
  parser.add_argument(
    '--by',
    choices=sorted(rio.BY_COLUMNS),
    default='devices',
    help='x axis: num_devices (default) or num_workers',
  )
  parser.add_argument('--title', help='figure title')
  parser.add_argument(
    '--skip_bad',
    action='store_true',
    help='warn about malformed lines instead of failing',
  )
  return parser.parse_args(argv)


def main(argv=None):
  """Entry point: writes the PNG and returns the exit status."""
  args = parse_args(argv)
  rio.check_files(args.files)
  frame = rio.load_frame(args.files, args.skip_bad)
  keys = rio.row_keys(frame, args.by)
  summary = rio.summarize(frame, args.by, keys)
  plot_scaling(summary, keys, args.out, by=args.by, title=args.title)
  print('wrote %s' % args.out)
  return 0


if __name__ == '__main__':
  sys.exit(rio.run_main(main, 'plot.py'))
