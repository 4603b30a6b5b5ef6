"""Tests of scripts/sweep.py, run against tests/fixtures/fake_benchmark.py.

No TensorFlow: every point runs `python -m fake_benchmark`, which the tests
steer through FAKE_BENCH_* environment variables (see that module).
"""

import io
import json
import os
from pathlib import Path
import re

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / 'tests' / 'fixtures'

from tests import helpers  # noqa: E402
from tf_cnn_benchmarks.commands import sweep  # noqa: E402
from tf_cnn_benchmarks.reporting import result_lines  # noqa: E402

GRID_2X2 = [
  '--axis',
  'num_gpus=1,2',
  '--axis',
  'variable_update=parameter_server,replicated',
  '--fixed',
  'model=trivial',
]
POINT_IDS = [
  'num_gpus=1,variable_update=parameter_server',
  'num_gpus=1,variable_update=replicated',
  'num_gpus=2,variable_update=parameter_server',
  'num_gpus=2,variable_update=replicated',
]
PROGRESS_RE = re.compile(
  r'^\[(\d)/4\] (\S+) \.\.\. (ok|error) \d+\.\ds '
  r'\(elapsed \d+s(, ~\d+s left)?\)'
)


def run_sweep(tmp_path, *args, env=None, name='demo'):
  """Run sweep.py with the fake benchmark; returns the CompletedProcess."""
  child_env = {
    k: v for k, v in os.environ.items() if not k.startswith('FAKE_BENCH_')
  }
  child_env['PYTHONPATH'] = str(FIXTURES)
  child_env['FAKE_BENCH_COUNTER'] = str(tmp_path / 'counter.txt')
  child_env.update(env or {})
  command = [
    '--name',
    name,
    '--results_dir',
    str(tmp_path / 'results'),
    '--module',
    'fake_benchmark',
  ] + list(args)
  return helpers.run_script('sweep.py', *command, env=child_env)


def read_results(tmp_path, name='demo'):
  """The sweep's results lines as dicts."""
  path = tmp_path / 'results' / (name + '.jsonl')
  if not path.exists():
    return []
  return [json.loads(line) for line in path.read_text().splitlines()]


def invocations(tmp_path):
  """How often the fake ran each point, by (num_gpus, variable_update)."""
  path = tmp_path / 'counter.txt'
  counts = {}
  if path.exists():
    for line in path.read_text().splitlines():
      flags = dict(arg[2:].split('=', 1) for arg in line.split())
      key = (flags['num_gpus'], flags['variable_update'])
      counts[key] = counts.get(key, 0) + 1
  return counts


def test_two_by_two_sweep_writes_four_tagged_lines(tmp_path):
  result = run_sweep(tmp_path, *GRID_2X2)
  assert result.returncode == 0, result.stderr
  records = read_results(tmp_path)
  assert [r['sweep']['point_id'] for r in records] == POINT_IDS
  assert all(r['status'] == 'ok' for r in records)
  assert records[3]['sweep'] == {
    'name': 'demo',
    'point_id': POINT_IDS[3],
    'point': {'num_gpus': '2', 'variable_update': 'replicated'},
    'repeat': 0,  # issue 28: every line names its repeat
    'log': 'demo/logs/%s.log' % POINT_IDS[3],
  }
  # fake: 1000 * devices * (0.75 or 0.9 per doubling)
  assert [r['images_per_sec'] for r in records] == [
    1000.0,
    1000.0,
    1500.0,
    1800.0,
  ]
  logs = tmp_path / 'results' / 'demo' / 'logs'
  assert sorted(p.stem for p in logs.iterdir()) == POINT_IDS
  assert 'images/sec: 1800.0' in (logs / (POINT_IDS[3] + '.log')).read_text()
  lines = result.stdout.splitlines()
  assert [PROGRESS_RE.match(line).group(1, 2, 3) for line in lines[:4]] == [
    (str(k), pid, 'ok') for k, pid in enumerate(POINT_IDS, start=1)
  ]
  assert lines[4].startswith('demo: 4 points, 4 ok, 0 failed')


