"""Tests of scripts/compare.py and scripts/plot.py on small fixture files.

tests/fixtures/scaling.jsonl: trivial/cifar10/float32/batch 32 on 1, 2, 4
devices. replicated: 100, median(170, 190, 180) = 180, 320 images/sec, MFU
10%, 9%, 8%; parameter_server: 100, 150, 200; plus one status-error line.
tests/fixtures/baseline.jsonl: replicated 100, 200, 320.
tests/fixtures/malformed.jsonl: line 3 is a truncated JSON line.
"""

import csv
import io
import json
import math
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / 'tests' / 'fixtures'

from tests import helpers  # noqa: E402
from tf_cnn_benchmarks.commands import compare  # noqa: E402
from tf_cnn_benchmarks.commands import results_io  # noqa: E402

SCALING = str(FIXTURES / 'scaling.jsonl')
BASELINE = str(FIXTURES / 'baseline.jsonl')
MALFORMED = str(FIXTURES / 'malformed.jsonl')


def run_script(script, *args):
  """Run scripts/<script> from the repo root; returns the CompletedProcess."""
  return helpers.run_script(script, *args)


def compare_cli(capsys, *args):
  """Run compare.py's main in-process (fast); returns (status, out, err)."""
  try:
    status = results_io.run_main(compare.main, 'compare.py', list(args))
  except SystemExit as e:  # argparse usage errors exit from parse_args
    status = e.code
  out, err = capsys.readouterr()
  return status, out, err


def cells(summary, variable_update, column):
  """{count: value} of one summary column for one strategy."""
  rows = summary[summary['variable_update'] == variable_update]
  return dict(zip(rows['count'], rows[column]))


def test_speedup_and_efficiency_exact():
  summary, keys = compare.summarize_files([SCALING])
  assert keys == [
    'model',
    'variable_update',
    'all_reduce_spec',
    'precision',
    'batch_size_per_device',
  ]
  assert cells(summary, 'replicated', 'images_per_sec') == {
    1: 100.0,
    2: 180.0,
    4: 320.0,
  }
  assert cells(summary, 'replicated', 'runs') == {1: 1, 2: 3, 4: 1}
  assert cells(summary, 'replicated', 'speedup') == {1: 1.0, 2: 1.8, 4: 3.2}
  assert cells(summary, 'replicated', 'efficiency') == {1: 1.0, 2: 0.9, 4: 0.8}
  assert cells(summary, 'replicated', 'images_per_sec_per_device') == {
    1: 100.0,
    2: 90.0,
    4: 80.0,
  }
  assert cells(summary, 'replicated', 'mfu') == {1: 0.1, 2: 0.09, 4: 0.08}
  assert cells(summary, 'parameter_server', 'speedup') == {
    1: 1.0,
    2: 1.5,
    4: 2.0,
  }
  assert cells(summary, 'parameter_server', 'efficiency') == {
    1: 1.0,
    2: 0.75,
    4: 0.5,
  }


def test_csv_output_and_error_lines_noted(capsys):
  status, out, err = compare_cli(capsys, SCALING, '--csv')
  assert status == 0, err
  rows = {
    (r['variable_update'], r['metric']): r
    for r in csv.DictReader(io.StringIO(out))
  }
  assert [rows[('replicated', 'efficiency')][c] for c in '124'] == [
    '1.0',
    '0.9',
    '0.8',
  ]
  assert [rows[('parameter_server', 'speedup')][c] for c in '124'] == [
    '1.0',
    '1.5',
    '2.0',
  ]
  assert rows[('parameter_server', 'images_per_sec')]['all_reduce_spec'] == '-'
  assert ('parameter_server', 'mfu') not in rows  # no MFU recorded there
  assert "scaling.jsonl:9: status 'error' ignored" in err
  assert 'RuntimeError: injected failure' in err


