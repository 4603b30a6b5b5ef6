"""Issue 58, audit 3: hostile, impossible and huge input to the JSON readers.

1. Deeply nested JSON (200,000 `[`, `{"a":` x 100,000), bytes that are not
   UTF-8 and strings with unpaired surrogates are one line and exit 2 in
   compare.py, report.py and plot.py (--skip_bad skips them), in
   predict_scaling.py's profile and calibration, and refused by every other
   reader: TF_CONFIG, --auto_trials_measured, training_done.json.
2. What results/schema.json forbids (schema_version 999 or "x", Infinity,
   num_devices 0 or -3) is refused naming file:line and the key, or
   skipped and counted with --skip_bad; it never reaches a table or a plot.
3. The readers stream: reading a large file costs a few megabytes more than
   reading a small one, not the file's size.

The scripts run as subprocesses (python scripts/NAME.py, from the root);
tests/test_audit3_json_input.py tests the reader module itself.
"""

import json
import pathlib
import random
import sys

import pytest

from tests import helpers
from tf_cnn_benchmarks.cluster import spec as cluster_spec
from tf_cnn_benchmarks.reporting import result_lines
from tf_cnn_benchmarks.scaling.auto import auto_trials
from tf_cnn_benchmarks.scaling.model import cost_model_calibration
from tf_cnn_benchmarks.scaling.model import profile_format

ROOT = pathlib.Path(helpers.ROOT)
# Version-1 lines: replicated 1 device 100 images/sec, 2 devices 170..190.
GOOD = (ROOT / 'tests' / 'fixtures' / 'scaling.jsonl').read_text().splitlines()
DEEP_ARRAY = '[' * 200000
DEEP_OBJECT = '{"a":' * 100000
READERS = ('compare.py', 'report.py', 'plot.py')


def _line(**changes) -> str:
  record = json.loads(GOOD[0])
  record.update(changes)
  return json.dumps(record)


def _rate_written_as(literal: str) -> str:
  """A good line whose images_per_sec is the JSON text `literal`."""
  text = _line(images_per_sec='@')
  return text.replace('"images_per_sec": "@"', '"images_per_sec": ' + literal)


# Bad line (the file's line 4, after three good ones) -> what the error names.
BAD_LINES = {
  'deep_array': (DEEP_ARRAY, 'nested deeper than 64'),
  'deep_object': (DEEP_OBJECT, 'nested deeper than 64'),
  'not_utf8': (b'{"model": "\xff\xfe"}', 'not UTF-8 text'),
  'surrogate': (_line(model='\ud800x'), 'unpaired UTF-16 surrogate'),
  'version_999': (_line(schema_version=999), 'schema_version: 999'),
  'version_x': (_line(schema_version='x'), "schema_version: 'x'"),
  'infinity': (_rate_written_as('Infinity'), 'images_per_sec: Infinity'),
  'huge_number': (_rate_written_as('1e999'), 'number 1e999 is too large'),
  'devices_0': (_line(num_devices=0), 'num_devices: 0 is below'),
  'devices_minus_3': (_line(num_devices=-3), 'num_devices: -3 is below'),
  'negative_rate': (_line(images_per_sec=-5.0), 'images_per_sec: -5.0'),
}


def _raw(line) -> bytes:
  """A line's bytes (a str's lone surrogates written as they are)."""
  return (
    line if isinstance(line, bytes) else line.encode('utf-8', 'surrogatepass')
  )


def _results_file(path, bad) -> str:
  """Three good version-1 lines, then `bad` (str or bytes) as line 4."""
  lines = [_raw(g) for g in GOOD[:3]] + [_raw(bad)]
  path.write_bytes(b'\n'.join(lines) + b'\n')
  return str(path)


def _reader_argv(script, tmp_path, *files):
  out = {'report.py': ['--out', str(tmp_path / 'r.html')]}
  out['plot.py'] = ['--out', str(tmp_path / 'p.png')]
  return [script, *files, *out.get(script, [])]


@pytest.mark.parametrize('case', sorted(BAD_LINES))
@pytest.mark.parametrize('script', READERS)
def test_a_bad_line_is_one_line_naming_file_line_and_key(
  tmp_path, script, case
):
  bad, said = BAD_LINES[case]
  path = _results_file(tmp_path / 'r.jsonl', bad)
  proc = helpers.run_script(*_reader_argv(script, tmp_path, path))
  assert proc.returncode == 2, proc.stderr[-600:]
  assert proc.stderr.count('\n') == 1, proc.stderr[-600:]
  assert proc.stderr.startswith('%s: error: %s:4: ' % (script, path))
  assert said in proc.stderr
  assert '--skip_bad' in proc.stderr
  assert not (tmp_path / 'r.html').exists()
  assert not (tmp_path / 'p.png').exists()


