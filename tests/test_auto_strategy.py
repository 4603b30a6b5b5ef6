"""--variable_update=auto (issue 31, item 4): predict, pick the best, run it.

The pick is checked against the cost model's own predictions of every
candidate (a fixture profile, so nothing is measured); the results line
carries `prediction` and passes the schema; every task of a launched
cluster gets the same profile and so the same choice.
"""

import io
import json
import os

import jsonschema
import pytest

from tests.helpers import AUTO_PROFILE
from tests.helpers import AUTO_RESNET20
from tests.helpers import LAUNCHER
from tests.helpers import ROOT
from tests.helpers import TRIVIAL_FLAGS
from tests.helpers import cli_status
from tests.helpers import launcher_args
from tests.helpers import run_benchmark
from tests.helpers import run_python
from tests.helpers import task_env
from tf_cnn_benchmarks.commands import launch_local_cluster  # noqa: E402
from tf_cnn_benchmarks.scaling.auto import auto
from tf_cnn_benchmarks.scaling.auto import auto_launch
from tf_cnn_benchmarks.scaling.model import cost_model
from tf_cnn_benchmarks.scaling.model import profile_format
from tf_cnn_benchmarks.scaling.model import target as target_lib

PROFILE = AUTO_PROFILE
SCHEMA = os.path.join(ROOT, 'results', 'schema.json')
RESNET20 = AUTO_RESNET20
# The launcher's tests rank with the trivial model's profile: its few
# variables simulate quickly (each ranking covers every strategy over each
# cluster shape; resnet20's took 25 s for four tasks).
TRIVIAL_PROFILE = os.path.join(
  ROOT, 'results', 'profiles', 'trivial_cifar10_b32_cpu.json'
)
LAUNCHER_FLAGS = [
  '--model=trivial',
  '--data_name=cifar10',
  '--batch_size=32',
  '--variable_update=auto',
  '--scaling_profile=' + TRIVIAL_PROFILE,
]


def _best_by_the_model(overrides, cluster):
  """The top (rounded figure, then candidate order) of cost_model.predict
  over every candidate, computed here without auto.rank."""
  profile = profile_format.load_profile(PROFILE)
  target = auto.target_for(overrides, cluster)
  strategies = auto.candidates(overrides, profile, target, cluster)
  figures = [
    float('%.4g' % cost_model.predict(profile, target, s).images_per_sec)
    for s in strategies
  ]
  return strategies[figures.index(max(figures))], len(strategies)


def test_local_towers_resolve_to_the_top_prediction():
  overrides = dict(RESNET20, num_gpus=2)
  values, choice = auto.choose(overrides)
  best, count = _best_by_the_model(overrides, None)
  assert count >= 3  # parameter_server, replicated and its specs
  assert (values['variable_update'], values['all_reduce_spec']) == (
    best.variable_update,
    best.all_reduce_spec,
  )
  assert values['variable_update'] in ('parameter_server', 'replicated')
  assert choice.chosen == 0
  assert choice.best.strategy == best
  assert {p.strategy.variable_update for p in choice.ranked} == {
    'parameter_server',
    'replicated',
  }


def test_a_cluster_shape_resolves_to_the_top_prediction_of_its_managers():
  overrides = dict(
    RESNET20,
    job_name='worker',
    task_index=0,
    worker_hosts='localhost:1,localhost:2',
    ps_hosts='localhost:3',
    link_mbits=100.0,
  )
  values, choice = auto.choose(overrides)
  cluster = auto.cluster_of(overrides)
  best, _ = _best_by_the_model(overrides, cluster)
  assert values['variable_update'] == best.variable_update
  assert values['all_reduce_spec'] == best.all_reduce_spec
  # With one ps task, only the managers that need one run on it.
  assert {p.strategy.variable_update for p in choice.ranked} == {
    'parameter_server',
    'distributed_replicated',
    'hybrid',
  }
  target = choice.best.target
  assert (target.num_workers, target.num_ps, target.link_mbits) == (2, 1, 100)
  assert target.colocated  # every address names one host
  record = choice.record()
  assert record['cluster'] == target.shape_text()
  assert record['profile'] == PROFILE


