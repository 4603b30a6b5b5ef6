"""lab/scripts/auto_length_sweep.py: the comparison of the two sweeps."""

from lab.scripts import auto_length_sweep as als


def _line(ips, low, high, steps=100, stopped_by=None, reached=None):
  record = {
    'images_per_sec': ips,
    'num_steps': steps,
    'images_per_sec_spread': {'ci95_low': low, 'ci95_high': high},
  }
  if stopped_by:
    record['run_length'] = {
      'stopped_by': stopped_by,
      'interval_reached': reached,
    }
  return record


def test_report_counts_targets_and_the_wall_time_ratio():
  fixed = {'a': _line(100.0, 90.0, 110.0), 'b': _line(50.0, 49.0, 51.0)}
  auto = {
    'a': _line(101.0, 100.0, 102.0, 80, 'target', 0.009),
    'b': _line(49.0, 40.0, 60.0, 300, 'time', 0.2),
  }
  lines = als.report(fixed, auto, 200.0, 90.0, 0.01)
  assert lines[1].split()[:4] == ['a', '100.0', '101.0', '80']
  assert lines[1].split()[-3:] == ['10.00%', '0.90%', 'target']
  assert lines[2].split()[-1] == 'time'
  assert lines[-1].endswith(
    'auto / fixed = 0.45; target reached on 1 of 2 points'
  )
