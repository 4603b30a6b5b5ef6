"""scripts/predict_scaling.py: its JSON lines, its table and bad input."""

import json
import os
import subprocess
import sys

import pytest

from tests.test_cost_model import FIXTURE

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, 'scripts', 'predict_scaling.py')

from tf_cnn_benchmarks.commands import predict_scaling  # noqa: E402


def _main(argv):
  return predict_scaling.main(['--profile=' + FIXTURE] + argv)


def test_json_lines_one_per_strategy_and_scale(tmp_path, capsys):
  out = tmp_path / 'p.jsonl'
  status = _main(
    [
      '--num_workers=2,3',
      '--num_ps=1',
      '--link_mbits=1000',
      '--topology=shared',
      '--variable_update=parameter_server,distributed_all_reduce',
      '--all_reduce_spec=xring,pscpu/xring',
      '--json_out=%s' % out,
    ]
  )
  assert status == 0
  lines = [json.loads(x) for x in out.read_text().splitlines()]
  # Per scale: ps sync + its async bound + 2 specs of distributed_all_reduce.
  assert len(lines) == 2 * 4
  keys = {
    'variable_update',
    'all_reduce_spec',
    'num_workers',
    'devices_per_worker',
    'num_ps',
    'link_mbits',
    'topology',
    'predicted_images_per_sec',
    'band_low',
    'band_high',
  }
  for line in lines:
    assert keys <= set(line)
    assert line['band_low'] < line['predicted_images_per_sec']
    assert line['predicted_images_per_sec'] < line['band_high']
    assert line['link_mbits'] == 1000 and line['topology'] == 'shared'
  assert sorted({x['num_workers'] for x in lines}) == [2, 3]
  specs = {x['all_reduce_spec'] for x in lines}
  assert specs == {None, 'xring', 'pscpu/xring'}
  printed = capsys.readouterr().out
  assert printed.count('rank') == 2 and 'best: ' in printed
  assert 'interference_cores = 1' in printed and 'assumed' in printed


def test_all_takes_the_registries(tmp_path):
  """`all` lists every cluster manager and every CPU algorithm."""
  out = tmp_path / 'p.jsonl'
  assert _main(['--num_workers=2', '--num_ps=1', '--json_out=%s' % out]) == 0
  lines = [json.loads(x) for x in out.read_text().splitlines()]
  managers = {x['variable_update'] for x in lines}
  assert managers == {
    'parameter_server',
    'distributed_replicated',
    'distributed_all_reduce',
    'collective_all_reduce',
    'hybrid',
  }
  specs = {
    x['all_reduce_spec']
    for x in lines
    if x['variable_update'] == 'distributed_all_reduce'
  }
  from variable_mgr import allreduce_spec

  assert specs - {None} == set(allreduce_spec.algorithm_names(cpu_only=True))
  import variable_mgr

  assert managers == set(variable_mgr.cluster_names())
  local = tmp_path / 'local.jsonl'
  assert _main(['--devices_per_worker=2', '--json_out=%s' % local]) == 0
  lines = [json.loads(x) for x in local.read_text().splitlines()]
  # independent is registered but not modelled (no gradients exchanged).
  assert {x['variable_update'] for x in lines} == (
    set(variable_mgr.local_names()) - {'independent'}
  )


@pytest.mark.parametrize(
  'argv,needle',
  [
    (['--topology=ring'], '--topology=ring'),
    (['--num_workers=0'], '--num_workers=0'),
    (['--num_workers=2', '--link_mbits=-5'], ': error: --link_mbits=-5:'),
    (['--variable_update=fastest'], '--variable_update=fastest'),
    (
      ['--num_workers=2', '--variable_update=distributed_replicated'],
      'needs --num_ps',
    ),
    (['--all_reduce_spec=xring:', '--variable_update=replicated'], 'xring:'),
    (['--profile=/nonexistent.json'], '/nonexistent.json'),
    (['--num_ps=x'], '--num_ps'),
  ],
)
def test_bad_input_is_one_line_exit_2(argv, needle, capsys):
  assert _main(argv) == 2
  err = capsys.readouterr().err
  assert err.count('\n') == 1 and needle in err, err


def test_measuring_an_unknown_model_is_one_line_exit_2(capsys):
  """The measuring path checks the model flags before it measures."""
  status = predict_scaling.main(['--model=nosuch', '--batch_size=8'])
  err = capsys.readouterr().err
  assert status == 2 and err.count('\n') == 1 and '--model' in err, err


def test_the_script_exits_2_with_one_line():
  result = subprocess.run(
    [sys.executable, SCRIPT, '--profile=' + FIXTURE, '--topology=hub'],
    capture_output=True,
    text=True,
    cwd=REPO,
    timeout=300,
  )
  assert result.returncode == 2
  assert result.stderr.strip().count('\n') == 0
  assert '--topology=hub' in result.stderr


def test_collective_all_reduce_keeps_its_default_beside_other_specs(tmp_path):
  out = tmp_path / 'p.jsonl'
  status = _main(
    [
      '--num_workers=2',
      '--variable_update=collective_all_reduce,distributed_all_reduce',
      '--all_reduce_spec=xring',
      '--json_out=%s' % out,
    ]
  )
  assert status == 0
  lines = [json.loads(x) for x in out.read_text().splitlines()]
  assert [(x['variable_update'], x['all_reduce_spec']) for x in lines] == [
    ('collective_all_reduce', None),
    ('distributed_all_reduce', 'xring'),
  ]
