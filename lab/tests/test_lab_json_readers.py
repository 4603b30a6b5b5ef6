"""The lab's readers of JSON refuse deep or damaged files in one line."""

import subprocess
import sys

from tests import helpers

DEEP_ARRAY = '[' * 200_000
DEEP_OBJECT = '{"a":' * 100_000


def _run_lab(name, *args):
  return subprocess.run(
    [sys.executable, '-m', 'lab.scripts.' + name, *args],
    cwd=helpers.ROOT,
    env=helpers.quiet_env(),
    capture_output=True,
    text=True,
    timeout=300,
  )


def test_validate_predictor_with_damaged_records_is_one_line(tmp_path):
  prefix = tmp_path / 'v'
  (tmp_path / 'v.jsonl').write_text('{"cell": {}}\n' + DEEP_ARRAY + '\n')
  proc = _run_lab(
    'validate_predictor', '--report_only', '--out_prefix=%s' % prefix
  )
  assert proc.returncode == 2, proc.stderr[-600:]
  assert proc.stderr == (
    'validate_predictor.py: error: %s.jsonl:2: nested deeper than 64 '
    'arrays and objects\n' % prefix
  )


def test_choose_latency_cpu_fraction_refuses_a_bad_measured_file(tmp_path):
  bad = tmp_path / 'cells.json'
  bad.write_text(DEEP_OBJECT)
  proc = _run_lab('choose_latency_cpu_fraction', '--measured=%s' % bad)
  assert proc.returncode == 2, proc.stderr[-600:]
  assert proc.stderr == (
    'choose_latency_cpu_fraction.py: error: --measured %s: nested deeper '
    'than 64 arrays and objects\n' % bad
  )
