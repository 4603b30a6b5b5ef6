"""Write one self-contained HTML page from results files.

Usage (from the repo root):

  .venv/bin/python scripts/report.py FILE [FILE...] --out PAGE.html
      [--by devices|workers] [--title TEXT] [--skip_bad]

The page holds, with nothing fetched from elsewhere (the plot is an inline
base64 PNG, the style and one small script are inline):

- the notes: every figure whose difference is within noise (or over 100%
  from one run with no spread), as compare.py marks them;
- the comparison table, laid out from compare.py's own table cells;
- the scaling plot (plot.py's figure, with error bars);
- the spread of each point: its runs, median, interval and where the
  interval comes from, and each run's own images/sec and spread;
- the environment of each machine: the `env` block of its lines (a field
  that differs between lines lists its values).

When the page has loaded, its script sets data-images-total and
data-images-decoded on <body> (images whose naturalWidth > 0), which a
headless browser's DOM dump shows. Exit status: 0, or 2 for bad input (one
line on stderr).
"""

import base64
import html
import io
import json
import math
import os
import sys

from tf_cnn_benchmarks.commands import compare
from tf_cnn_benchmarks.commands import plot
from tf_cnn_benchmarks.commands import results_io as rio

InputError = rio.InputError

STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 90%; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f0f0f0; }
td.number { text-align: right; white-space: nowrap; }
td.noise { background: #fff3cd; }
img { max-width: 100%; }
.note { background: #fff3cd; padding: 0.5em 1em; }
"""

# A field that differs between a machine's lines lists this many values.
MAX_VALUES_SHOWN = 4

# Sets data-images-total / data-images-decoded on <body> once the page (and
# so every image) has loaded: what a browser test reads from the DOM.
IMAGES_SCRIPT = """
window.addEventListener('load', function () {
  var images = Array.prototype.slice.call(document.images);
  var decoded = images.filter(function (img) {
    return img.complete && img.naturalWidth > 0;
  });
  document.body.setAttribute('data-images-total', String(images.length));
  document.body.setAttribute('data-images-decoded', String(decoded.length));
});
"""


def esc(value):
  """HTML-escaped text of any value."""
  return html.escape(str(value), quote=True)


def html_table(table_id, header, rows, numeric=(), classes=None):
  """A <table> with a <thead> header row and one <tbody> <tr> per row.

  The columns whose indexes are in numeric are right-aligned numbers;
  classes, if given, maps (row index, column index) to an extra cell class.
  """
  classes = classes or {}
  out = ['<table id="%s">' % esc(table_id), '<thead><tr>']
  out.extend('<th>%s</th>' % esc(h) for h in header)
  out.append('</tr></thead>\n<tbody>')
  for r, row in enumerate(rows):
    cells = []
    for c, value in enumerate(row):
      names = ['number'] if c in numeric else []
      names += [classes[(r, c)]] if (r, c) in classes else []
      attr = ' class="%s"' % ' '.join(names) if names else ''
      cells.append('<td%s>%s</td>' % (attr, esc(value)))
    out.append('<tr>%s</tr>' % ''.join(cells))
  out.append('</tbody></table>')
  return '\n'.join(out)


def comparison_section(keys, counts, rows, caption):
  """compare.py's table (its display_cells), as HTML."""
  header, cells = compare.display_cells(keys, counts, rows)
  first_number = len(keys) + 1
  noisy = {
    (r, c): 'noise'
    for r, row in enumerate(cells)
    for c, cell in enumerate(row)
    if c >= first_number and cell.startswith(compare.WITHIN_NOISE)
  }
  notes = ''.join('<p>%s</p>' % esc(n) for n in compare.table_notes(rows))
  return '<h2>Comparison</h2>\n<p>%s</p>\n%s\n%s' % (
    esc(caption),
    html_table(
      'comparison', header, cells, range(first_number, len(header)), noisy
    ),
    notes,
  )


def noise_section(findings):
  """The list of figures whose differences are within noise."""
  if not findings:
    return (
      '<h2>Noise</h2>\n<p id="noise-none">No difference in the table is '
      'within noise.</p>'
    )
  items = ''.join('<li>%s</li>' % esc(f) for f in findings)
  return (
    '<h2>Noise</h2>\n<div class="note"><p>These differences are within '
    'noise: their intervals overlap, so the table does not show them to '
    'be real.</p><ul id="noise">%s</ul></div>' % items
  )


def plot_section(summary, keys, by, title):
  """plot.py's scaling figure as an inline base64 PNG <img>."""
  import matplotlib.pyplot as plt  # matplotlib only with a figure: fast --help

  fig = plot.scaling_figure(summary, keys, by, title)
  buffer = io.BytesIO()
  try:
    fig.savefig(buffer, format='png', dpi=plot.DPI)
  finally:
    plt.close(fig)
  data = base64.b64encode(buffer.getvalue()).decode('ascii')
  return (
    '<h2>Scaling plot</h2>\n<img id="plot" alt="images/sec and scaling '
    'efficiency against the device count" src="data:image/png;base64,%s">'
    % data
  )


def _interval_source(point, values):
  """Where a point's images/sec interval comes from, in words."""
  source = point['interval_source']
  coverage = 100 * point['ips_coverage']
  if source == 'repeats':
    if point['ips_low'] == min(values) and point['ips_high'] == max(values):
      return 'range of %d repeats (%.1f%% coverage)' % (len(values), coverage)
    return 'order statistics of %d repeats (%.1f%% coverage)' % (
      len(values),
      coverage,
    )
  if source == 'run':
    return "the run's own 95% interval over its steps"
  return 'none: one run with no recorded spread'


def _run_text(run):
  """One run of a point: its repeat index, images/sec and own spread."""
  text = '%.1f' % run['images_per_sec']
  if run['repeat'] is not None and not _nan(run['repeat']):
    text = '#%d %s' % (int(run['repeat']), text)
  spread = [
    '%s %.2f' % (name, run['run_' + name])
    for name in ('stderr', 'jitter')
    if not _nan(run['run_' + name])
  ]
  return '%s (%s)' % (text, ', '.join(spread)) if spread else text


def _nan(value):
  return isinstance(value, float) and math.isnan(value)


def spread_section(frame, summary, keys, by):
  """One row per point: its runs, median, interval and its source, and
  each run's images/sec with its own stderr and jitter."""
  count_col, _ = rio.BY_COLUMNS[by]
  points = {
    tuple(row[k] for k in keys) + (int(row['count']),): row
    for _, row in summary.iterrows()
  }
  header = list(keys) + [
    count_col,
    'runs',
    'images/sec (median)',
    'interval',
    'interval from',
    'each run: images/sec (its stderr, jitter)',
  ]
  rows = []
  for key_values, group in frame.groupby(keys + [count_col], sort=True):
    point = points[tuple(key_values[:-1]) + (int(key_values[-1]),)]
    if 'repeat' in group and group['repeat'].notna().any():
      group = group.sort_values('repeat', kind='stable')
    runs = [run for _, run in group.iterrows()]
    interval = '-'
    if not _nan(point['ips_low']):
      interval = '[%.1f, %.1f]' % (point['ips_low'], point['ips_high'])
    rows.append(
      [str(v) for v in key_values]
      + [
        str(len(runs)),
        '%.1f' % point['images_per_sec'],
        interval,
        _interval_source(point, list(group['images_per_sec'])),
        '; '.join(_run_text(run) for run in runs),
      ]
    )
  return '<h2>Spread of each point</h2>\n%s' % html_table(
    'spread', header, rows, range(len(keys), len(keys) + 4)
  )


def _flatten(prefix, value, out):
  """Dotted keys of a nested env block -> JSON text of each leaf."""
  if isinstance(value, dict) and value:
    for key in sorted(value):
      _flatten('%s.%s' % (prefix, key) if prefix else key, value[key], out)
  else:
    out[prefix] = value if isinstance(value, str) else json.dumps(value)


def machines(frame):
  """{(host, hardware): [flattened env of each line]} in first-seen order."""
  found = {}
  for _, row in frame.iterrows():
    flat = {}
    _flatten('', row['env'], flat)
    found.setdefault((row['host'], row['hardware']), []).append(flat)
  return found


def environment_section(frame):
  """The env block of each machine; a field whose value differs between
  that machine's lines lists its distinct values."""
  parts = ['<h2>Environment of each machine</h2>']
  for number, ((host, hardware), envs) in enumerate(machines(frame).items()):
    rows = []
    for field in sorted({f for env in envs for f in env}):
      values = list(dict.fromkeys(env.get(field, '(absent)') for env in envs))
      if len(values) > MAX_VALUES_SHOWN:  # e.g. command_line: one per line
        more = len(values) - MAX_VALUES_SHOWN
        values = values[:MAX_VALUES_SHOWN] + ['... %d more' % more]
      shown = values[0] if len(values) == 1 else 'varies: ' + ' | '.join(values)
      rows.append([field, shown])
    parts.append(
      '<h3>%s: %s (%d lines)</h3>' % (esc(host), esc(hardware), len(envs))
    )
    parts.append(html_table('env-%d' % number, ['field', 'value'], rows))
  return '\n'.join(parts)


def build_page(paths, by='devices', title=None, skip_bad=False):
  """The report page (HTML text) for the results files at paths."""
  frame = rio.load_frame(paths, skip_bad, env=True)
  keys = rio.row_keys(frame, by)
  summary = rio.summarize(frame, by, keys)
  counts, rows = compare.table_rows(summary, keys)
  heading = title or 'Benchmark report: %s' % plot.setup_title(summary)
  sources = ', '.join(os.path.basename(p) for p in paths)
  body = [
    '<h1>%s</h1>' % esc(heading),
    '<p>From %s: %d runs.</p>' % (esc(sources), len(frame)),
    noise_section(compare.noise_findings(keys, counts, rows, by)),
    comparison_section(keys, counts, rows, compare.caption_for(by)),
    plot_section(summary, keys, by, title),
    spread_section(frame, summary, keys, by),
    environment_section(frame),
  ]
  return (
    '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
    '<title>%s</title>\n<style>%s</style>\n<script>%s</script>\n</head>\n'
    '<body>\n%s\n</body>\n</html>\n'
    % (esc(heading), STYLE, IMAGES_SCRIPT, '\n'.join(body))
  )


def parse_args(argv):
  """Command-line flags (see the module docstring)."""
  parser = rio.results_parser(
    'report.py',
    'Write one self-contained HTML page from results files.',
    'columns: num_devices (default) or num_workers',
  )
  parser.add_argument(
    '--out', required=True, metavar='PAGE.html', help='HTML file to write'
  )
  parser.add_argument('--title', help='page and plot title')
  return parser.parse_args(argv)


def main(argv=None):
  """Entry point: writes the page and returns the exit status."""
  args = parse_args(argv)
  if os.path.splitext(args.out)[1].lower() not in ('.html', '.htm'):
    raise InputError('--out %s: expected a .html file' % args.out)
  rio.check_output('out', args.out)
  rio.check_files(args.files)
  page = build_page(args.files, args.by, args.title, args.skip_bad)
  folder = os.path.dirname(args.out)
  try:
    if folder:
      os.makedirs(folder, exist_ok=True)
    with open(args.out, 'w', encoding='utf-8') as f:
      f.write(page)
  except OSError as e:
    raise InputError(
      '--out: cannot write %s: %s' % (args.out, e.strerror or e)
    ) from None
  print('wrote %s' % args.out)
  return 0


if __name__ == '__main__':
  sys.exit(rio.run_main(main, 'report.py'))