def test_killed_sweep_resumes_without_repeating_points(tmp_path):
  # The fake SIGKILLs the sweep while point 2 runs: point 1 is recorded,
  # point 2 is lost, as if the sweep had been killed there.
  killed = run_sweep(
    tmp_path,
    *GRID_2X2,
    env={'FAKE_BENCH_KILL_SWEEP': 'num_gpus=1,variable_update=replicated'},
  )
  assert killed.returncode == -9
  assert [r['sweep']['point_id'] for r in read_results(tmp_path)] == POINT_IDS[
    :1
  ]

  resumed = run_sweep(tmp_path, *GRID_2X2)
  assert resumed.returncode == 0, resumed.stderr
  assert resumed.stdout.splitlines()[0].startswith(
    '[1/4] %s ... skipped (ok in' % POINT_IDS[0]
  )
  records = read_results(tmp_path)
  assert sorted(r['sweep']['point_id'] for r in records) == POINT_IDS
  assert invocations(tmp_path) == {
    ('1', 'parameter_server'): 1,
    ('1', 'replicated'): 2,
    ('2', 'parameter_server'): 1,
    ('2', 'replicated'): 1,
  }


def test_failure_and_timeout_are_recorded_and_sweep_goes_on(tmp_path):
  result = run_sweep(
    tmp_path,
    '--timeout',
    '1',
    *GRID_2X2,
    env={
      'FAKE_BENCH_FAIL': 'num_gpus=1,variable_update=parameter_server',
      'FAKE_BENCH_HANG': 'num_gpus=2,variable_update=parameter_server',
    },
  )
  assert result.returncode == 1
  by_id = {r['sweep']['point_id']: r for r in read_results(tmp_path)}
  assert sorted(by_id) == POINT_IDS
  failed, hung = by_id[POINT_IDS[0]], by_id[POINT_IDS[2]]
  assert failed['status'] == 'error'
  assert failed['error'] == 'RuntimeError: injected failure'
  assert failed['returncode'] == 1
  assert failed['params'] == {
    'model': 'trivial',
    'num_gpus': '1',
    'variable_update': 'parameter_server',
  }
  assert hung['status'] == 'error'
  assert hung['error'] == 'timeout after 1s'
  assert hung['returncode'] is None
  assert hung['sweep']['point'] == {
    'num_gpus': '2',
    'variable_update': 'parameter_server',
  }
  assert by_id[POINT_IDS[1]]['status'] == by_id[POINT_IDS[3]]['status'] == 'ok'
  assert ' ... error ' in result.stdout.splitlines()[0]
  assert 'timeout after 1s' in result.stdout.splitlines()[2]
  # The hung process was killed, not left behind.
  log = (
    tmp_path / 'results' / 'demo' / 'logs' / (POINT_IDS[2] + '.log')
  ).read_text()
  pid = int(re.search(r'pid=(\d+)', log).group(1))
  with pytest.raises(ProcessLookupError):
    os.kill(pid, 0)

  # Failed points are not re-run by default...
  again = run_sweep(tmp_path, *GRID_2X2)
  assert again.returncode == 1
  assert 'skipped (failed before; --retry_failed re-runs it)' in again.stdout
  assert sum(invocations(tmp_path).values()) == 4
  # ...but are with --retry_failed, and then count as ok.
  retried = run_sweep(tmp_path, '--retry_failed', *GRID_2X2)
  assert retried.returncode == 0, retried.stdout
  assert sum(invocations(tmp_path).values()) == 6
  assert len(read_results(tmp_path)) == 6


def test_dry_run_prints_points_and_launcher_commands(tmp_path):
  result = run_sweep(
    tmp_path,
    '--dry_run',
    '--axis',
    'num_workers=1,2',
    '--fixed',
    'model=trivial',
    '--fixed',
    'num_gpus=1',
  )
  assert result.returncode == 0, result.stderr
  lines = result.stdout.splitlines()
  assert len(lines) == 2
  assert lines[1].startswith('[2/2] num_workers=2: ')
  assert (
    'scripts/launch_local_cluster.py --num_workers=2 -- '
    '--model=trivial --num_gpus=1 --result_file='
  ) in lines[1]
  assert not (tmp_path / 'results').exists()
  assert not (tmp_path / 'counter.txt').exists()


