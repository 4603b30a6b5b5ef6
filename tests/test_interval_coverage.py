"""scripts/interval_coverage.py: the coverage table from runs' lines, its
flags, and (slow) a real run of the script on the trivial model."""

import json

import pytest

from tests import helpers
from tf_cnn_benchmarks.commands import interval_coverage as cov


def _run(ips, low, high, steps=30, reached=None):
  return {
    'images_per_sec': ips,
    'ci95_low': low,
    'ci95_high': high,
    'steps': steps,
    'wall_seconds': 2.0,
    'target_reached': reached,
  }


def test_each_interval_is_checked_against_the_median_of_the_others():
  runs = [
    _run(100.0, 99.0, 101.0),  # others' median 102.5: missed
    _run(102.0, 95.0, 110.0),  # others 100, 103, 120 -> 103: held
    _run(103.0, 102.0, None),  # unbounded high end; others' median 102: held
    _run(120.0, 119.0, 121.0),  # others' median 102: missed
  ]
  row = cov.summarize('fixed', runs)
  assert [r['covered'] for r in runs] == [False, True, True, False]
  assert [r['others_median'] for r in runs] == [103.0, 103.0, 102.0, 102.0]
  assert row['covered'] == 2 and row['runs'] == 4
  rates = [100.0, 102.0, 103.0, 120.0]
  mean = sum(rates) / 4
  sd = (sum((r - mean) ** 2 for r in rates) / 3) ** 0.5
  assert row['between_run_sd_percent'] == pytest.approx(100 * sd / mean)
  halves = [1 / 100, 7.5 / 102, 1 / 120]  # the unbounded one left out
  assert row['mean_half_width_percent'] == pytest.approx(100 * sum(halves) / 3)
  assert row['target_reached'] is None


def test_auto_rows_count_the_targets_reached():
  runs = [
    _run(10.0, 9.0, 11.0, 80, True),
    _run(10.5, 10.0, 11.0, 200, False),
    _run(9.5, 9.0, 10.0, 60, True),
  ]
  row = cov.summarize('auto', runs)
  assert row['target_reached'] == 2
  assert row['mean_steps'] == pytest.approx(340 / 3)
  lines = cov.table([row])
  assert lines[1].split()[:3] == ['auto', '3', '%d/3' % row['covered']]
  assert lines[1].split()[-1] == '2/3'


def test_mode_flags():
  args = cov.parse_args(['--target_interval=0.01', '--max_run_seconds=50'])
  assert cov.mode_flags(args, 'fixed') == [
    '--num_warmup_batches=10',
    '--num_batches=30',
  ]
  assert cov.mode_flags(args, 'auto') == [
    '--num_warmup_batches=auto',
    '--num_batches=auto',
    '--target_interval=0.01',
    '--max_run_seconds=50',
  ]
  assert args.flags == list(cov.DEFAULT_CONFIG)
  given = cov.parse_args(['--', '--model=resnet20', '--batch_size=8'])
  assert given.flags == ['--model=resnet20', '--batch_size=8']


@pytest.mark.parametrize(
  'args,expected',
  [
    (['--runs=2'], '--runs'),
    (['--target_interval=1'], '--target_interval'),
    (['--modes=fixed,pilot'], '--modes'),
    (['--', '--num_batches=5'], '--num_batches=5: set by this script'),
  ],
)
def test_bad_input_is_one_line_and_exit_2(args, expected):
  proc = helpers.run_script('interval_coverage.py', *args)
  assert proc.returncode == 2
  assert len(proc.stderr.splitlines()) == 1, proc.stderr
  assert expected in proc.stderr


@pytest.mark.slow  # 6 real runs
def test_real_runs_fill_the_table_and_the_json(tmp_path):
  out = tmp_path / 'cov.json'
  proc = helpers.run_script(
    'interval_coverage.py',
    '--runs=3',
    '--fixed_batches=20',
    '--fixed_warmup=2',
    '--target_interval=0.5',
    '--max_run_seconds=30',
    '--json=%s' % out,
    '--',
    *helpers.TRIVIAL_FLAGS[:4],
    timeout=900,
  )
  assert proc.returncode == 0, proc.stderr
  data = json.loads(out.read_text())
  assert [row['mode'] for row in data['rows']] == ['fixed', 'auto']
  assert [len(data['runs'][m]) for m in ('fixed', 'auto')] == [3, 3]
  assert all(r['steps'] == 20 for r in data['runs']['fixed'])
  for row in data['rows']:
    covered = sum(r['covered'] for r in data['runs'][row['mode']])
    assert row['covered'] == covered
