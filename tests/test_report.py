"""Tests of scripts/report.py: the page's content, that it is
self-contained, and what headless Chromium renders of it (the table rows
and the decoded plot image). Fixtures: see tests/report_testing.py."""

import base64
import os
from pathlib import Path
import re
import shutil
import subprocess
import tempfile

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / 'scripts'

from tests import helpers  # noqa: E402
from tests import report_testing  # noqa: E402
from tf_cnn_benchmarks.commands import compare  # noqa: E402
from tf_cnn_benchmarks.commands import report  # noqa: E402
from tf_cnn_benchmarks.commands import results_io  # noqa: E402

REPEATS = report_testing.REPEATS
SCALING = report_testing.SCALING
CHROMIUM = shutil.which('chromium') or (
  '/usr/bin/chromium' if os.path.exists('/usr/bin/chromium') else None
)
CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]


def report_cli(capsys, *args):
  """report.py's main in-process; returns (status, out, err)."""
  try:
    status = results_io.run_main(report.main, 'report.py', list(args))
  except SystemExit as e:
    status = e.code
  out, err = capsys.readouterr()
  return status, out, err


def table_body_rows(page, table_id):
  """The <tr> elements of a table's <tbody>, as HTML text."""
  match = re.search(
    r'<table id="%s">.*?<tbody>(.*?)</tbody>' % re.escape(table_id),
    page,
    re.S,
  )
  assert match, 'no table %r' % table_id
  return re.findall(r'<tr>.*?</tr>', match.group(1), re.S)


def expected_counts(*paths):
  """(comparison table rows, points) that compare.py finds in paths."""
  frame = results_io.load_frame(list(paths))
  keys = results_io.row_keys(frame)
  summary = results_io.summarize(frame, 'devices', keys)
  return len(compare.table_rows(summary, keys)[1]), len(summary)


@pytest.fixture
def page(tmp_path, capsys):
  """(path, text) of the report of the repeats and the schema-1 fixture:
  two machines ('Fixture CPU 9000' and 'fixture')."""
  out = tmp_path / 'sub' / 'page.html'
  status, printed, err = report_cli(capsys, REPEATS, SCALING, '--out', str(out))
  assert status == 0, err
  assert printed == 'wrote %s\n' % out
  return out, out.read_text(encoding='utf-8')


def test_page_has_table_points_plot_env_and_noise(page):
  _, text = page
  rows, points = expected_counts(REPEATS, SCALING)
  assert len(table_body_rows(text, 'comparison')) == rows
  assert len(table_body_rows(text, 'spread')) == points == 12
  # Two machines, so the hardware is a row key and each has an env table.
  assert '<th>hardware</th>' in text
  assert 'Fixture CPU 9000 (2 cores) (14 lines)' in text
  assert len(table_body_rows(text, 'env-0')) == 8  # the fixture's env keys
  assert len(table_body_rows(text, 'env-1')) == 8
  assert '<td>cpu_model</td><td>Fixture CPU 9000</td>' in text
  # The spread of a repeated point: its runs in repeat order, the source.
  assert (
    '#0 240.0 (stderr 3.06, jitter 3.00); #1 200.0 (stderr 3.06, '
    'jitter 3.00); #2 220.0 (stderr 3.06, jitter 3.00)'
  ) in text
  assert 'range of 3 repeats (75.0% coverage)' in text
  assert 'the run&#x27;s own 95% interval over its steps' in text
  # Within noise: listed in the notes and marked in the table.
  noise = re.findall(r'<li>(.*?)</li>', text)
  assert (
    'Fixture CPU 9000 (2 cores)/trivial/replicated/-/float32/32 at 2 '
    'device(s): efficiency 110.0%, interval [90.9%, 133.3%]: within noise'
  ) in noise
  assert '<td class="number noise">within noise [90.9%, 133.3%]</td>' in text


def test_page_is_self_contained(page):
  _, text = page
  assert not re.search(r'(src|href)\s*=\s*["\']?(https?:|//)', text, re.I)
  assert not re.search(r'url\(|@import|<link|<iframe', text, re.I)
  images = re.findall(r'<img [^>]*src="([^"]*)"', text)
  assert len(images) == 1
  prefix = 'data:image/png;base64,'
  assert images[0].startswith(prefix)
  png = base64.b64decode(images[0][len(prefix) :])
  assert png.startswith(b'\x89PNG\r\n\x1a\n') and len(png) > 10000