def test_a_tf_config_cluster_is_the_shape_predicted(monkeypatch):
  monkeypatch.setenv(
    'TF_CONFIG',
    json.dumps(
      {
        'cluster': {
          'worker': ['localhost:1', 'localhost:2', 'localhost:3'],
        },
        'task': {'type': 'worker', 'index': 1},
      }
    ),
  )
  values, choice = auto.choose(dict(RESNET20))
  # Three workers, no ps task and no controller: only the collective ring.
  assert values['variable_update'] == 'collective_all_reduce'
  assert choice.best.target.num_workers == 3
  assert choice.runner_up is None


def test_the_python_api_without_the_resolution_says_where_it_is():
  from tf_cnn_benchmarks.config import params as params_lib

  with pytest.raises(params_lib.ParamsError, match='make_auto_plan'):
    params_lib.make_params(model='trivial', variable_update='auto')
  plan, choice = auto.make_auto_plan(out=io.StringIO(), **RESNET20)
  assert plan.params.variable_update == choice.best.strategy.variable_update


def test_a_cluster_without_a_profile_file_is_refused():
  overrides = dict(RESNET20, worker_hosts='localhost:1,localhost:2')
  overrides.pop('scaling_profile')
  overrides.update(job_name='worker', task_index=0)
  with pytest.raises(auto.AutoError, match='--scaling_profile=FILE'):
    auto.choose(overrides)


def _prediction(name, figure, low, high):
  target = target_lib.make_target(num_workers=1, devices_per_worker=2)
  return cost_model.Prediction(
    cost_model.Strategy(name), target, figure, low, high, 10.0
  )


def test_close_top_two_are_said_to_be_within_the_band():
  close = auto.Choice(
    (
      _prediction('replicated', 100.0, 90.0, 110.0),
      _prediction('parameter_server', 98.0, 88.0, 108.0),
    ),
    0,
    'p.json',
  )
  assert close.within_band()
  assert 'within the uncertainty' in close.verdict()
  assert close.record()['within_band'] is True
  assert close.record()['margin_percent'] == pytest.approx(2.041, abs=1e-3)
  apart = auto.Choice(
    (
      _prediction('replicated', 100.0, 95.0, 105.0),
      _prediction('parameter_server', 50.0, 45.0, 55.0),
    ),
    0,
    'p.json',
  )
  assert not apart.within_band()
  assert 'outside the uncertainty' in apart.verdict()
  assert apart.record()['runner_up']['variable_update'] == 'parameter_server'