def test_grid_file_format(tmp_path):
  grid = tmp_path / 'grid.txt'
  grid.write_text(
    '# scaling sweep\n'
    'axis variable_update = parameter_server, replicated\n'
    '\n'
    'axis num_gpus = 1,2   # devices\n'
    'fixed model = trivial\n'
    'fixed piecewise = 0.1,0.01\n'
  )
  parsed = sweep.parse_grid_file(str(grid))
  assert parsed.axes == [
    ('variable_update', ['parameter_server', 'replicated']),
    ('num_gpus', ['1', '2']),
  ]
  assert parsed.fixed == [('model', 'trivial'), ('piecewise', '0.1,0.01')]
  points = sweep.make_points(parsed)
  # First axis varies slowest; ids sort axes by name whatever the file order.
  assert [p.point_id for p in points] == [
    POINT_IDS[0],
    POINT_IDS[2],
    POINT_IDS[1],
    POINT_IDS[3],
  ]
  command = sweep.build_command(points[0], 'fake_benchmark', 'launcher', 'R')
  assert command[1:] == [
    '-m',
    'fake_benchmark',
    '--model=trivial',
    '--piecewise=0.1,0.01',
    '--variable_update=parameter_server',
    '--num_gpus=1',
    '--result_file=R',
  ]


