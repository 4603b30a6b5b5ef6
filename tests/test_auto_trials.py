"""--auto_trials (issue 31, item 4): when the prediction cannot order the
top strategies, the launcher runs each briefly and every task runs the one
that measured fastest.

The trials here are stand-ins (a function returning figures) except in the
slow test, which launches real trial clusters.
"""

import json
import os

import jsonschema
import pytest

from tests.helpers import LAUNCHER
from tests.helpers import ROOT
from tests.helpers import TRIVIAL_FLAGS
from tests.helpers import FakeSwitch
from tests.helpers import launcher_args
from tests.helpers import run_python
from tests.helpers import task_env
from tf_cnn_benchmarks.commands import launch_local_cluster  # noqa: E402
from tf_cnn_benchmarks.scaling.auto import auto
from tf_cnn_benchmarks.scaling.auto import auto_launch
from tf_cnn_benchmarks.scaling.auto import auto_trials
from tf_cnn_benchmarks.scaling.model import cost_model
from tf_cnn_benchmarks.scaling.model import target as target_lib

SCHEMA = os.path.join(ROOT, 'results', 'schema.json')
TRIVIAL_PROFILE = os.path.join(
  ROOT, 'results', 'profiles', 'trivial_cifar10_b32_cpu.json'
)
FLAGS = [
  '--model=trivial',
  '--data_name=cifar10',
  '--batch_size=32',
  '--device=cpu',
  '--variable_update=auto',
  '--scaling_profile=' + TRIVIAL_PROFILE,
]


def _entry(name, figure, low, high, num_ps=0, spec=None):
  target = target_lib.make_target(num_workers=2, num_ps=num_ps)
  strategy = cost_model.Strategy(name, spec)
  return (
    num_ps,
    False,
    cost_model.Prediction(strategy, target, figure, low, high, 1.0),
  )


def test_close_calls_are_the_best_and_the_bands_that_reach_it():
  best = _entry('collective_all_reduce', 100.0, 90.0, 110.0)
  others = [
    _entry('hybrid', 95.0, 85.0, 105.0, num_ps=1),
    _entry('distributed_all_reduce', 80.0, 70.0, 89.9, spec='xring'),
    _entry('parameter_server', 91.0, 80.0, 90.0, num_ps=1),
    _entry('distributed_replicated', 97.0, 88.0, 106.0, num_ps=1),
  ]
  trials = auto_trials.close_calls(best, others, 3)
  # 90.0 reaches the best's low end; 89.9 does not; fastest first; 3 in all.
  assert [t.variable_update for t in trials] == [
    'collective_all_reduce',
    'distributed_replicated',
    'hybrid',
  ]
  assert [t.num_ps for t in trials] == [0, 1, 1]
  assert trials[0].predicted == 100.0 and trials[0].measured is None
  everything = auto_trials.close_calls(best, others, 10)
  assert {t.variable_update for t in everything} == {
    'collective_all_reduce',
    'distributed_replicated',
    'hybrid',
    'parameter_server',
  }
  far = [_entry('hybrid', 50.0, 40.0, 60.0, num_ps=1)]
  assert auto_trials.close_calls(best, far, 3) == []  # nothing to tell apart


def test_a_trial_writes_none_of_the_runs_files_and_runs_its_strategy():
  argv = [
    '--model=trivial',
    '--batch_size',
    '16',
    '--nodistortions',
    '--variable_update=auto',
    '--all_reduce_spec=pscpu',
    '--num_batches=500',
    '--num_warmup_batches=50',
    '--result_file=/tmp/r.jsonl',
    '--train_dir=/tmp/ckpt',
    '--trace_file=/tmp/t.json',
    '--benchmark_log_dir=/tmp/log',
    '--auto_trials_measured=[]',
    '--scaling_profile=p.json',
  ]
  trial = auto_trials.Trial('distributed_all_reduce', 'xring', 0, True, 9.0)
  out = auto_trials.trial_argv(argv, trial, 7)
  assert '--model=trivial' in out and '--batch_size=16' in out
  assert '--nodistortions' in out
  assert '--scaling_profile=p.json' in out  # harmless without auto
  for gone in ('result_file', 'train_dir', 'trace_file', 'benchmark_log_dir'):
    assert not [f for f in out if gone in f], (gone, out)
  assert [f for f in out if 'variable_update' in f] == [
    '--variable_update=distributed_all_reduce'
  ]
  assert (
    '--all_reduce_spec=xring' in out and '--all_reduce_spec=pscpu' not in out
  )
  assert out[-2:] == ['--num_batches=7', '--num_warmup_batches=3']
  assert not [f for f in out if 'auto_trials_measured' in f]
  plain = auto_trials.Trial('hybrid', None, 1, False, 9.0)
  assert not [
    f for f in auto_trials.trial_argv(argv, plain, 7) if 'all_reduce_spec' in f
  ]