def test_the_results_line_carries_the_prediction_and_passes_the_schema(
  tmp_path,
):
  path = str(tmp_path / 'r.jsonl')
  proc = run_benchmark(
    *TRIVIAL_FLAGS,
    '--num_batches=3',
    '--num_gpus=2',
    '--variable_update=auto',
    '--scaling_profile=' + PROFILE,
    '--scaling_profile_any_model',  # resnet20's, for a trivial run
    '--result_file=' + path,
    env=task_env(),
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr
  with open(path) as f:
    (line,) = [json.loads(x) for x in f if x.strip()]
  with open(SCHEMA) as f:
    jsonschema.Draft202012Validator(json.load(f)).validate(line)
  prediction = line['prediction']
  assert prediction['variable_update'] == line['variable_update']
  assert prediction['all_reduce_spec'] == line['all_reduce_spec']
  assert line['variable_update'] in ('parameter_server', 'replicated')
  assert prediction['band_low'] <= prediction['predicted_images_per_sec']
  assert prediction['profile'] == PROFILE
  assert line['params']['variable_update'] == line['variable_update']
  assert line['images_per_sec'] > 0
  # After the run, the console holds the measured figure against it.
  assert auto.measured_line(prediction, line['images_per_sec']) in (
    proc.stdout.splitlines()
  )


def test_the_measured_line_says_where_the_run_fell_against_the_band():
  record = {
    'predicted_images_per_sec': 100.0,
    'band_low': 80.0,
    'band_high': 130.0,
  }
  assert auto.measured_line(record, 90.0) == (
    '--variable_update=auto: measured 90.0 images/sec, predicted 100.0 '
    '(-10.0%), inside the band 80.0 - 130.0'
  )
  assert 'below the band' in auto.measured_line(record, 79.9)
  assert '(+40.0%), above the band' in auto.measured_line(record, 140.0)


@pytest.mark.parametrize(
  'profile, what',
  [('/nonexistent/p.json', 'cannot read'), (SCHEMA, 'profile_version')],
)
def test_a_bad_profile_file_is_one_line_and_status_2(profile, what):
  status, err = cli_status(
    *TRIVIAL_FLAGS,
    '--num_batches=1',
    '--variable_update=auto',
    '--scaling_profile=' + profile,
  )
  assert status == 2
  assert len(err) == 1, err
  assert err[0].startswith('error: --scaling_profile=' + profile)
  assert what in err[0]


def test_with_tasks_measure_link_the_tasks_are_told_no_rate(tmp_path):
  flags = list(LAUNCHER_FLAGS)
  told, _, _ = launch_local_cluster.resolve_auto(
    launcher_args(tasks_measure_link=True), flags, str(tmp_path)
  )
  assert not [f for f in told if f.startswith('--link_mbits')]
  assert '--link_topology=switch' in told
  assert '--tasks_colocated=true' in told  # they share this host's cores


def test_an_unthrottled_launch_still_tells_the_tasks_its_topology(tmp_path):
  # Its tasks share one loopback: left to their default (switch), they
  # predicted a port each (lenet, 3 workers: psgpu at 1297 images/sec
  # instead of 1220 on the shared loopback).
  flags = list(LAUNCHER_FLAGS)
  for topology in ('shared', 'switch'):
    told, _, _ = launch_local_cluster.resolve_auto(
      launcher_args(link_mbits=None, topology=topology), flags, str(tmp_path)
    )
    assert '--link_topology=' + topology in told
    assert not [f for f in told if f.startswith('--link_mbits')]
  given = flags + ['--link_topology=switch']
  told, _, _ = launch_local_cluster.resolve_auto(
    launcher_args(link_mbits=None, topology='shared'), given, str(tmp_path)
  )
  assert [f for f in told if f.startswith('--link_topology')] == [
    '--link_topology=switch'
  ]  # the user's own, kept


def test_the_launcher_gives_every_task_the_same_choice(tmp_path):
  args = launcher_args()
  flags = LAUNCHER_FLAGS + ['--device=cpu']
  flags, num_ps, controller = launch_local_cluster.resolve_auto(
    args, flags, str(tmp_path)
  )
  commands = launch_local_cluster.task_commands(args, flags, num_ps, controller)
  picks = set()
  for argv in commands.values():
    assert '--scaling_profile=' + TRIVIAL_PROFILE in argv
    assert '--link_mbits=100' in argv
    assert '--tasks_colocated=true' in argv
    overrides = auto_launch.overrides_from_argv(argv[argv.index('-m') + 2 :])
    values, _ = auto.choose(overrides)
    picks.add((values['variable_update'], values['all_reduce_spec']))
  assert len(picks) == 1
  _, _, best = auto_launch.best_shape(auto_launch.overrides_from_argv(flags), 2)
  assert picks == {
    (best.strategy.variable_update, best.strategy.all_reduce_spec)
  }


@pytest.mark.slow
def test_auto_measures_a_short_profile_then_runs(tmp_path):
  path = str(tmp_path / 'r.jsonl')
  proc = run_benchmark(
    *TRIVIAL_FLAGS,
    '--num_batches=3',
    '--variable_update=auto',
    '--result_file=' + path,
    env=task_env(),
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr
  with open(path) as f:
    (line,) = [json.loads(x) for x in f if x.strip()]
  assert line['prediction']['profile'] == 'measured'
  assert line['prediction']['variable_update'] == line['variable_update']


@pytest.mark.slow
def test_a_launched_cluster_runs_the_one_choice(tmp_path):
  path = str(tmp_path / 'c.jsonl')
  proc = run_python(
    [
      LAUNCHER,
      '--num_workers=2',
      '--timeout=600',
      '--',
      *TRIVIAL_FLAGS,
      '--num_batches=3',
      '--variable_update=auto',
      '--scaling_profile=' + PROFILE,
      '--scaling_profile_any_model',  # resnet20's, for a trivial run
      '--result_file=' + path,
    ],
    env=task_env(),
    timeout=900,
  )
  assert proc.returncode == 0, proc.stderr
  with open(path) as f:
    (line,) = [json.loads(x) for x in f if x.strip()]
  running = [
    ln.split('] ', 1)[1].split(', predicted')[0]
    for ln in proc.stdout.splitlines()
    if '--variable_update=auto: running' in ln
  ]
  assert len(running) >= 2 and len(set(running)) == 1, running
  assert line['prediction']['variable_update'] == line['variable_update']
  assert line['prediction']['cluster'].startswith('2x1')
