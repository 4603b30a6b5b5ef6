"""Plot images/sec and scaling efficiency against the device count.

Usage (from the repo root):

  .venv/bin/python scripts/plot.py FILE [FILE...] --out OUT.png|OUT.svg|OUT.pdf
      [--by devices|workers] [--title TEXT] [--skip_bad]

Writes one figure with two panels: images/sec (median over repeats) and
scaling efficiency ips(N)/(N*ips(1)), both against the device count
(towers x workers; or the worker count with --by workers) on a log2 axis.
The format is the --out extension's (PNG, SVG or PDF, at 150 dpi); another
extension is an error. The title names the model(s), the batch per device
and the hardware (env.gpu_model, else env.cpu_model), after --title if
given. Each point has an error bar for its interval (over repeats, or one
run's own 95% interval; see compare.py), and the images/sec panel draws the
ideal-scaling line N * ips(1) of each configuration. There is one line per
strategy: variable_update (+ all_reduce_spec) + precision; when the files
hold several models, batch sizes, data sets, machines or counts of the
other kind, those prefix the line labels.

compare.py --plot calls plot_scaling() with the summary it already built;
report.py draws scaling_figure() into its page.
Exit status: 0, or 2 for bad input (one line on stderr).
"""

import os
import sys

from tf_cnn_benchmarks.commands import results_io as rio

InputError = rio.InputError