@pytest.mark.parametrize('script', READERS)
def test_skip_bad_skips_every_bad_line_and_counts_them(tmp_path, script):
  path = tmp_path / 'r.jsonl'
  lines = [_raw(g) for g in GOOD[:3]]
  lines += [_raw(BAD_LINES[name][0]) for name in sorted(BAD_LINES)]
  path.write_bytes(b'\n'.join(lines) + b'\n')
  argv = _reader_argv(script, tmp_path, str(path), '--skip_bad')
  proc = helpers.run_script(*argv)
  assert proc.returncode == 0, proc.stderr[-800:]
  assert 'Traceback' not in proc.stderr and 'Warning' not in proc.stderr
  warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith('warning')]
  assert len(warnings) == 11  # ten named, then the count
  assert warnings[0].startswith('warning: %s:4: skipped: ' % path)
  assert warnings[-1] == (
    'warning: %s: %d bad lines skipped (the first 10 named above)'
    % (path, len(BAD_LINES))
  )
  if script == 'compare.py':
    # Only the good lines are tabulated: counts 1 and 2, one run at 1.
    header = [ln for ln in proc.stdout.splitlines() if ln.startswith('model')]
    assert header[0].split()[-2:] == ['1', '2']
    runs = [ln for ln in proc.stdout.splitlines() if 'runs' in ln.split()]
    assert runs[0].split()[-2:] == ['1', '2']


def test_a_version_1_file_still_reads(tmp_path):
  path = tmp_path / 'r.jsonl'
  path.write_text('\n'.join(GOOD) + '\n')
  proc = helpers.run_script('compare.py', str(path), '--csv')
  assert proc.returncode == 0, proc.stderr
  assert 'replicated' in proc.stdout


# ---- predict_scaling.py: profiles and calibrations ------------------------


@pytest.mark.parametrize(
  'content, said',
  [
    (DEEP_OBJECT.encode(), 'nested deeper than 64'),
    (DEEP_ARRAY.encode(), 'nested deeper than 64'),
    (
      bytes(random.Random(58).randrange(128, 256) for _ in range(4096)),
      'not UTF-8',
    ),
    (b'{"version": NaN}', 'NaN is not allowed'),
  ],
  ids=['deep_object', 'deep_array', 'random_bytes', 'nan'],
)
@pytest.mark.parametrize('flag', ['--profile', '--calibration'])
def test_predict_scaling_refuses_a_bad_json_file_in_one_line(
  tmp_path, flag, content, said
):
  bad = tmp_path / 'bad.json'
  bad.write_bytes(content)
  argv = ['--num_workers=2', '%s=%s' % (flag, bad)]
  if flag == '--calibration':
    argv.append('--profile=%s' % helpers.AUTO_PROFILE)
  proc = helpers.run_script('predict_scaling.py', *argv)
  assert proc.returncode == 2, proc.stderr[-600:]
  assert proc.stderr.count('\n') == 1
  assert proc.stderr.startswith('predict_scaling.py: error: %s: ' % bad)
  assert said in proc.stderr


def test_load_profile_and_calibration_raise_their_own_one_line_errors(
  tmp_path,
):
  deep = tmp_path / 'deep.json'
  deep.write_text(DEEP_OBJECT)
  with pytest.raises(profile_format.ProfileError, match='nested deeper'):
    profile_format.load_profile(str(deep))
  with pytest.raises(cost_model_calibration.CalibrationError, match='nested'):
    cost_model_calibration.load_calibration(str(deep))


# ---- TF_CONFIG, --auto_trials_measured, training_done.json ----------------


@pytest.mark.parametrize(
  'text, said',
  [
    (DEEP_ARRAY[:100000], 'nested deeper than 64'),
    (
      '{"cluster": {"worker": ["a:1"]}, '
      '"task": {"type": "worker", "index": NaN}}',
      'NaN',
    ),
    (
      '{"cluster": {"worker": ["\udcff:1"]}, "task": {"type": "worker"}}',
      'UTF-8',
    ),
  ],
  ids=['deep', 'nan', 'undecodable'],
)
def test_tf_config_that_is_not_strict_bounded_json_is_one_line(text, said):
  with pytest.raises(cluster_spec.ClusterError) as info:
    cluster_spec.from_tf_config(text)
  assert str(info.value).startswith('TF_CONFIG: must be JSON')
  assert said in str(info.value) and '\n' not in str(info.value)
  assert not cluster_spec.is_evaluator(None, {'TF_CONFIG': text})


def test_a_deep_tf_config_stops_the_driver_in_one_line():
  env = helpers.task_env()
  env['TF_CONFIG'] = DEEP_ARRAY[:100000]
  proc = helpers.run_benchmark(*helpers.TRIVIAL_FLAGS, env=env)
  assert proc.returncode == 2, proc.stderr[-600:]
  lines = [ln for ln in proc.stderr.splitlines() if ln.startswith('error')]
  assert lines == [
    'error: TF_CONFIG: must be JSON {"cluster": {"worker": [...], "ps": '
    '[...]}, "task": {"type": ..., "index": ...}} (nested deeper than 64 '
    'arrays and objects)'
  ]
  assert 'Traceback' not in proc.stderr