def test_terminal_and_markdown_tables(capsys):
  lines = compare_cli(capsys, SCALING)[1].splitlines()
  assert lines[0].startswith('Columns: num_devices.')
  assert lines[1].split()[-4:] == ['metric', '1', '2', '4']
  efficiency = [line for line in lines if 'efficiency' in line.split()[:1]]
  assert efficiency[1].split() == ['efficiency', '100.0%', '90.0%', '80.0%']
  markdown = compare_cli(capsys, SCALING, '--markdown')[1]
  assert (
    '| --- | --- | --- | --- | --- | --- | ---: | ---: | ---: |' in markdown
  )
  assert '|  |  |  |  |  | speedup | 1.00x | 1.80x | 3.20x |' in markdown


def test_baseline_ratio_and_fail_below(capsys):
  summary, _ = compare.summarize_files([SCALING], baseline_paths=[BASELINE])
  assert cells(summary, 'replicated', 'baseline_ratio') == {
    1: 1.0,
    2: 0.9,
    4: 1.0,
  }
  assert all(
    math.isnan(v)
    for v in cells(summary, 'parameter_server', 'baseline_ratio').values()
  )

  failing = run_script(
    'compare.py', SCALING, '--baseline', BASELINE, '--fail_below', '0.95'
  )
  assert failing.returncode == 1
  fails = [line for line in failing.stderr.splitlines() if 'FAIL' in line]
  assert fails == [
    'compare.py: FAIL: trivial/replicated/-/float32/32 at 2 '
    'device(s): ratio 0.900 < 0.95 (180.0 vs baseline 200.0 '
    'images/sec)'
  ]
  assert 'baseline_ratio' in failing.stdout

  status, _, err = compare_cli(
    capsys, SCALING, '--baseline', BASELINE, '--fail_below', '0.85'
  )
  assert status == 0, err


def test_fail_below_with_nothing_matching_fails(tmp_path, capsys):
  other = tmp_path / 'other.jsonl'
  record = json.loads(Path(BASELINE).read_text().splitlines()[0])
  record['model'] = 'resnet20'
  other.write_text(json.dumps(record) + '\n')
  status, _, err = compare_cli(
    capsys, SCALING, '--baseline', str(other), '--fail_below', '0.9'
  )
  assert status == 1
  assert 'no configuration matches the baseline' in err


def test_missing_file_is_exit_2():
  result = run_script('compare.py', SCALING, 'nope/missing.jsonl')
  assert result.returncode == 2
  assert result.stderr.splitlines() == [
    'compare.py: error: nope/missing.jsonl: no such results file'
  ]


def test_missing_baseline_is_exit_2(capsys):
  status, _, err = compare_cli(capsys, SCALING, '--baseline', 'nope.jsonl')
  assert status == 2
  assert err == (
    'compare.py: error: --baseline nope.jsonl: no such results file\n'
  )


def test_malformed_line_reported_by_file_and_line(capsys):
  status, _, err = compare_cli(capsys, MALFORMED)
  assert status == 2
  assert len(err.splitlines()) == 1
  assert err.startswith('compare.py: error: %s:3: not valid JSON' % MALFORMED)
  assert '--skip_bad' in err

  status, out, err = compare_cli(capsys, MALFORMED, '--skip_bad', '--csv')
  assert status == 0
  assert err.startswith('warning: %s:3: skipped' % MALFORMED)
  assert out.splitlines()[0].endswith('metric,1,4')


def test_record_missing_a_key_is_malformed(tmp_path):
  path = tmp_path / 'r.jsonl'
  record = json.loads(Path(BASELINE).read_text().splitlines()[0])
  del record['images_per_sec']
  path.write_text('\n' + json.dumps(record) + '\n')
  try:
    results_io.load_frame([str(path)])
  except results_io.InputError as e:
    assert str(e).startswith("%s:2: missing key 'images_per_sec'" % path)
  else:
    raise AssertionError('missing key not reported')


def test_bad_option_values_are_exit_2(capsys):
  for args in (
    ['--by', 'gpus'],
    ['--fail_below', '0.9'],
    ['--baseline', BASELINE, '--fail_below', 'x'],
    ['--csv', '--markdown'],
  ):
    status, _, err = compare_cli(capsys, SCALING, *args)
    assert status == 2
    assert len(err.splitlines()) == 1, err
    assert err.startswith('compare.py: error: '), err
    assert 'Traceback' not in err


