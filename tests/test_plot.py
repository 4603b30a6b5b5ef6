"""Tests of scripts/plot.py: the figure's title, axes, error bars and
legend (read from the matplotlib objects), and the file format taken from
the --out extension. Fixtures: see tests/report_testing.py."""

import struct

import pytest

from tests import report_testing  # noqa: E402
from tf_cnn_benchmarks.commands import plot  # noqa: E402
from tf_cnn_benchmarks.commands import results_io  # noqa: E402

REPEATS = report_testing.REPEATS
SCALING = report_testing.SCALING


def figure_of(*paths, by='devices', title=None):
  """plot.scaling_figure of the summary of the given results files."""
  frame = results_io.load_frame(list(paths))
  keys = results_io.row_keys(frame, by)
  summary = results_io.summarize(frame, by, keys)
  return plot.scaling_figure(summary, keys, by, title)


@pytest.fixture
def repeats_figure():
  import matplotlib.pyplot as plt

  fig = figure_of(REPEATS)
  yield fig
  plt.close(fig)


def plot_cli(capsys, *args):
  """plot.py's main in-process; returns (status, out, err)."""
  try:
    status = results_io.run_main(plot.main, 'plot.py', list(args))
  except SystemExit as e:
    status = e.code
  out, err = capsys.readouterr()
  return status, out, err


def test_title_names_model_batch_and_hardware(repeats_figure, tmp_path):
  assert repeats_figure._suptitle.get_text() == (
    'trivial, batch 32 per device, on Fixture CPU 9000 (2 cores)'
  )
  gpu_lines = [
    report_testing.record('replicated', n, 100.0 * n, gpu_model='NVIDIA A100')
    for n in (1, 2)
  ]
  path = report_testing.write_records(tmp_path / 'gpu.jsonl', gpu_lines)
  fig = figure_of(path, title='My sweep')
  assert fig._suptitle.get_text() == (
    'My sweep\ntrivial, batch 32 per device, on NVIDIA A100'
  )
  for line in gpu_lines:
    line['env']['gpu_count'] = 8
  path = report_testing.write_records(tmp_path / 'gpu8.jsonl', gpu_lines)
  assert figure_of(path)._suptitle.get_text() == (
    'trivial, batch 32 per device, on NVIDIA A100 (8 GPUs)'
  )


def test_axes_are_labelled_with_units(repeats_figure):
  ax_ips, ax_eff = repeats_figure.axes
  assert ax_ips.get_xlabel() == 'devices (towers × workers)'
  assert ax_eff.get_xlabel() == 'devices (towers × workers)'
  assert ax_ips.get_ylabel() == 'images/sec'
  assert ax_eff.get_ylabel().startswith('scaling efficiency')


def _error_bar_spans(ax):
  """Sorted (x, low, high) of every error bar drawn on ax."""
  from matplotlib.container import ErrorbarContainer

  spans = []
  for container in ax.containers:
    if isinstance(container, ErrorbarContainer):
      for collection in container.lines[2]:
        for segment in collection.get_segments():
          (x, low), (_, high) = segment
          spans.append((float(x), float(low), float(high)))
  return sorted(spans)


def test_error_bars_from_repeats_and_run_spread(repeats_figure):
  ax_ips, ax_eff = repeats_figure.axes
  # Six points, each with an interval: repeats or the run's own CI.
  assert _error_bar_spans(ax_ips) == [
    (1.0, 90.0, 110.0),
    (1.0, 95.0, 105.0),
    (1.0, 98.0, 102.0),
    (2.0, 148.0, 152.0),
    (2.0, 200.0, 240.0),
    (2.0, 245.0, 255.0),
  ]
  # Efficiency bars at 2 devices only (none at the reference point).
  spans = _error_bar_spans(ax_eff)
  assert [x for x, _, _ in spans] == [2.0, 2.0, 2.0]
  assert spans[1][1:] == pytest.approx((200 / 110 / 2, 240 / 90 / 2))