@pytest.mark.parametrize(
  'grid_text, args, expected',
  [
    ('axis num_gpus = 1,2\nnum_gpus 4\n', [], 'grid.txt:2: expected'),
    ('axis num_gpus = 1,,2\n', [], 'grid.txt:1: axis num_gpus has an empty'),
    (
      'axis num_gpus = 1,2\n',
      ['--fixed', 'num_gpus=4'],
      '--fixed num_gpus: num_gpus is already defined at',
    ),
    (
      'axis num_gpus = 1,2\n',
      ['--axis', 'num_workers=0,2'],
      'num_workers must be a positive integer',
    ),
    (
      'axis num_gpus = 1,2\n',
      ['--fixed', 'result_file=x'],
      'result_file is set by the sweep itself',
    ),
    ('fixed model = trivial\n', [], 'no axes'),
    ('axis num_gpus = 1,2\n', ['--timeout=-1'], 'argument --timeout'),
    ('axis num_gpus = 1,2\n', ['--axis', 'model'], '--axis model: expected'),
  ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, grid_text, args, expected):
  grid = tmp_path / 'grid.txt'
  grid.write_text(grid_text)
  result = run_sweep(tmp_path, '--grid', str(grid), *args)
  assert result.returncode == 2
  assert len(result.stderr.splitlines()) == 1, result.stderr
  assert expected in result.stderr
  assert not (tmp_path / 'counter.txt').exists()


def test_missing_grid_file(tmp_path):
  result = run_sweep(tmp_path, '--grid', str(tmp_path / 'nope.txt'))
  assert result.returncode == 2
  assert result.stderr.startswith('sweep.py: error: --grid: cannot read ')
  assert 'nope.txt' in result.stderr and 'Traceback' not in result.stderr


def test_malformed_existing_results_stop_the_resume(tmp_path):
  (tmp_path / 'results').mkdir()
  (tmp_path / 'results' / 'demo.jsonl').write_text('{"status": "ok"}\n{oops\n')
  result = run_sweep(tmp_path, *GRID_2X2)
  assert result.returncode == 2
  assert 'demo.jsonl:2: not valid JSON' in result.stderr


def test_append_is_one_line_even_after_a_torn_line(tmp_path):
  path = tmp_path / 'r.jsonl'
  path.write_text('{"torn": ')
  result_lines.append_json_line(str(path), {'a': 1})
  result_lines.append_json_line(str(path), {'b': 2})
  assert path.read_text() == '{"torn": \n{"a": 1}\n{"b": 2}\n'


def test_durations_format():
  assert sweep.format_duration(12.4) == '12s'
  assert sweep.format_duration(62) == '1m02s'
  assert sweep.format_duration(3725) == '1h02m'
  assert sweep.format_eta(170) == '~3m'
  assert sweep.log_stem('data_dir=/a b') == 'data_dir=_a_b'
  assert len(sweep.log_stem('x=' + 'y' * 400)) == sweep.MAX_LOG_STEM


def test_error_line_prefers_the_specific_exception(tmp_path):
  log = tmp_path / 'point.log'
  log.write_text(
    '$ python -m x\n'
    'Traceback (most recent call last):\n'
    '  File "a.py", line 1, in f\n'
    'errors_impl.InvalidArgumentError: Cannot colocate nodes\n'
    '\n'
    'errors_impl.InvalidArgumentError: Graph execution error:\n'
    '    File "b.py", line 2, in g\n'
  )
  assert (
    sweep.log_error_line(str(log))
    == 'errors_impl.InvalidArgumentError: Cannot colocate nodes'
  )
  log.write_text('$ python -m x\nsome output\nKilled\n\n')
  assert sweep.log_error_line(str(log)) == 'Killed'
  log.write_text('$ python -m x\n')
  assert sweep.log_error_line(str(log)) is None


def _dry_run(tmp_path, grid):
  return helpers.run_script(
    'sweep.py',
    '--name=c',
    '--grid=%s' % grid,
    '--results_dir=%s' % tmp_path,
    '--dry_run',
    timeout=60,
  )


def test_compound_axis_sets_flags_together(tmp_path):
  grid = tmp_path / 'g.grid'
  grid.write_text(
    'axis variable_update+all_reduce_spec = '
    'parameter_server+, replicated+xring\n'
    'axis num_gpus = 1, 2\n'
  )
  proc = _dry_run(tmp_path, grid)
  assert proc.returncode == 0, proc.stderr
  out = proc.stdout
  assert '--variable_update=parameter_server' in out
  assert '--all_reduce_spec=xring' in out
  assert out.count('--all_reduce_spec=') == 2  # only the replicated points
  bad = tmp_path / 'bad.grid'
  bad.write_text('axis variable_update+all_reduce_spec = replicated\n')
  proc = _dry_run(tmp_path, bad)
  assert proc.returncode == 2 and 'needs 2 parts' in proc.stderr


@pytest.mark.slow  # default-suite budget (20 min); runs with -m slow
def test_real_benchmark_sweep_then_compare(tmp_path):
  """sweep.py drives the real benchmark; compare.py reads what it wrote."""
  common = [
    '--name=real',
    '--results_dir=%s' % tmp_path,
    '--timeout=240',
    *GRID_2X2,
    '--fixed',
    'data_name=cifar10',
    '--fixed',
    'device=cpu',
    '--fixed',
    'batch_size=8',
    '--fixed',
    'num_batches=2',
    '--fixed',
    'num_warmup_batches=1',
  ]
  proc = helpers.run_script('sweep.py', *common, timeout=900)
  assert proc.returncode == 0, proc.stdout + proc.stderr
  lines = [
    json.loads(line)
    for line in (tmp_path / 'real.jsonl').read_text().splitlines()
  ]
  assert len(lines) == 4 and all(line['status'] == 'ok' for line in lines)
  assert sorted(
    (line['num_devices'], line['variable_update']) for line in lines
  ) == [
    (1, 'parameter_server'),
    (1, 'replicated'),
    (2, 'parameter_server'),
    (2, 'replicated'),
  ]
  table = helpers.run_script(
    'compare.py', str(tmp_path / 'real.jsonl'), '--csv'
  )
  assert table.returncode == 0, table.stderr
  assert 'replicated' in table.stdout and 'efficiency' in table.stdout


# ---- issue 28: repeats and live progress -------------------------------------


def _runs(records):
  return [(r['sweep']['point_id'], r['sweep']['repeat']) for r in records]


def test_repeats_run_interleaved_all_points_then_again(tmp_path):
  result = run_sweep(tmp_path, '--repeats', '2', *GRID_2X2)
  assert result.returncode == 0, result.stderr
  assert _runs(read_results(tmp_path)) == [(p, 0) for p in POINT_IDS] + [
    (p, 1) for p in POINT_IDS
  ]
  lines = result.stdout.splitlines()
  assert lines[0].startswith('[1/8] %s repeat=0 ... ok ' % POINT_IDS[0])
  assert lines[4].startswith('[5/8] %s repeat=1 ... ok ' % POINT_IDS[0])
  assert lines[8].startswith(
    'demo: 4 points x 2 repeats = 8 runs, 8 ok, 0 failed (8 run now'
  )
  logs = tmp_path / 'results' / 'demo' / 'logs'
  assert (logs / (POINT_IDS[0] + '.log')).exists()
  assert (logs / (POINT_IDS[0] + '.r1.log')).exists()
  assert read_results(tmp_path)[4]['sweep']['log'] == (
    'demo/logs/%s.r1.log' % POINT_IDS[0]
  )


def test_rerun_tops_up_missing_repeats(tmp_path):
  first = run_sweep(tmp_path, *GRID_2X2)  # one repeat of every point
  assert first.returncode == 0, first.stderr
  # Repeat 1 of one point fails; the others get their repeats 1 and 2.
  broken = 'num_gpus=2,variable_update=replicated'
  topped = run_sweep(
    tmp_path, '--repeats', '3', *GRID_2X2, env={'FAKE_BENCH_FAIL': broken}
  )
  assert topped.returncode == 1
  new = read_results(tmp_path)[4:]
  assert _runs(new) == [(p, 1) for p in POINT_IDS] + [(p, 2) for p in POINT_IDS]
  assert [r['status'] for r in new].count('error') == 2
  assert topped.stdout.splitlines()[0] == (
    '[1/12] %s repeat=0 ... skipped (ok in %s)'
    % (POINT_IDS[0], os.path.join(str(tmp_path / 'results'), 'demo.jsonl'))
  )
  assert invocations(tmp_path)[('1', 'replicated')] == 3
  # Failed repeats wait for --retry_failed, then run once each.
  again = run_sweep(tmp_path, '--repeats', '3', *GRID_2X2)
  assert again.returncode == 1 and sum(invocations(tmp_path).values()) == 12
  retried = run_sweep(tmp_path, '--repeats', '3', '--retry_failed', *GRID_2X2)
  assert retried.returncode == 0, retried.stdout
  assert invocations(tmp_path)[('2', 'replicated')] == 5
  ok = [r for r in read_results(tmp_path) if r['status'] == 'ok']
  assert sorted(_runs(ok)) == sorted(
    (p, k) for p in POINT_IDS for k in range(3)
  )
  # Enough repeats: nothing runs.
  done = run_sweep(tmp_path, '--repeats', '2', *GRID_2X2)
  assert done.returncode == 0 and sum(invocations(tmp_path).values()) == 14
  assert done.stdout.splitlines()[-1].startswith(
    'demo: 4 points x 2 repeats = 8 runs, 8 ok, 0 failed (0 run now, 8 skipped)'
  )


def test_plan_counts_done_repeats_and_fills_the_missing_indices():
  grid = sweep.build_grid(
    sweep.parse_args(['--name=x', '--axis', 'num_gpus=1,2'])
  )
  one, two = sweep.make_points(grid)
  runs = sweep.plan_runs([one, two], 3, {one.point_id: {0, 2}})
  assert [(r.point.point_id, r.repeat, r.done) for r in runs] == [
    ('num_gpus=1', 0, True),
    ('num_gpus=2', 0, False),
    ('num_gpus=1', 2, True),
    ('num_gpus=2', 1, False),
    ('num_gpus=1', 1, False),
    ('num_gpus=2', 2, False),
  ]
  # More done than asked for: none runs, none is counted twice.
  extra = sweep.plan_runs([one], 1, {one.point_id: {0, 1}})
  assert [(r.repeat, r.done) for r in extra] == [(0, True)]


def test_old_lines_without_repeat_count_as_repeat_zero(tmp_path):
  path = tmp_path / 'old.jsonl'
  path.write_text(
    json.dumps({'status': 'ok', 'sweep': {'point_id': 'a=1'}})
    + '\n'
    + json.dumps({'status': 'error', 'sweep': {'point_id': 'a=2'}})
    + '\n'
  )
  ok, failed = sweep.load_previous(str(path))
  assert ok == {'a=1': {0}} and failed == {'a=1': set(), 'a=2': {0}}


@pytest.mark.parametrize('bad', ['0', '-1', 'two'])
def test_bad_repeats_is_one_line(tmp_path, bad):
  result = run_sweep(tmp_path, '--repeats', bad, *GRID_2X2)
  assert result.returncode == 2
  assert len(result.stderr.splitlines()) == 1
  assert 'argument --repeats' in result.stderr


def test_running_point_shows_plain_progress_lines_when_not_a_terminal(
  tmp_path,
):
  result = run_sweep(
    tmp_path,
    '--progress_every',
    '0.2',
    '--axis',
    'num_gpus=1',
    '--fixed',
    'num_batches=4',
    env={'FAKE_BENCH_STEPS': '4', 'FAKE_BENCH_STEP_SECONDS': '0.5'},
  )
  assert result.returncode == 0, result.stderr
  lines = result.stdout.splitlines()
  running = [ln for ln in lines if ' ... running ' in ln]
  assert running, result.stdout
  pattern = re.compile(
    r'^\[1/1\] num_gpus=1 \.\.\. running \d+s, (no step yet|step [0-4]/4)$'
  )
  assert all(pattern.match(ln) for ln in running), running
  assert lines.index(running[-1]) < next(
    i for i, ln in enumerate(lines) if ' ... ok ' in ln
  )


def test_log_steps_follow_the_table_rows_as_the_log_grows(tmp_path):
  from tf_cnn_benchmarks.commands import sweep_progress  # pylint: disable=g-import-not-at-top

  log = tmp_path / 'p.log'
  log.write_text('$ cmd\nStep\tImg/sec\ttotal_loss\n[worker:0] 1\timages')
  steps = sweep_progress.LogSteps(str(log))
  assert steps.read() is None  # the row is not finished yet
  with open(log, 'a') as f:
    f.write('/sec: 5.0\t2.0\n[worker:0] 10\timages/sec: 5.0\t2.0\nDone\n')
  assert steps.read() == 10
  assert steps.read() == 10  # nothing new


class _FakeTerminal(io.StringIO):
  def isatty(self):
    return True


def test_on_a_terminal_the_running_point_is_a_tqdm_bar(tmp_path, monkeypatch):
  from tf_cnn_benchmarks.commands import sweep_progress  # pylint: disable=g-import-not-at-top

  monkeypatch.delenv('TERM', raising=False)
  log = tmp_path / 'p.log'
  log.write_text('1\timages/sec: 5.0\t2.0\n2\timages/sec: 5.0\t2.0\n')
  point = sweep.make_points(
    sweep.build_grid(
      sweep.parse_args(
        ['--name=x', '--axis', 'num_gpus=1', '--fixed', 'num_batches=3']
      )
    )
  )[0]
  screen = _FakeTerminal()
  shown = sweep_progress.PointProgress(
    '[1/1] num_gpus=1', point, str(log), 30.0, stream=screen
  )
  shown.tick(1.0)
  assert shown.bar is not None and shown.bar.n == 2 and shown.bar.total == 3
  shown.close()
  assert '[1/1] num_gpus=1' in screen.getvalue()
  assert '2/3' in screen.getvalue()


# ---- issue 57: automatic run lengths pass through ---------------------------


def test_auto_length_flags_pass_through_to_every_point(tmp_path):
  result = run_sweep(
    tmp_path,
    '--dry_run',
    '--axis',
    'model=trivial,resnet20',
    '--fixed',
    'num_batches=auto',
    '--fixed',
    'target_interval=0.01',
  )
  assert result.returncode == 0, result.stderr
  lines = result.stdout.splitlines()
  assert len(lines) == 2
  for line in lines:
    assert ' --num_batches=auto --target_interval=0.01 ' in line


@pytest.mark.parametrize('flag', ['num_batches', 'num_warmup_batches'])
def test_auto_length_with_num_workers_is_one_line_and_exit_2(tmp_path, flag):
  result = run_sweep(
    tmp_path,
    '--axis',
    'num_workers=1,2',
    '--fixed',
    '%s=auto' % flag,
  )
  assert result.returncode == 2
  assert len(result.stderr.splitlines()) == 1, result.stderr
  assert '%s=auto is not allowed with num_workers' % flag in result.stderr
  assert not (tmp_path / 'counter.txt').exists()


def test_auto_length_line_counts_the_targets_reached():
  import collections  # pylint: disable=g-import-not-at-top

  stops = collections.Counter(target=7, time=1)
  assert sweep.auto_length_line(stops) == (
    '--num_batches=auto: 7 of 8 runs reached --target_interval '
    '(1 stopped by time)'
  )
  assert sweep.auto_length_line(collections.Counter()) is None


@pytest.mark.slow  # a real benchmark point
def test_real_sweep_with_auto_length_says_if_the_target_was_reached(tmp_path):
  proc = helpers.run_script(
    'sweep.py',
    '--name=auto',
    '--results_dir=%s' % tmp_path,
    '--timeout=240',
    '--axis',
    'model=trivial',
    '--fixed',
    'data_name=cifar10',
    '--fixed',
    'device=cpu',
    '--fixed',
    'batch_size=4',
    '--fixed',
    'num_batches=auto',
    '--fixed',
    'target_interval=0.5',
    '--fixed',
    'max_run_seconds=60',
    timeout=600,
  )
  assert proc.returncode == 0, proc.stdout + proc.stderr
  (line,) = [
    json.loads(text)
    for text in (tmp_path / 'auto.jsonl').read_text().splitlines()
  ]
  length = line['run_length']
  assert line['params']['target_interval'] == 0.5
  reached = int(length['stopped_by'] == 'target')
  assert proc.stdout.splitlines()[-1].startswith(
    '--num_batches=auto: %d of 1 runs reached' % reached
  )