def test_by_workers(tmp_path):
  template = json.loads(Path(BASELINE).read_text().splitlines()[0])
  path = tmp_path / 'workers.jsonl'
  with open(path, 'w') as f:
    for workers, ips in ((1, 200.0), (2, 300.0), (4, 400.0)):
      f.write(
        json.dumps(
          dict(
            template,
            num_devices=2,
            num_workers=workers,
            images_per_sec=ips,
            images_per_sec_per_device=None,
          )
        )
        + '\n'
      )
  frame = results_io.load_frame([str(path)])
  summary = results_io.summarize(frame, by='workers')
  assert list(summary['num_devices']) == [2, 2, 2]
  assert list(summary['speedup']) == [1.0, 1.5, 2.0]
  assert list(summary['efficiency']) == [1.0, 0.75, 0.5]
  # Per-device figure derived when absent: ips / (devices * workers).
  assert list(summary['images_per_sec_per_device']) == [100.0, 75.0, 50.0]


def test_plot_files_are_written(tmp_path, capsys):
  via_compare = tmp_path / 'compare.png'
  status, _, err = compare_cli(capsys, SCALING, '--plot', str(via_compare))
  assert status == 0, err
  via_plot = tmp_path / 'sub' / 'plot.png'
  result = run_script(
    'plot.py', SCALING, BASELINE, '--out', str(via_plot), '--title', 'fixture'
  )
  assert result.returncode == 0, result.stderr
  for path in (via_compare, via_plot):
    data = path.read_bytes()
    assert len(data) > 1000
    assert data.startswith(b'\x89PNG\r\n\x1a\n')


# ---- intervals over repeats (issue 28 item 2) --------------------------------

from tests import report_testing  # noqa: E402

REPEATS = report_testing.REPEATS


def point(summary, variable_update, count):
  """The summary row (a dict) of one strategy at one device count."""
  rows = summary[
    (summary['variable_update'] == variable_update)
    & (summary['count'] == count)
  ]
  assert len(rows) == 1
  return rows.iloc[0].to_dict()


def test_median_interval_is_the_order_statistic_interval():
  # Under 6 values no pair of order statistics reaches 95%: the range, with
  # coverage 1 - 2 * 2**-n (75% for 3 repeats).
  assert results_io.median_interval([110, 90, 100]) == (90.0, 110.0, 0.75)
  assert results_io.median_interval([1, 2]) == (1.0, 2.0, 0.5)
  # 9 values: [x_(2), x_(8)] covers 1 - 2 * (1 + 9) / 512 = 96.1% >= 95%.
  nine = [9, 1, 8, 2, 7, 3, 6, 4, 5]
  assert results_io.median_interval(nine) == (2.0, 8.0, 1 - 20 / 512)


def test_intervals_speedup_and_efficiency_hand_computed():
  summary, _ = compare.summarize_files([REPEATS])
  one = point(summary, 'replicated', 1)
  two = point(summary, 'replicated', 2)
  assert (one['images_per_sec'], one['ips_low'], one['ips_high']) == (
    100.0,
    90.0,
    110.0,
  )
  assert (two['images_per_sec'], two['ips_low'], two['ips_high']) == (
    220.0,
    200.0,
    240.0,
  )
  assert one['interval_source'] == 'repeats' and one['ips_coverage'] == 0.75
  # Ratio of intervals: [200 / 110, 240 / 90]; efficiency that over 2.
  assert two['speedup'] == pytest.approx(2.2)
  assert two['speedup_low'] == pytest.approx(1.8181818)
  assert two['speedup_high'] == pytest.approx(2.6666667)
  assert two['efficiency'] == pytest.approx(1.1)
  assert two['efficiency_low'] == pytest.approx(0.9090909)
  assert two['efficiency_high'] == pytest.approx(1.3333333)
  assert math.isnan(one['speedup_low'])  # 1 by definition at one device
  ps = point(summary, 'parameter_server', 2)
  assert (ps['speedup_low'], ps['speedup_high']) == pytest.approx(
    (148 / 102, 152 / 98)
  )
  # One line per point: the line's own images_per_sec_spread interval.
  single = point(summary, 'independent', 2)
  assert single['runs'] == 1 and single['interval_source'] == 'run'
  assert (single['ips_low'], single['ips_high']) == (245.0, 255.0)
  assert (single['efficiency_low'], single['efficiency_high']) == (
    pytest.approx((245 / 105 / 2, 255 / 95 / 2))
  )


