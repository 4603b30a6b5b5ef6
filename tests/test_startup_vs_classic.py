"""scripts/startup_vs_classic.py: phases from timestamped lines, its flags."""

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT
from tf_cnn_benchmarks.commands import startup_vs_classic as startup


def test_phases_come_from_the_lines_both_harnesses_print():
  stamps = [
    (4.0, 3.0, 'TensorFlow: 2.21'),
    (5.0, 4.0, 'Generating training model'),
    (9.0, 7.5, 'Initializing graph'),
    (12.0, 10.0, 'Running warm up'),
    (20.0, 16.0, 'Done warm up'),
    (21.0, 17.0, '1\timages/sec: 2.0 +/- 0.0'),
    (23.0, 18.0, '2\timages/sec: 2.0 +/- 0.0'),
    (25.0, 20.0, '3\timages/sec: 2.0 +/- 0.0'),
    (26.0, 21.0, 'total images/sec: 2.0'),
  ]
  got = startup.phases_of(stamps, (27.5, 21.5), num_batches=3)
  assert got == {
    'import': (5.0, 4.0),
    'build': (4.0, 3.5),
    'init': (3.0, 2.5),
    'first': (8.0, 6.0),
    'steady': (2.0, 1.5),
    'end': (2.5, 1.5),
    'total': (27.5, 21.5),
  }


def test_a_run_that_stops_early_has_only_the_phases_it_reached():
  stamps = [(5.0, 4.0, 'Generating training model')]
  assert startup.phases_of(stamps, (6.0, 4.5), num_batches=1) == {
    'import': (5.0, 4.0)
  }


def test_medians_over_rounds_skip_failed_runs():
  runs = [{'build': (1.0, 1.0)}, None, {'build': (3.0, 2.0)}]
  assert startup.median_phases(runs) == {'build': (2.0, 1.5)}


def test_the_ratio_line_says_classic_over_this():
  line = startup._ratio_line({'init': (2.0, 1.0)}, {'init': (3.0, 1.5)})
  assert '1.50/1.50' in line


def test_cluster_runs_one_config_per_manager_after_the_towers():
  args = startup.parse_args(
    ['--towers=1,2', '--models=inception3,resnet50', '--cluster',
     '--cluster_variable_updates=parameter_server,distributed_replicated']
  )  # fmt: skip
  got = startup.configs(args)
  assert [c.name for c in got] == [
    'inception3 replicated x1',
    'inception3 replicated x2',
    'resnet50 replicated x1',
    'resnet50 replicated x2',
    'inception3 parameter_server 2 workers',
    'inception3 distributed_replicated 2 workers',
  ]
  assert [c.cluster for c in got] == [False] * 4 + [True] * 2
  assert '--variable_update=distributed_replicated' in got[-1].flags
  assert '--num_gpus=1' in got[-1].flags


@pytest.mark.parametrize(
  'args',
  [
    ['--towers=0'],
    ['--towers=a'],
    ['--classic_python=x'],
    ['--cluster', '--cluster_variable_updates=replicated'],
  ],
)
def test_bad_flags_are_one_line_exit_2(args):
  proc = subprocess.run(
    [sys.executable, 'scripts/startup_vs_classic.py', *args],
    cwd=ROOT,
    capture_output=True,
    text=True,
  )
  assert proc.returncode == 2
  assert 'Traceback' not in proc.stderr


def test_a_bad_reference_is_one_line_exit_2(tmp_path):
  bad = tmp_path / 'ref.json'
  bad.write_text(json.dumps({'cpu': 'x'}))
  proc = subprocess.run(
    [sys.executable, 'scripts/startup_vs_classic.py', '--reference=%s' % bad],
    cwd=ROOT,
    capture_output=True,
    text=True,
  )
  assert proc.returncode == 2
  assert proc.stderr.strip().splitlines() == [
    '--reference=%s: not a file of --write_reference' % bad
  ]