@pytest.mark.parametrize(
  'text, said',
  [
    (DEEP_ARRAY[:100000], 'nested deeper than 64'),
    (
      '[{"variable_update": "replicated", "all_reduce_spec": null, '
      '"num_ps": 0, "controller": false, "predicted_images_per_sec": 1, '
      '"measured_images_per_sec": Infinity}]',
      'Infinity is not allowed',
    ),
  ],
  ids=['deep', 'infinity'],
)
def test_auto_trials_measured_that_is_not_strict_bounded_json(text, said):
  with pytest.raises(auto_trials.TrialsError) as info:
    auto_trials.decode(text)
  assert str(info.value).startswith('--auto_trials_measured: not JSON (')
  assert said in str(info.value)


@pytest.mark.parametrize(
  'content',
  [
    DEEP_OBJECT.encode(),
    b'{"final_step": 1e999, "run_id": "x"}',
    b'{"final_step": 3, "run_id": "\xff"}',
    b'{"final_step": 3, "run_id": "x", "pad": "' + b'x' * 100000 + b'"}',
  ],
  ids=['deep', 'huge_number', 'not_utf8', 'too_large'],
)
def test_a_damaged_training_done_mark_is_refused_naming_it(tmp_path, content):
  # TensorFlow: the evaluator's module builds graphs.
  from tf_cnn_benchmarks.evaluation import evaluator_task
  from tf_cnn_benchmarks.training import checkpoints

  path = tmp_path / evaluator_task.DONE_FILE
  path.write_bytes(content)
  with pytest.raises(checkpoints.CheckpointError) as info:
    evaluator_task.read_done(str(tmp_path))
  assert str(info.value).startswith('%s: not valid JSON (' % path)
  assert '\n' not in str(info.value)
  path.write_text('{"final_step": 3, "run_id": "x"}')
  assert evaluator_task.read_done(str(tmp_path))['final_step'] == 3


# ---- results lines read by other code ---------------------------------------


def test_read_json_lines_refuses_non_finite_numbers_by_key(tmp_path):
  path = tmp_path / 'r.jsonl'
  path.write_text('{"a": 1}\n{"losses": [1.0, NaN]}\n')
  with pytest.raises(result_lines.ResultsFileError) as info:
    result_lines.read_json_lines(str(path))
  assert str(info.value) == (
    '%s:2: losses: NaN is not allowed (strict JSON: numbers must be finite)'
    % path
  )


# ---- size: the readers stream ----------------------------------------------


def _fat_lines(path, count, steps):
  """`count` valid lines, each with `steps` losses and step times."""
  rng = random.Random(3)
  with open(path, 'w') as f:
    for i in range(count):
      record = json.loads(GOOD[i % 3])
      record['losses'] = [rng.random() for _ in range(steps)]
      record['step_times_ms'] = [rng.random() for _ in range(steps)]
      f.write(json.dumps(record) + '\n')


# Runs argv[1:] and prints its exit status and peak RSS (KiB). A child of
# this small process: a child forked from pytest (TensorFlow loaded) would
# report pytest's peak, which Linux carries over the exec.
_MEASURE = (
  'import os, subprocess, sys; '
  'p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL); '
  '_, status, usage = os.wait4(p.pid, 0); '
  'print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)'
)


def _peak_rss_mib(*argv) -> float:
  """Peak resident memory (MiB) of `python ARGV` from the root."""
  proc = helpers.run_python(['-c', _MEASURE, sys.executable, *argv])
  status, peak_kib = proc.stdout.split()
  assert status == '0', proc.stderr[-600:]
  return int(peak_kib) / 1024.0


def test_compare_streams_a_large_file(tmp_path):
  """60 MB of lines cost compare.py under 40 MiB more than 3 lines (2 MiB
  here; the whole file held, split and parsed cost 230 MiB more)."""
  small, large = tmp_path / 'small.jsonl', tmp_path / 'large.jsonl'
  _fat_lines(small, 3, 10)
  _fat_lines(large, 300, 5000)
  assert large.stat().st_size > 50e6
  base = _peak_rss_mib('scripts/compare.py', str(small))
  peak = _peak_rss_mib('scripts/compare.py', str(large))
  assert peak - base < 40, (base, peak)


def test_bench_readers_runs_every_reader(tmp_path):
  path = tmp_path / 'bench.jsonl'
  proc = helpers.run_script(
    'bench_readers.py', '--lines=400', '--file=%s' % path, timeout=300
  )
  assert proc.returncode == 0, proc.stderr[-600:]
  rows = {ln.split()[0]: ln.split() for ln in proc.stdout.splitlines()[2:]}
  assert sorted(rows) == ['compare', 'plot', 'report']
  assert [rows[name][1] for name in sorted(rows)] == ['0', '0', '0']
  assert sum(1 for _ in open(path)) == 400