def test_repeats_grouped_with_and_without_sweep_repeat(tmp_path):
  records = report_testing.fixture_records()
  for line in records:
    line.get('sweep', {}).pop('repeat', None)
  bare = report_testing.write_records(tmp_path / 'bare.jsonl', records)
  with_repeat, _ = compare.summarize_files([REPEATS])
  without, _ = compare.summarize_files([bare])
  assert with_repeat.equals(without)


def test_no_spread_and_no_repeat_means_no_interval():
  summary, _ = compare.summarize_files([SCALING])
  one = point(summary, 'replicated', 1)
  assert math.isnan(one['ips_low']) and one['interval_source'] == '-'
  # 2 devices has three duplicate lines: their range.
  two = point(summary, 'replicated', 2)
  assert (two['ips_low'], two['ips_high']) == (170.0, 190.0)
  assert math.isnan(two['speedup_low'])  # ips(1) has no interval


def _efficiency_cells(out, variable_update):
  """The efficiency row's cells (split on 2+ spaces) of one strategy."""
  lines = out.splitlines()
  start = next(i for i, s in enumerate(lines) if variable_update in s)
  row = next(s for s in lines[start:] if ' efficiency ' in ' %s ' % s)
  return [c.strip() for c in row.split('  ') if c.strip()][-2:]


def test_superlinear_efficiency_within_noise_is_not_printed(tmp_path, capsys):
  """The issue's case: 120.9% efficiency whose intervals overlap."""
  lines = [
    report_testing.record('replicated', 1, ips, repeat=r)
    for r, ips in enumerate((100.0, 90.0, 110.0))
  ] + [
    report_testing.record('replicated', 2, ips, repeat=r)
    for r, ips in enumerate((241.8, 200.0, 260.0))
  ]
  path = report_testing.write_records(tmp_path / 'noisy.jsonl', lines)
  status, out, err = compare_cli(capsys, path)
  assert status == 0, err
  assert '120.9%' not in out
  assert _efficiency_cells(out, 'replicated') == [
    '100.0%',
    'within noise [90.9%, 144.4%]',
  ]
  assert 'within noise: the intervals overlap' in out
  markdown = compare_cli(capsys, path, '--markdown')[1]
  assert '| within noise [1.82x, 2.89x] |' in markdown


def test_repeats_table_marks_only_overlapping_differences(capsys):
  status, out, err = compare_cli(capsys, REPEATS)
  assert status == 0, err
  assert _efficiency_cells(out, 'replicated') == [
    '100.0%',
    'within noise [90.9%, 133.3%]',
  ]
  # Above 100% but the run intervals do not overlap: a result.
  assert _efficiency_cells(out, 'independent') == [
    '100.0%',
    '125.0% [116.7%, 134.2%]',
  ]
  assert _efficiency_cells(out, 'parameter_server') == [
    '100.0%',
    '75.0% [72.5%, 77.6%]',
  ]
  assert '220.0 [200.0, 240.0]' in out


def test_superlinear_single_run_without_spread_is_flagged(tmp_path, capsys):
  lines = [
    report_testing.record('replicated', 1, 100.0),
    report_testing.record('replicated', 2, 241.8),
  ]
  path = report_testing.write_records(tmp_path / 'one.jsonl', lines)
  out = compare_cli(capsys, path)[1]
  assert _efficiency_cells(out, 'replicated') == ['100.0%', '120.9%?']
  assert '?: over 100% from a single run with no recorded spread' in out