def test_the_tasks_flag_round_trips_and_bad_values_are_one_line():
  trials = (
    auto_trials.Trial('hybrid', None, 1, False, 120.0, 101.5),
    auto_trials.Trial(
      'distributed_all_reduce', 'pscpu:32k:xring', 0, True, 119.0
    ),
  )
  assert auto_trials.decode(auto_trials.encode(trials)) == trials
  assert auto_trials.fastest(trials) is trials[0]
  assert auto_trials.fastest(trials[1:]) is None  # no figure measured
  for bad in ('{', '[]', '{"a": 1}', '[{"variable_update": "hybrid"}]', '[3]'):
    with pytest.raises(auto_trials.TrialsError) as e:
      auto_trials.decode(bad)
    assert str(e.value).startswith('--auto_trials_measured: ')
    assert '\n' not in str(e.value)


def _overrides(**changes):
  argv = FLAGS + [
    '--worker_hosts=10.31.0.1:1,10.31.0.2:1',
    '--ps_hosts=10.31.0.3:1',
    '--job_name=worker',
    '--task_index=0',
    '--tasks_colocated=true',
    '--link_mbits=100',
  ]
  return auto_launch.overrides_from_argv(argv) | changes


def test_a_task_runs_the_trial_that_measured_fastest():
  _, plain = auto.choose(_overrides())
  ranked = plain.ranked
  assert len(ranked) >= 2
  slow_best, fast_second = ranked[0], ranked[1]
  trials = (
    _trial(slow_best, 100.0),
    _trial(fast_second, 130.0),
  )
  values, choice = auto.choose(
    _overrides(auto_trials_measured=auto_trials.encode(trials))
  )
  assert values['variable_update'] == fast_second.strategy.variable_update
  assert values['all_reduce_spec'] == fast_second.strategy.all_reduce_spec
  assert choice.best is fast_second or choice.best == fast_second
  record = choice.record()
  assert [t['measured_images_per_sec'] for t in record['trials']] == [
    100.0,
    130.0,
  ]
  assert 'the fastest of 2 trials' in choice.verdict()
  line = {'prediction': record}
  with open(SCHEMA) as f:
    schema = json.load(f)
  jsonschema.Draft202012Validator(schema['$defs']['prediction']).validate(line)


def _trial(prediction, measured):
  strategy = prediction.strategy
  return auto_trials.Trial(
    strategy.variable_update,
    strategy.all_reduce_spec,
    1,
    False,
    prediction.images_per_sec,
    measured,
  )


def test_trials_a_task_cannot_run_are_refused_in_one_line():
  failed = (auto_trials.Trial('hybrid', None, 1, False, 9.0, None),)
  with pytest.raises(auto.AutoError, match='every one failed'):
    auto.choose(_overrides(auto_trials_measured=auto_trials.encode(failed)))
  elsewhere = (
    auto_trials.Trial('collective_all_reduce', None, 0, False, 9.0, 5.0),
  )
  with pytest.raises(auto.AutoError, match='not a strategy of this cluster'):
    auto.choose(_overrides(auto_trials_measured=auto_trials.encode(elsewhere)))
  with pytest.raises(auto.AutoError, match='^--auto_trials_measured: not JSON'):
    auto.choose(_overrides(auto_trials_measured='nope'))


def _launcher_args(**changes):
  return launcher_args(**(dict(auto_trials=3, auto_trial_batches=5) | changes))