def test_no_noise_note_when_nothing_overlaps(tmp_path, capsys):
  lines = [
    report_testing.record('replicated', n, ips, repeat=r)
    for n, values in ((1, (100.0, 101.0, 99.0)), (2, (150.0, 151.0, 149.0)))
    for r, ips in enumerate(values)
  ]
  path = report_testing.write_records(tmp_path / 'clean.jsonl', lines)
  out = tmp_path / 'clean.html'
  assert report_cli(capsys, path, '--out', str(out))[0] == 0
  text = out.read_text()
  assert 'id="noise-none"' in text and '<ul id="noise">' not in text


def test_env_nested_fields_and_values_that_vary(tmp_path, capsys):
  lines = []
  for n in range(6):
    line = report_testing.record('replicated', 1 + n % 2, 100.0 + n, repeat=n)
    line['env'].update(
      command_line='bench --run %d' % n,
      cpu_flags=['avx2', 'avx512f'],
      null_reasons={'gpu_model': 'no GPU visible'},
    )
    lines.append(line)
  path = report_testing.write_records(tmp_path / 'env.jsonl', lines)
  out = tmp_path / 'env.html'
  assert report_cli(capsys, path, '--out', str(out))[0] == 0
  text = out.read_text()
  assert '<td>null_reasons.gpu_model</td><td>no GPU visible</td>' in text
  assert '<td>cpu_flags</td><td>[&quot;avx2&quot;, &quot;avx512f&quot;]' in text
  assert (
    '<td>command_line</td><td>varies: bench --run 0 | bench --run 1 | '
    'bench --run 2 | bench --run 3 | ... 2 more</td>'
  ) in text


def test_bad_input_is_one_line_exit_2(tmp_path, capsys):
  for args, message in (
    (
      [REPEATS, '--out', str(tmp_path / 'page.txt')],
      'report.py: error: --out %s: expected a .html file\n'
      % (tmp_path / 'page.txt'),
    ),
    (
      ['nope.jsonl', '--out', str(tmp_path / 'page.html')],
      'report.py: error: nope.jsonl: no such results file\n',
    ),
  ):
    status, out, err = report_cli(capsys, *args)
    assert (status, out, err) == (2, '', message)
  assert not list(tmp_path.iterdir())


def test_help_loads_no_tensorflow_and_prints_nothing_on_stderr():
  env = dict(os.environ)
  env.pop('TF_CPP_MIN_LOG_LEVEL', None)  # as a user runs it
  proc = helpers.run_script('report.py', '--help', env=env)
  assert proc.returncode == 0 and proc.stderr == ''
  assert '--out PAGE.html' in proc.stdout
  probe = (
    'import runpy, sys\n'
    'sys.argv = ["report.py", "--help"]\n'
    'sys.path.insert(0, %r)\n'
    'try:\n'
    '  runpy.run_module(%r, run_name="__main__", alter_sys=True)\n'
    'except SystemExit:\n'
    '  pass\n'
    'sys.stderr.write(str("tensorflow" in sys.modules))\n'
  ) % (str(SCRIPTS.parent), 'tf_cnn_benchmarks.commands.report')
  assert helpers.run_python(['-c', probe], env=env).stderr == 'False'


def chromium_dom(url):
  """The DOM headless Chromium has after loading url (--dump-dom)."""
  with tempfile.TemporaryDirectory() as profile:
    proc = subprocess.run(
      [CHROMIUM, *CHROMIUM_FLAGS, '--user-data-dir=%s' % profile]
      + ['--dump-dom', url],
      capture_output=True,
      text=True,
      timeout=180,
    )
  assert proc.returncode == 0, proc.stderr[-2000:]
  return proc.stdout


@pytest.mark.skipif(
  CHROMIUM is None,
  reason='Chromium is not installed (Debian package "chromium"; .ci/run '
  'installs it): the page cannot be rendered in a browser here',
)
def test_chromium_renders_table_rows_and_plot(page):
  path, _ = page
  dom = chromium_dom(path.as_uri())
  rows, points = expected_counts(REPEATS, SCALING)
  assert len(table_body_rows(dom, 'comparison')) == rows
  assert len(table_body_rows(dom, 'spread')) == points
  # The page's script ran after load and found the plot decoded
  # (naturalWidth > 0).
  body = re.search(r'<body([^>]*)>', dom).group(1)
  assert 'data-images-total="1"' in body
  assert 'data-images-decoded="1"' in body
  images = re.findall(r'<img [^>]*src="(data:image/png;base64,[^"]+)"', dom)
  assert len(images) == 1