def test_csv_has_interval_rows(capsys):
  status, out, _ = compare_cli(capsys, REPEATS, '--csv')
  assert status == 0
  rows = {
    (r['variable_update'], r['metric']): r
    for r in csv.DictReader(io.StringIO(out))
  }
  assert rows[('replicated', 'images_per_sec_low')]['2'] == '200.0'
  assert rows[('replicated', 'images_per_sec_high')]['2'] == '240.0'
  assert float(rows[('replicated', 'efficiency_low')]['2']) == pytest.approx(
    200 / 110 / 2
  )
  assert rows[('replicated', 'efficiency_low')]['1'] == ''
  assert rows[('replicated', 'efficiency')]['2'] == '1.1'  # raw, unmarked


def test_baseline_ratio_within_noise(tmp_path, capsys):
  # Baseline: replicated repeats 105, 95, 100 at 1 device (overlaps the
  # candidate's [90, 110]) and 300, 310, 290 at 2 (far from [200, 240]).
  lines = [
    report_testing.record('replicated', n, ips, repeat=r)
    for n, values in ((1, (105.0, 95.0, 100.0)), (2, (300.0, 310.0, 290.0)))
    for r, ips in enumerate(values)
  ]
  base = report_testing.write_records(tmp_path / 'base.jsonl', lines)
  summary, _ = compare.summarize_files([REPEATS], baseline_paths=[base])
  two = point(summary, 'replicated', 2)
  assert (two['baseline_ratio_low'], two['baseline_ratio_high']) == (
    pytest.approx((200 / 310, 240 / 290))
  )
  out = compare_cli(capsys, REPEATS, '--baseline', base)[1]
  ratio = [s for s in out.splitlines() if 'baseline_ratio' in s]
  cells = [c.strip() for c in ratio[-1].split('  ') if c.strip()][-2:]
  # [90 / 105, 110 / 95] holds 1; [200 / 310, 240 / 290] does not.
  assert cells == ['within noise [0.857, 1.158]', '0.733 [0.645, 0.828]']


def test_plot_with_unknown_extension_is_exit_2_before_work(tmp_path, capsys):
  status, out, err = compare_cli(
    capsys, REPEATS, '--plot', str(tmp_path / 'p.jpg')
  )
  assert status == 2
  assert out == ''
  assert err == (
    "compare.py: error: --plot %s: unknown extension '.jpg': use .pdf, "
    '.png, .svg\n' % (tmp_path / 'p.jpg')
  )


def test_unbounded_run_interval_is_infinite_not_dropped(tmp_path, capsys):
  # A line whose step-time interval reached 0 has ci95_high null: its rate
  # interval is [ci95_low, inf).
  top = report_testing.record('replicated', 2, 250.0, spread=(240.0, 260.0))
  top['images_per_sec_spread']['ci95_high'] = None
  lines = [
    report_testing.record('replicated', 1, 100.0, spread=(95.0, 105.0)),
    top,
  ]
  path = report_testing.write_records(tmp_path / 'inf.jsonl', lines)
  summary, _ = compare.summarize_files([path])
  two = point(summary, 'replicated', 2)
  assert two['ips_high'] == math.inf
  assert two['efficiency_low'] == pytest.approx(240 / 105 / 2)  # > 100%
  out = compare_cli(capsys, path)[1]
  assert _efficiency_cells(out, 'replicated') == [
    '100.0%',
    '125.0% [114.3%, inf%]',
  ]