# Keys that make up the strategy part of a line label.
STRATEGY_KEYS = ('variable_update', 'all_reduce_spec', 'precision')
# Short label prefixes for the other keys, when they vary.
KEY_LABELS = {
  'hardware': '',
  'model': '',
  'data_name': '',
  'batch_size_per_device': 'bs',
  'num_workers': 'workers=',
  'num_devices': 'devices=',
  'gradient_compression': 'compression=',
  'gradient_accumulation_steps': 'accumulation=',
  'collectives': 'collectives=',
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


# --out file extension -> matplotlib format.
FORMATS = {'.png': 'png', '.svg': 'svg', '.pdf': 'pdf'}
DPI = 150
IDEAL_STYLE = dict(color='gray', linestyle='--', linewidth=1)


def output_format(out_path, flag='--out'):
  """The matplotlib format for out_path's extension; InputError (one line,
  exit 2) for any other extension."""
  ext = os.path.splitext(out_path)[1].lower()
  if ext not in FORMATS:
    raise InputError(
      '%s %s: unknown extension %r: use %s'
      % (flag, out_path, ext or '(none)', ', '.join(sorted(FORMATS)))
    )
  return FORMATS[ext]


def _distinct(summary, column):
  """The distinct values of a summary column as text, in sorted order."""
  if column not in summary.columns:
    return []
  values = set()
  for value in summary[column]:
    values.update(str(value).split(', '))  # summarize joins several
  return sorted(values - {rio.MISSING})


def setup_title(summary):
  """'resnet20, batch 32 per device, on AMD EPYC (2 cores)': what the plot
  shows, from the summary's model, batch and hardware columns."""
  models = ', '.join(_distinct(summary, 'model'))
  batches = sorted(int(b) for b in summary['batch_size_per_device'].unique())
  batch = 'batch %s per device' % ', '.join(str(b) for b in batches)
  hardware = ' / '.join(_distinct(summary, 'hardware')) or 'unknown hardware'
  return '%s, %s, on %s' % (models, batch, hardware)


def axis_label(summary, by):
  """The x axis label, with units: what the count column counts."""
  if by == 'workers':
    towers = _distinct(summary, 'num_devices')
    return 'workers (× %s towers each)' % ' or '.join(towers)
  workers = _distinct(summary, 'num_workers')
  if workers in ([], ['1']):
    return 'devices (towers × workers)'
  return 'towers per worker (× %s workers)' % ' or '.join(workers)


def _error_bars(ax, group, column, low, high, color):
  """Draw the interval of each point that has one as an error bar."""
  known = group.dropna(subset=[low, high])
  known = known[known[high] < float('inf')]  # an unbounded bar: not drawn
  if not len(known):
    return
  ax.errorbar(
    known['count'],
    known[column],
    yerr=[known[column] - known[low], known[high] - known[column]],
    fmt='none',
    ecolor=color,
    capsize=3,
    linewidth=1,
  )


def _plot_group(ax_ips, ax_eff, group, label, counts, ideal_label):
  """One configuration's lines, error bars and ideal-scaling line."""
  group = group.sort_values('count')
  (line,) = ax_ips.plot(
    group['count'], group['images_per_sec'], marker='o', label=label
  )
  color = line.get_color()
  _error_bars(ax_ips, group, 'images_per_sec', 'ips_low', 'ips_high', color)
  single = group[group['count'] == 1]
  if len(single):
    ips1 = float(single['images_per_sec'].iloc[0])
    ax_ips.plot(
      counts, [ips1 * c for c in counts], label=ideal_label, **IDEAL_STYLE
    )
  eff = group.dropna(subset=['efficiency'])
  if len(eff):
    ax_eff.plot(eff['count'], eff['efficiency'], marker='o', color=color)
    _error_bars(
      ax_eff, eff, 'efficiency', 'efficiency_low', 'efficiency_high', color
    )
  return bool(len(single))


def scaling_figure(summary, keys, by='devices', title=None):
  """A two-panel matplotlib Figure of a compare/_results_io summary:
  images/sec (with error bars from the intervals and the ideal-scaling
  line N * ips(1)) and scaling efficiency, against the device count.

  summary: DataFrame from results_io.summarize; keys: its row-key columns.
  The title is the setup (model, batch, hardware), after `title` if given.
  """
  # matplotlib only when a figure is drawn: compare and report start without.
  import matplotlib

  matplotlib.use('Agg')  # files only; never needs a display
  import matplotlib.pyplot as plt

  varying = [
    k for k in keys if k not in STRATEGY_KEYS and summary[k].nunique() > 1
  ]
  counts = sorted(int(c) for c in summary['count'].unique())
  fig, (ax_ips, ax_eff) = plt.subplots(1, 2, figsize=(12, 5))
  ideal_label = 'ideal scaling: N × images/sec at 1'
  for _, group in summary.groupby(keys, sort=True):
    label = line_label(group.iloc[0], varying)
    if _plot_group(ax_ips, ax_eff, group, label, counts, ideal_label):
      ideal_label = '_' + ideal_label  # one legend entry for all of them
  ax_eff.axhline(1.0, label='ideal scaling (100%)', **IDEAL_STYLE)
  _lay_out_axes(fig, summary, (ax_ips, ax_eff), counts, by)
  setup = setup_title(summary)
  fig.suptitle('%s\n%s' % (title, setup) if title else setup)
  fig.tight_layout()
  return fig


def _lay_out_axes(fig, summary, axes, counts, by):
  """Log2 count axis, labels with units, limits and legends."""
  # matplotlib only when a figure is drawn: compare and report start without.
  from matplotlib.ticker import NullLocator
  from matplotlib.ticker import PercentFormatter

  ax_ips, ax_eff = axes
  xlabel = axis_label(summary, by)
  for ax, ylabel in (
    (ax_ips, 'images/sec'),
    (ax_eff, 'scaling efficiency, ips(N) / (N × ips(1))'),
  ):
    ax.set_xscale('log', base=2)
    ax.set_xticks(counts)
    ax.set_xticklabels([str(c) for c in counts])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    # The configurations first, the ideal-scaling reference last.
    order = sorted(range(len(labels)), key=lambda i: labels[i][:5] == 'ideal')
    ax.legend(
      [handles[i] for i in order], [labels[i] for i in order], fontsize='small'
    )
  ax_ips.set_ylim(bottom=0)
  top = 1.1  # keep the 100% line visible with room above it
  for column in ('efficiency', 'efficiency_high'):
    if summary[column].notna().any():
      top = max(top, float(summary[column].max()) * 1.05)
  ax_eff.set_ylim(0, top)
  ax_eff.yaxis.set_major_formatter(PercentFormatter(1.0))
  ax_ips.set_title('Throughput (median, interval bars)')
  ax_eff.set_title('Scaling efficiency')


def plot_scaling(
  summary, keys, out_path, by='devices', title=None, flag='--out'
):
  """Save scaling_figure(summary, keys, by, title) to out_path, in the
  format its extension names (.png, .svg or .pdf) at DPI dots per inch.

  Raises InputError (naming `flag`, the option that gave out_path) for
  another extension or if out_path cannot be written.
  """
  fmt = output_format(out_path, flag)
  import matplotlib.pyplot as plt  # matplotlib only when a figure is drawn

  fig = scaling_figure(summary, keys, by, title)
  try:
    _save(fig, out_path, fmt, flag)
  finally:
    plt.close(fig)


def _save(fig, out_path, fmt, flag):
  """Write the figure in format fmt, creating the folder if needed."""
  folder = os.path.dirname(out_path)
  try:
    if folder:
      os.makedirs(folder, exist_ok=True)
    fig.savefig(out_path, format=fmt, dpi=DPI)
  except OSError as e:
    raise InputError(
      '%s: cannot write %s: %s' % (flag, out_path, e.strerror or e)
    ) from None


def parse_args(argv):
  """Command-line flags (see the module docstring)."""
  parser = rio.results_parser(
    'plot.py',
    'Plot images/sec and scaling efficiency vs device count.',
    'x axis: num_devices (default) or num_workers',
  )
  parser.add_argument(
    '--out',
    required=True,
    metavar='OUT.png',
    help='file to write; its extension sets the format: .png, .svg or .pdf',
  )
  parser.add_argument('--title', help='figure title')
  return parser.parse_args(argv)


def main(argv=None):
  """Entry point: writes the plot and returns the exit status."""
  args = parse_args(argv)
  output_format(args.out)  # a bad extension fails before any work
  rio.check_output('out', args.out)
  rio.check_files(args.files)
  frame = rio.load_frame(args.files, args.skip_bad)
  keys = rio.row_keys(frame, args.by)
  summary = rio.summarize(frame, args.by, keys)
  plot_scaling(summary, keys, args.out, by=args.by, title=args.title)
  print('wrote %s' % args.out)
  return 0


if __name__ == '__main__':
  sys.exit(rio.run_main(main, 'plot.py'))