def test_no_error_bar_where_there_is_no_interval():
  import matplotlib.pyplot as plt

  fig = figure_of(SCALING)
  # replicated at 2 devices has 3 duplicate runs; no other point has an
  # interval (schema 1 lines carry no spread).
  assert _error_bar_spans(fig.axes[0]) == [(2.0, 170.0, 190.0)]
  plt.close(fig)


def test_legend_shows_every_labelled_line_and_nothing_else(repeats_figure):
  for ax in repeats_figure.axes:
    labelled = [
      artist.get_label()
      for artist in ax.get_lines()
      if not artist.get_label().startswith('_') and len(artist.get_xdata())
    ]
    shown = [text.get_text() for text in ax.get_legend().get_texts()]
    assert sorted(shown) == sorted(labelled)
  ips_legend = [t.get_text() for t in repeats_figure.axes[0].legend_.texts]
  assert ips_legend == [
    'independent float32',
    'parameter_server float32',
    'replicated float32',
    'ideal scaling: N × images/sec at 1',
  ]
  ideal = [
    line
    for line in repeats_figure.axes[0].get_lines()
    if 'ideal scaling' in line.get_label()
  ]
  assert len(ideal) == 3  # one per configuration, one legend entry
  assert list(ideal[0].get_ydata()) == [100.0, 200.0]
  eff_legend = [t.get_text() for t in repeats_figure.axes[1].legend_.texts]
  assert eff_legend == ['ideal scaling (100%)']


def _png_size(data):
  """(width, height) from a PNG's IHDR chunk."""
  assert data.startswith(b'\x89PNG\r\n\x1a\n')
  return struct.unpack('>II', data[16:24])


@pytest.mark.parametrize(
  'name, magic',
  [
    ('plot.png', b'\x89PNG\r\n\x1a\n'),
    ('plot.PNG', b'\x89PNG\r\n\x1a\n'),
    ('plot.svg', b'<?xml'),
    ('plot.pdf', b'%PDF-'),
  ],
)
def test_format_from_extension(tmp_path, capsys, name, magic):
  out = tmp_path / name
  status, printed, err = plot_cli(capsys, REPEATS, '--out', str(out))
  assert status == 0, err
  assert printed == 'wrote %s\n' % out
  data = out.read_bytes()
  assert data.startswith(magic)
  if name.endswith('.svg'):
    assert b'<svg' in data[:1000]
  if magic.startswith(b'\x89PNG'):
    # 12 x 5 inches at 150 dpi.
    assert _png_size(data) == (1800, 750)


def test_unknown_extension_is_one_line_exit_2(tmp_path, capsys):
  for name in ('plot.jpg', 'plot'):
    out = tmp_path / name
    status, printed, err = plot_cli(capsys, REPEATS, '--out', str(out))
    assert status == 2
    assert printed == ''
    assert len(err.splitlines()) == 1 and 'Traceback' not in err
    assert err.startswith('plot.py: error: --out %s: unknown extension' % out)
    assert err.endswith('use .pdf, .png, .svg\n')
    assert not out.exists()


def test_lines_split_by_compressor_and_accumulation(tmp_path):
  """Runs that differ only in how gradients travel are separate lines,
  labelled by what differs (never one median of both)."""
  import json

  import matplotlib.pyplot as plt

  lines = [json.loads(x) for x in open(REPEATS) if x.strip()]
  path = tmp_path / 'mixed.jsonl'
  with open(path, 'w') as f:
    for line in lines:
      for compressor, steps in (('none', 1), ('fp16', 1), ('none', 2)):
        f.write(
          json.dumps(
            dict(
              line,
              gradient_compression=compressor,
              gradient_accumulation_steps=steps,
            )
          )
          + '\n'
        )
  fig = figure_of(str(path))
  try:
    labels = {t.get_text() for t in fig.axes[0].get_legend().get_texts()} - {
      'ideal scaling: N × images/sec at 1'
    }
  finally:
    plt.close(fig)
  prefixes = {label.split(':')[0] for label in labels}
  assert prefixes == {
    'compression=fp16 accumulation=1',
    'compression=none accumulation=1',
    'compression=none accumulation=2',
  }, labels