def test_speedup_whose_interval_holds_one_is_within_noise(tmp_path, capsys):
  # 1 device: 100 [90, 110]; 2 devices: 105 [95, 115]. Speed-up 1.05x in
  # [95 / 110, 115 / 90] = [0.86x, 1.28x] holds 1x: two devices are not
  # shown to be faster. Efficiency 52.5% in [43.2%, 63.9%] is a result.
  # replicated2 at 2 devices: 60 [55, 65], a slow-down in [0.50x, 0.72x].
  lines = [
    report_testing.record(name, n, ips, repeat=r)
    for name, n, values in (
      ('replicated', 1, (100.0, 90.0, 110.0)),
      ('replicated', 2, (105.0, 95.0, 115.0)),
      ('replicated2', 1, (100.0, 90.0, 110.0)),
      ('replicated2', 2, (60.0, 55.0, 65.0)),
    )
    for r, ips in enumerate(values)
  ]
  path = report_testing.write_records(tmp_path / 'flat.jsonl', lines)
  out = compare_cli(capsys, path)[1]
  rows = [
    [c.strip() for c in s.split('  ') if c.strip()] for s in out.split('\n')
  ]
  speedups = [cells[-1] for cells in rows if 'speedup' in cells]
  assert speedups == ['within noise [0.86x, 1.28x]', '0.60x [0.50x, 0.72x]']
  assert _efficiency_cells(out, 'replicated ')[-1] == '52.5% [43.2%, 63.9%]'


def test_baseline_from_another_machine_still_matches():
  # repeats.jsonl ran on 'Fixture CPU 9000', baseline.jsonl on 'fixture':
  # the hardware is not a row key when the candidates are one machine.
  summary, keys = compare.summarize_files([REPEATS], baseline_paths=[BASELINE])
  assert 'hardware' not in keys
  assert cells(summary, 'replicated', 'baseline_ratio') == {1: 1.0, 2: 1.1}
  # Candidates from two machines: one row per machine.
  summary, keys = compare.summarize_files([REPEATS, SCALING])
  assert keys[0] == 'hardware'
  assert sorted(set(summary['hardware'])) == [
    'Fixture CPU 9000 (2 cores)',
    'fixture (2 cores)',
  ]


def test_rows_split_by_gradient_compression(tmp_path):
  # The same strategy with and without compression: two rows, never one
  # median; lines from before the key count as `none`.
  lines = []
  for name, rank, ips in (('none', None, 100.0), ('powersgd', 4, 80.0)):
    for n in (1, 2):
      line = report_testing.record('replicated', n, ips * n)
      line.update(gradient_compression=name, powersgd_rank=rank)
      lines.append(line)
  old = report_testing.record('replicated', 1, 100.0)
  old.pop('gradient_compression', None)
  lines.append(old)
  path = report_testing.write_records(tmp_path / 'c.jsonl', lines)
  summary, keys = compare.summarize_files([path])
  assert 'gradient_compression' in keys
  by_compression = {
    c: dict(zip(rows['count'], rows['images_per_sec']))
    for c, rows in summary.groupby('gradient_compression')
  }
  assert by_compression == {
    'none': {1: 100.0, 2: 200.0},
    'powersgd r4': {1: 80.0, 2: 160.0},
  }
  # One compression only: not a row key (the tables stay as they were).
  summary, keys = compare.summarize_files([REPEATS])
  assert 'gradient_compression' not in keys


def test_rows_split_by_gradient_accumulation_steps(tmp_path):
  # K micro-steps per update make another batch: two rows, never one
  # median; lines from before the key count as 1.
  lines = []
  for steps, ips in ((1, 100.0), (4, 120.0)):
    for n in (1, 2):
      line = report_testing.record('replicated', n, ips * n)
      line.update(gradient_accumulation_steps=steps)
      lines.append(line)
  old = report_testing.record('replicated', 2, 300.0)
  old.pop('gradient_accumulation_steps', None)
  lines.append(old)
  path = report_testing.write_records(tmp_path / 'a.jsonl', lines)
  summary, keys = compare.summarize_files([path])
  assert 'gradient_accumulation_steps' in keys
  by_steps = {
    k: dict(zip(rows['count'], rows['images_per_sec']))
    for k, rows in summary.groupby('gradient_accumulation_steps')
  }
  assert by_steps == {1: {1: 100.0, 2: 250.0}, 4: {1: 120.0, 2: 240.0}}
  summary, keys = compare.summarize_files([REPEATS])
  assert 'gradient_accumulation_steps' not in keys