def test_the_launcher_starts_the_fastest_trial_and_tells_every_task(
  tmp_path, capsys
):
  ran = []

  def run_trial(argv, num_ps, controller):
    strategy = [f for f in argv if f.startswith('--variable_update=')][0]
    ran.append((strategy.split('=')[1], num_ps, controller))
    return 500.0 if num_ps else 100.0 + len(ran)  # a ps strategy is fastest

  args = _launcher_args()
  flags, num_ps, controller = launch_local_cluster.resolve_auto(
    args, list(FLAGS), str(tmp_path), run_trial
  )
  assert len(ran) >= 2, ran
  winners = [r for r in ran if r[1]]
  assert winners, ran  # the stand-in needs a close ps strategy
  assert (num_ps, controller) == (winners[0][1], winners[0][2])
  out = capsys.readouterr().out
  assert '%s measured fastest of %d trials' % (winners[0][0], len(ran)) in out
  picks = set()
  commands = launch_local_cluster.task_commands(args, flags, num_ps, controller)
  for argv in commands.values():
    overrides = auto_launch.overrides_from_argv(argv[argv.index('-m') + 2 :])
    values, choice = auto.choose(overrides)
    picks.add(values['variable_update'])
    assert len(choice.trials) == len(ran)
  assert picks == {winners[0][0]}


def test_without_trials_the_launcher_runs_the_predicted_best(tmp_path):
  def run_trial(argv, num_ps, controller):
    raise AssertionError('no trial runs with --auto_trials=0')

  flags, num_ps, controller = launch_local_cluster.resolve_auto(
    _launcher_args(auto_trials=0), list(FLAGS), str(tmp_path), run_trial
  )
  assert not [f for f in flags if 'auto_trials_measured' in f]
  best = auto_launch.best_shape(auto_launch.overrides_from_argv(flags), 2)
  assert (num_ps, controller) == best[:2]


def test_a_launchs_clusters_reuse_the_same_hosts():
  args = _launcher_args()
  switch = FakeSwitch()
  first = launch_local_cluster.task_commands(args, [], 1, False, switch)
  second = launch_local_cluster.task_commands(args, [], 0, False, switch)
  assert switch.hosts == 3  # the second cluster added no host
  assert first['ps:0'][:2] == second['worker:0'][:2]  # the same host's netns
  hosts = [f for f in second['worker:0'] if f.startswith('--worker_hosts=')]
  assert hosts[0].startswith('--worker_hosts=10.31.0.1:')


def test_auto_trials_without_auto_is_one_line_and_status_2():
  proc = run_python(
    [LAUNCHER, '--num_workers=2', '--auto_trials=2', '--', '--model=trivial'],
    env=task_env(),
  )
  assert proc.returncode == 2
  err = proc.stderr.strip().splitlines()
  assert err == [
    'error: --auto_trials=2: needs --variable_update=auto among the '
    'benchmark flags'
  ]


@pytest.mark.slow
def test_a_launch_with_trials_prints_one_figure_and_records_them(tmp_path):
  path = str(tmp_path / 'c.jsonl')
  proc = run_python(
    [
      LAUNCHER,
      '--num_workers=2',
      '--link_mbits=100',
      '--topology=switch',
      '--auto_trials=3',
      '--auto_trial_batches=3',
      '--timeout=600',
      '--',
      *TRIVIAL_FLAGS,
      '--num_batches=3',
      '--variable_update=auto',
      '--scaling_profile=' + TRIVIAL_PROFILE,
      '--result_file=' + path,
    ],
    env=task_env(),
    timeout=900,
  )
  assert proc.returncode == 0, proc.stderr
  with open(path) as f:
    (line,) = [json.loads(x) for x in f if x.strip()]  # no trial's line
  trials = line['prediction']['trials']
  assert len(trials) >= 2
  fastest = max(trials, key=lambda t: t['measured_images_per_sec'] or 0)
  assert line['variable_update'] == fastest['variable_update']
  totals = [ln for ln in proc.stdout.splitlines() if 'total images/sec:' in ln]
  assert len(totals) == 3, totals  # two workers and the summary, no trial's
