"""lab/scripts/validate_predictor.py without a real cluster: the metrics against
hand-computed cases, the scoring rules, --dry_run, --resume and bad flags
(a fake runner stands in for the launcher)."""

import io
import json
import math
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

from lab.scripts import validate_predictor as vp  # noqa: E402
from lab.scripts import validation_auto as va  # noqa: E402
from lab.scripts import validation_metrics as vm  # noqa: E402
from lab.scripts import validation_report as vr  # noqa: E402


def _cell(model='trivial', workers=2, ps=1, link=25.0, strategy='x'):
  return {
    'model': model,
    'num_workers': workers,
    'num_ps': ps,
    'link_mbits': link,
    'topology': 'shared',
    'strategy': strategy,
  }


# Kendall's tau-b.


def test_tau_same_and_reversed_order():
  assert vm.kendall_tau_b([1, 2, 3], [10, 20, 30]) == 1.0
  assert vm.kendall_tau_b([1, 2, 3], [30, 20, 10]) == -1.0


def test_tau_one_swap_of_three():
  # Pairs: (a,b) C, (a,c) C, (b,c) D: (2 - 1) / 3.
  assert vm.kendall_tau_b([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)


def test_tau_b_with_a_tie_on_one_side():
  # (a,b) C, (a,c) C, (b,c) tied in x only: 2 / sqrt((3 - 1) * (3 - 0)).
  assert vm.kendall_tau_b([1, 2, 2], [1, 2, 3]) == pytest.approx(
    2 / math.sqrt(6)
  )


def test_tau_b_with_ties_on_both_sides():
  # (a,b) C, (a,c) D, (b,c) tied in both, (a,d)... four items:
  # xs = [1, 2, 2, 3], ys = [1, 3, 3, 2]
  # (0,1) C, (0,2) C, (0,3) C, (1,2) tie both, (1,3) D, (2,3) D.
  # C=3, D=2, pairs 6, tied_x 1, tied_y 1: 1 / sqrt(5 * 5).
  assert vm.kendall_tau_b([1, 2, 2, 3], [1, 3, 3, 2]) == pytest.approx(0.2)


def test_tau_undefined_when_one_side_all_tied():
  assert vm.kendall_tau_b([5, 5], [1, 2]) is None


# Errors and regret.


def test_percentile_interpolates_between_ranks():
  values = list(range(1, 11))
  assert vm.percentile(values, 90) == pytest.approx(9.1)
  assert vm.percentile(values, 50) == pytest.approx(5.5)
  assert vm.percentile([7.0], 90) == 7.0


def test_abs_error_is_percent_of_measured():
  assert vm.abs_error_pct(110.0, 100.0) == pytest.approx(10.0)
  assert vm.abs_error_pct(80.0, 100.0) == pytest.approx(20.0)


def test_regret_of_predicted_best():
  assert vm.top1_regret([3, 2, 1], [90, 100, 80]) == pytest.approx(0.1)
  assert vm.top1_regret([1, 3], [90, 100]) == 0.0


def test_regret_of_a_predicted_tie_takes_the_worse():
  assert vm.top1_regret([2, 2], [100, 90]) == pytest.approx(0.1)


def _record(strategy, measured, model_pred, paleo, link=25.0, ps=1):
  cell = _cell(strategy=strategy, link=link, ps=ps)
  reason = vm.unscored_reason(cell, measured)
  return {
    'cell': cell,
    'unscored_reason': reason,
    'measured': measured,
    'measured_median': sorted(measured)[len(measured) // 2],
    'scored': reason is None,
    'predicted': {
      'model': {'images_per_sec': model_pred},
      'paleo': {'images_per_sec': paleo},
      'daydream': {'images_per_sec': paleo},
    },
  }


def test_summarize_by_hand():
  records = [
    _record('a', [100, 100, 100], 110, 50),  # error 10%, paleo 50%
    _record('b', [200, 200, 200], 180, 300),  # error 10%, paleo 50%
    _record('c', [100, 150, 200], 1, 1),  # spread 100%: not scored
  ]
  model = vm.summarize(records, 'model')
  assert model['cells'] == 2
  assert model['median_abs_error_pct'] == pytest.approx(10.0)
  assert model['p90_abs_error_pct'] == pytest.approx(10.0)
  assert model['groups'] == 1
  assert list(model['regret_by_group'].values()) == [0.0]
  assert list(model['tau_by_group'].values()) == [1.0]
  paleo = vm.summarize(records, 'paleo')
  assert paleo['median_abs_error_pct'] == pytest.approx(50.0)
  assert list(paleo['regret_by_group'].values()) == [0.0]


# Scoring rules.


def test_spread_over_ten_percent_is_not_scored():
  assert vm.unscored_reason(_cell(), [100, 105, 111]).startswith(
    'spread 10.5% > 10%'
  )
  assert vm.unscored_reason(_cell(), [100, 105, 109]) is None


def test_calibration_cells_are_not_scored():
  for model in ('lenet', 'resnet20'):
    cell = _cell(model=model, link=None)
    assert vm.is_calibration_cell(cell)
    assert vm.unscored_reason(cell, [100, 100, 100]).startswith('calibration')
  assert not vm.is_calibration_cell(_cell(model='lenet', link=100.0))
  assert not vm.is_calibration_cell(_cell(model='trivial', link=None))
  assert not vm.is_calibration_cell(_cell(model='lenet', workers=3, link=None))


def test_fewer_than_three_repeats_are_not_scored():
  assert vm.unscored_reason(_cell(), [100, 100]) == 'fewer than 3 repeats'


# The script: grid, --dry_run, --resume, bad flags.


def _args(tmp_path, *extra):
  return vp.parse_args(
    [
      '--models=trivial',
      '--link_mbits=25',
      '--strategies=parameter_server,collective_all_reduce',
      '--profile_dir=%s' % (REPO / 'results' / 'profiles'),
      '--out_prefix=%s' % (tmp_path / 'v'),
      *extra,
    ]
  )


def test_grid_gives_all_reduce_zero_ps(tmp_path):
  cells = vp.grid(_args(tmp_path, '--ps=1,2'))
  assert [(c['strategy'], c['num_ps']) for c in cells] == [
    ('parameter_server', 1),
    ('parameter_server', 2),
    ('collective_all_reduce', 0),
  ]


def test_dry_run_prints_the_grid_and_runs_nothing(tmp_path):
  out = io.StringIO()

  def runner(args, cell):
    raise AssertionError('dry run ran a cluster')

  vp.run_grid(_args(tmp_path, '--dry_run'), run=runner, out=out)
  lines = out.getvalue().splitlines()
  assert lines[0].startswith('rule: cells of model resnet20/lenet')
  assert lines[1] == 'grid: 2 cells x 3 repeats'
  assert lines[2].startswith(
    'cell 1/2: trivial 2w+1ps 25Mbit/s shared parameter_server'
  )
  assert lines[3].startswith(
    'cell 2/2: trivial 2w+0ps 25Mbit/s shared collective_all_reduce'
  )
  assert ' predicted ' in lines[2] and ' paleo ' in lines[2]
  assert not (tmp_path / 'v.jsonl').exists()


def test_resume_skips_cells_in_the_jsonl(tmp_path):
  args = _args(tmp_path, '--resume')
  first = vp.grid(args)[0]
  (tmp_path / 'v.jsonl').write_text(
    json.dumps(
      _record('parameter_server', [90, 90, 90], 95, 95) | {'cell': first}
    )
    + '\n'
  )
  calls = []

  def runner(args, cell):
    calls.append(cell['strategy'])
    return 100.0 + len(calls)

  records = vp.run_grid(args, run=runner, out=io.StringIO())
  assert calls == ['collective_all_reduce'] * 3
  lines = (tmp_path / 'v.jsonl').read_text().splitlines()
  assert len(lines) == 2 and len(records) == 2
  new = json.loads(lines[1])
  assert new['measured'] == [101.0, 102.0, 103.0]
  assert new['measured_median'] == 102.0
  assert new['scored'] is True
  assert new['predicted']['model']['images_per_sec'] > 0
  md = (tmp_path / 'v.md').read_text()
  # One row per predictor in each summary (scored; with noisy cells).
  for name in ('model', 'paleo', 'daydream'):
    assert md.count('\n| %s | 2 | ' % name) == 2
  assert md.count('| trivial | 2 |') == 2


def test_without_resume_the_jsonl_starts_again(tmp_path):
  (tmp_path / 'v.jsonl').write_text('{"cell": {}}\n')
  vp.run_grid(_args(tmp_path), run=lambda a, c: 50.0, out=io.StringIO())
  assert len((tmp_path / 'v.jsonl').read_text().splitlines()) == 2


def test_a_failed_run_is_recorded_not_scored(tmp_path):
  def runner(args, cell):
    raise RuntimeError('exit 1: boom')

  records = vp.run_grid(_args(tmp_path), run=runner, out=io.StringIO())
  assert records[0]['scored'] is False
  assert records[0]['unscored_reason'] == 'run failed: exit 1: boom'


@pytest.mark.parametrize(
  'flag',
  [
    '--topologies=hub',
    '--link_mbits=-3',
    '--workers=1',
    '--strategies=replicated',
    '--repeats=0',
    '--models=nosuch',
    '--bogus',
  ],
)
def test_bad_flags_one_line_exit_2(flag, capsys, tmp_path):
  argv = ['--dry_run', '--out_prefix=%s' % (tmp_path / 'v'), flag]
  assert vp.main(argv) == 2
  err = capsys.readouterr().err
  assert err.count('\n') == 1
  assert err.startswith('validate_predictor.py: error: ')


def test_noisy_view_puts_back_only_spread_cells():
  noisy = _record('c', [100, 150, 200], 165, 1)  # spread 66%: error 10%
  calibration = _record('d', [100, 100, 100], 1, 1)
  calibration['cell']['model'] = 'lenet'
  calibration['cell']['link_mbits'] = None
  calibration['scored'] = False
  calibration['unscored_reason'] = 'calibration cell'
  records = [_record('a', [100, 100, 100], 110, 50), noisy, calibration]
  assert vm.summarize(records, 'model')['cells'] == 1
  both = vm.summarize(records, 'model', noisy=True)
  assert both['cells'] == 2
  assert both['median_abs_error_pct'] == pytest.approx(10.0)
  # a (110 predicted, 100 measured) vs c (165, 150): same order, no regret;
  # their repeats overlap (100 is in both), so the tau of record is
  # undefined and only the strict one orders them.
  assert list(both['tau_strict_by_group'].values()) == [1.0]
  assert list(both['tau_by_group'].values()) == [None]
  assert list(both['regret_by_group'].values()) == [0.0]


def test_mean_tau_counts_an_all_tied_prediction_as_zero():
  records = [
    _record('a', [100, 100, 100], 110, 50),
    _record('b', [200, 200, 200], 180, 50),  # paleo ties a and b
  ]
  assert vm.summarize(records, 'model')['mean_tau'] == 1.0
  paleo = vm.summarize(records, 'paleo')
  assert list(paleo['tau_by_group'].values()) == [None]
  assert paleo['mean_tau'] == 0.0


# Passes, --resume of a stopped grid, --repredict.


def test_repeats_run_in_passes(tmp_path):
  calls = []

  def runner(args, cell):
    calls.append(cell['strategy'])
    return 100.0

  vp.run_grid(_args(tmp_path, '--repeats=2'), run=runner, out=io.StringIO())
  assert calls == ['parameter_server', 'collective_all_reduce'] * 2


def test_resume_continues_the_runs_of_a_stopped_grid(tmp_path):
  args = _args(tmp_path)
  cells = vp.grid(args)
  # A grid stopped after the first pass and one run of the second.
  partial = {
    vp.cell_id(cells[0]): {'runs': [{'images_per_sec': 10.0, 'load': [1, 1]},
                                    {'images_per_sec': 10.0, 'load': [1, 1]}]},
    vp.cell_id(cells[1]): {'runs': [{'images_per_sec': 20.0, 'load': [1, 2]}]},
  }  # fmt: skip
  (tmp_path / 'v.partial.json').write_text(json.dumps(partial))
  calls = []

  def runner(args, cell):
    calls.append(cell['strategy'])
    return 10.0 if cell['strategy'] == 'parameter_server' else 20.0

  records = vp.run_grid(_args(tmp_path, '--resume'), run=runner,
                        out=io.StringIO())  # fmt: skip
  assert calls == ['collective_all_reduce', 'parameter_server',
                   'collective_all_reduce']  # fmt: skip
  assert [r['measured'] for r in records] == [[10.0] * 3, [20.0] * 3]
  assert len(records[1]['load_average']) == 2  # min, max over its runs
  assert not (tmp_path / 'v.partial.json').exists()


def test_repredict_replaces_only_the_predictions(tmp_path):
  stale = _record('parameter_server', [90, 90, 90], 1.0, 1.0)
  stale['cell'] = vp.grid(_args(tmp_path))[0]
  (tmp_path / 'v.jsonl').write_text(json.dumps(stale) + '\n')
  args = _args(tmp_path, '--report_only', '--repredict')
  records = vp.run_grid(args, run=None, out=io.StringIO())
  assert records[0]['measured'] == [90, 90, 90]
  fresh = vp.predict(args, vp.load_profiles(args), stale['cell'])
  assert records[0]['predicted'] == fresh != stale['predicted']
  saved = json.loads((tmp_path / 'v.jsonl').read_text())
  assert saved['predicted'] == fresh


def test_repredict_needs_report_only(capsys, tmp_path):
  assert vp.main(['--repredict', '--out_prefix=%s' % (tmp_path / 'v')]) == 2
  assert '--repredict' in capsys.readouterr().err


# auto cells: the launcher picks; scored by the pick's regret.


def test_auto_cell_lets_the_launcher_pick_the_ps_tasks(tmp_path):
  args = _args(tmp_path, '--strategies=auto')
  (cell,) = vp.grid(args)
  assert cell['num_ps'] is None
  argv = vp.cluster_command(args, cell, '/tmp/r.jsonl')
  assert not [a for a in argv if a.startswith('--num_ps')]
  assert '--variable_update=auto' in argv
  assert '--scaling_profile=%s' % vp.profile_path(args, 'trivial') in argv
  picked = vp.predict(args, vp.load_profiles(args), cell)['auto']
  assert picked['num_ps'] in (0, 1) and picked['images_per_sec'] > 0


def _auto_record(measured, pick='collective_all_reduce', now=None):
  """An auto cell that ran `pick` (0 ps); `now`: the strategy a
  re-prediction picks (default: the same)."""
  cell = _cell(strategy='auto', ps=None)
  return {
    'cell': cell,
    'measured': measured,
    'measured_median': sorted(measured)[len(measured) // 2],
    'scored': True,
    'auto_pick': {
      'variable_update': pick,
      'all_reduce_spec': None,
      'cluster': '2x1 +0ps 100Mbit/s switch colocated',
    },
    'predicted': {
      'auto': {
        'variable_update': now or pick,
        'all_reduce_spec': None,
        'num_ps': 1 if now == 'parameter_server' else 0,
        'images_per_sec': 99.0,
      }
    },
  }


def test_auto_regret_against_the_groups_measured_best():
  records = [
    _record('parameter_server', [100, 100, 100], 110, 50),
    _record('collective_all_reduce', [200, 200, 200], 180, 300),
    _auto_record([190, 190, 190]),  # 5% below the best
  ]
  (row,) = va.scores(records)
  assert row['regret'] == pytest.approx(0.05)
  assert row['best'][1] == 200
  # auto cells are not in the model's error or ranking.
  assert vm.summarize(records, 'model')['cells'] == 2
  md = '\n'.join(va.markdown_rows(records))
  assert (
    'Within 5% of the measured best: 1 of 1 groups by the auto runs; '
    '1 of 1 by the regret of the pick.'
  ) in md
  assert '| collective_all_reduce | 99.0 | 190.0 (0%) |' in md


def test_an_auto_trials_cell_runs_the_launchers_trials_and_counts_apart(
  tmp_path,
):
  args = _args(tmp_path, '--strategies=auto,auto_trials', '--num_batches=7')
  cells = vp.grid(args)
  (trials_cell,) = [c for c in cells if c['strategy'] == 'auto_trials']
  assert trials_cell['num_ps'] is None
  argv = vp.cluster_command(args, trials_cell, '/tmp/r.jsonl')
  own = argv[: argv.index('--')]
  assert '--auto_trials=%d' % va.TRIALS in own
  assert '--auto_trial_batches=7' in own
  assert '--variable_update=auto' in argv[argv.index('--') :]
  (plain,) = [c for c in cells if c['strategy'] == 'auto']
  assert not [a for a in vp.cluster_command(args, plain, 'r') if 'trials' in a]
  tried = _auto_record([150, 150, 150], pick='parameter_server')
  tried['cell'] = dict(tried['cell'], strategy='auto_trials')
  tried['auto_pick']['cluster'] = '2x1 +1ps 100Mbit/s switch colocated'
  records = [
    _record('parameter_server', [100, 100, 100], 110, 50),
    _record('collective_all_reduce', [200, 200, 200], 180, 300),
    _auto_record([190, 190, 190]),
    tried,
  ]
  rows = va.scores(records)
  assert [r['kind'] for r in rows] == ['auto', 'auto_trials']
  assert rows[1]['now'] is None  # a measured pick is not re-predicted
  assert rows[1]['pick_regret'] == pytest.approx(0.5)  # its ps cell: 100
  md = '\n'.join(va.markdown_rows(records))
  assert (
    'Within 5% of the measured best: 1 of 1 groups by the auto runs; '
    '1 of 1 by the regret of the pick.'
  ) in md
  assert (
    'Within 5% of the measured best with --auto_trials: 0 of 1 groups by '
    'the auto runs; 0 of 1 by the regret of the pick.'
  ) in md
  assert vm.summarize(records, 'model')['cells'] == 2
  tried['auto_picks'] = ['hybrid', 'parameter_server']  # each run's pick
  report = vr.markdown(records, [])
  assert '| auto_trials: ran hybrid, parameter_server |' in report
  assert '| auto: ran collective_all_reduce |' in report


def test_a_repredicted_pick_that_differs_is_shown_with_its_measurement():
  """auto ran collective_all_reduce; the current model picks
  parameter_server with 1 ps: the row names that pick, its cell's measured
  median and regret, and the predicted column no longer claims the figure
  for the pick that ran."""
  records = [
    _record('parameter_server', [100, 100, 100], 110, 50),
    _record('collective_all_reduce', [200, 200, 200], 180, 300),
    _auto_record([190, 190, 190], now='parameter_server'),
  ]
  (row,) = va.scores(records)
  assert row['now']['measured'] == 100 and row['predicted'] == {}
  md = '\n'.join(va.markdown_rows(records))
  assert '1 of 1 picks differ' in md and '0 of 1 are within 5%' in md
  assert va.current_pick_regret(row) == pytest.approx(0.5)
  assert (
    "The current model's picks, judged by the grid's cells where their "
    'strategy was measured: 0 of 1 within 5% of the best (0 within 5% or '
    "inside the best's repeats, which do not order them; left out, their "
    'new pick not measured: 0).'
  ) in md
  assert (
    '| collective_all_reduce | - | 190.0 (0%) | collective_all_reduce 1ps: '
    '200.0 | 5.0% | 5.0% | parameter_server 1ps: 99.0 predicted, '
    '100.0 measured (regret 50.0%) |'
  ) in md


def test_a_pick_with_a_grid_cell_is_judged_by_that_cell_too():
  """auto ran collective_all_reduce at 185 while the grid's own
  collective_all_reduce cell measured 200 (the machine drifted between the
  runs): the run's regret against the best (205) is 9.8%, the pick's, by
  its grid cell, 2.4%."""
  records = [
    _record('collective_all_reduce', [200, 200, 200], 180, 300, ps=0),
    _record('distributed_all_reduce', [205, 205, 205], 170, 300, ps=0),
    _auto_record([185, 185, 185]),
  ]
  (row,) = va.scores(records)
  assert row['regret'] == pytest.approx(20 / 205)
  assert row['pick_regret'] == pytest.approx(5 / 205)
  md = '\n'.join(va.markdown_rows(records))
  assert (
    'Within 5% of the measured best: 0 of 1 groups by the auto runs; '
    '1 of 1 by the regret of the pick.'
  ) in md
  assert '| 9.8% | 2.4% |' in md
  # The model still picks what ran: judged by that pick's grid cell.
  assert va.current_pick_regret(row) == pytest.approx(5 / 205)
  assert ': 1 of 1 within 5% of the best' in md


def test_a_changed_pick_without_a_cell_is_left_out_of_the_current_picks():
  records = [
    _record('collective_all_reduce', [200, 200, 200], 180, 300, ps=0),
    _auto_record([190, 190, 190], now='hybrid'),
  ]
  (row,) = va.scores(records)
  assert row['now']['measured'] is None
  assert va.current_pick_regret(row) is None
  md = '\n'.join(va.markdown_rows(records))
  assert ': 0 of 0 within 5% of the best (0 within 5% or inside' in md
  assert 'new pick not measured: 1).' in md


def test_a_pick_inside_the_bests_repeats_is_counted_as_tied():
  """auto ran hybrid (1 ps), 8% under the collective's median, but the
  two cells' repeats overlap: the grid does not order them."""
  records = [
    _record('collective_all_reduce', [190, 200, 240], 180, 300, ps=0),
    _record('hybrid', [170, 184, 195], 180, 300, ps=1),
    _auto_record([184, 184, 184], pick='hybrid'),
  ]
  records[-1]['auto_pick']['cluster'] = '2x1 +1ps 100Mbit/s switch colocated'
  records[-1]['predicted']['auto']['variable_update'] = 'hybrid'
  records[-1]['predicted']['auto']['num_ps'] = 1
  (row,) = va.scores(records)
  assert row['pick_regret'] == pytest.approx(0.08)
  assert row['tied'] is True
  md = '\n'.join(va.markdown_rows(records))
  assert ': 0 of 1 within 5% of the best (1 within 5% or inside' in md
  records[1]['measured'] = [170, 180, 189]  # below the best's lowest
  (row,) = va.scores(records)
  assert row['tied'] is False


def test_auto_faster_than_every_measured_cell_has_no_regret():
  records = [
    _record('parameter_server', [100, 100, 100], 110, 50),
    _auto_record([120, 121, 119], pick='distributed_all_reduce'),
  ]
  assert va.scores(records)[0]['regret'] == 0.0


def test_tau_ties_strategies_whose_repeats_overlap():
  records = [
    _record('a', [100, 101, 102], 120, 50),
    _record('b', [101, 102, 103], 110, 50),  # overlaps a: tied
    _record('c', [200, 200, 200], 300, 50),
  ]
  s = vm.summarize(records, 'model')
  # Pairs (a,b) tied in measured, (a,c) C, (b,c) C: 2 / sqrt(3 * 2).
  assert list(s['tau_by_group'].values()) == [pytest.approx(2 / math.sqrt(6))]
  # Strict: a < b measured but predicted a > b: (2 - 1) / 3.
  assert list(s['tau_strict_by_group'].values()) == [pytest.approx(1 / 3)]
  assert vm.repeats_overlap(records[0], records[1])
  assert not vm.repeats_overlap(records[0], records[2])


def test_a_group_measured_all_tied_is_left_out_of_mean_tau():
  tied = [
    _record('a', [100, 101, 102], 120, 50),
    _record('b', [101, 102, 103], 110, 50),  # overlaps a: nothing to order
  ]
  ordered = [
    _record('c', [100, 100, 100], 110, 60, link=100.0),
    _record('d', [200, 200, 200], 180, 60, link=100.0),  # paleo ties c, d
  ]
  model = vm.summarize(tied + ordered, 'model')
  assert model['tau_groups'] == 1 and model['mean_tau'] == 1.0
  # An all-tied prediction of an ordered group still counts as 0.
  paleo = vm.summarize(tied + ordered, 'paleo')
  assert paleo['tau_groups'] == 1 and paleo['mean_tau'] == 0.0


def test_one_configuration_on_two_machines_is_two_groups():
  """Pooled grids: the same cells measured on two CPUs are two clusters,
  each with its own best (here each machine's a is its best: regret 0;
  grouped together, b's 200 would be the best and the pick a's 100 and
  110 would lose 45-50%)."""
  epyc = [_record('a', [100] * 3, 120, 50), _record('b', [90] * 3, 110, 50)]
  xeon = [_record('a', [210] * 3, 220, 50), _record('b', [200] * 3, 210, 50)]
  for r in epyc:
    r['machine'] = 'AMD EPYC, 2 cores, avx2'
  for r in xeon:
    r['machine'] = 'Intel(R) Xeon(R) Processor, 2 cores, avx512f'
  model = vm.summarize(epyc + xeon, 'model')
  assert model['groups'] == 2
  assert list(model['regret_by_group'].values()) == [0.0, 0.0]
  keys = sorted(vm.groups(epyc + xeon))
  assert vm.several_sources(keys) and not vm.several_sources(keys[:1])
  xeon_text = 'trivial 2w 25Mbit/s shared, on Intel(R) Xeon(R) Processor'
  assert vm.group_text(keys[1], machine=True) == xeon_text
  assert vm.group_text(keys[1]) == 'trivial 2w 25Mbit/s shared'


def test_pooled_grids_rank_each_cluster_within_its_own_grid(tmp_path):
  """--pool: the same cluster measured in two grids (two days, two paces
  of the machine) is two groups. Each day the model ranks a over b
  rightly (regret 0); in one group, day 1's a (predicted 120, measured
  100) would be the pick against day 2's b at 200: a 52% regret."""
  day1 = [_record('a', [100] * 3, 120, 50), _record('b', [90] * 3, 110, 50)]
  day2 = [_record('a', [210] * 3, 115, 50), _record('b', [200] * 3, 105, 50)]
  for name, records in (('day1', day1), ('day2', day2)):
    vp.write_records(str(tmp_path / ('%s.jsonl' % name)), records)
  merged = vm.summarize(day1 + day2, 'model')
  assert merged['groups'] == 1
  assert list(merged['regret_by_group'].values()) == [pytest.approx(110 / 210)]
  files = ','.join(str(tmp_path / n) for n in ('day1.jsonl', 'day2.jsonl'))
  out = tmp_path / 'pool'
  argv = ['--report_only', '--pool=%s' % files, '--out_prefix=%s' % out]
  assert vp.main(argv) == 0
  pooled = vp.read_records(str(out) + '.jsonl')
  assert [r['set'] for r in pooled] == ['day1', 'day1', 'day2', 'day2']
  model = vm.summarize(pooled, 'model')
  assert model['groups'] == 2
  assert list(model['regret_by_group'].values()) == [0.0, 0.0]
  md = (tmp_path / 'pool.md').read_text()
  assert 'trivial 2w 25Mbit/s shared [day2]' in md
  # A pool of pools keeps each record's own set.
  again = tmp_path / 'again'
  argv = ['--report_only', '--pool=%s.jsonl' % out, '--out_prefix=%s' % again]
  assert vp.main(argv) == 0
  assert [r['set'] for r in vp.read_records(str(again) + '.jsonl')][-1] == (
    'day2'
  )


@pytest.mark.parametrize(
  'argv,said',
  [
    (['--pool=a.jsonl'], 'only with --report_only'),
    (['--report_only', '--repredict', '--pool=a.jsonl'], 'without --repredict'),
    (['--report_only', '--pool=/nonexistent/a.jsonl'], 'no file'),
  ],
)
def test_bad_pool_is_one_line_exit_2(argv, said, capsys, tmp_path):
  assert vp.main([*argv, '--out_prefix=%s' % (tmp_path / 'v')]) == 2
  err = capsys.readouterr().err
  assert err.count('\n') == 1 and '--pool' in err and said in err


def test_records_and_report_name_the_machine(tmp_path):
  """Figures carry where they were measured: the CPU model, cores and the
  flags that change its speed, in every record and the md's header."""
  records = vp.run_grid(
    _args(tmp_path), run=lambda a, c: 50.0, out=io.StringIO()
  )
  machine = vp.machine_text()
  assert records[0]['machine'] == machine
  assert '%d cores' % (vp.os.cpu_count() or 0) in machine
  md = (tmp_path / 'v.md').read_text()
  assert '- Machine: %s.' % machine in md
  # Records from before the field: said so, not guessed.
  del records[0]['machine'], records[1]['machine']
  lines = vp.header_lines(records, _args(tmp_path))
  assert '- Machine: not in the records (before 2026-11-27).' in lines


def test_switch_cells_are_predicted_with_the_pools_they_ran_with(tmp_path):
  # New cells: the launcher's tasks split the cores on switch ports too;
  # older switch cells (no split_cores) ran TensorFlow's pools per task.
  args = _args(
    tmp_path,
    '--topologies=switch',
    '--link_mbits=none',
    '--strategies=collective_all_reduce',
  )
  (cell,) = vp.grid(args)
  assert cell['split_cores'] is True
  older = {k: v for k, v in cell.items() if k != 'split_cores'}
  assert va.pools_overrides(cell) == {'tasks_colocated': True}
  assert va.pools_overrides(older)['cluster_threads'] == 'tf_default'
  assert vm.split_cores(dict(older, topology='shared'))
  assert vm.group_key(cell) != vm.group_key(older)  # other clusters
  assert vm.group_text(vm.group_key(older)).endswith('switch, full pools')
  profiles = vp.load_profiles(args)
  split = vp.predict(args, profiles, cell)['model']['images_per_sec']
  full = vp.predict(args, profiles, older)['model']['images_per_sec']
  assert split != full


def test_strategy_bias_takes_out_the_groups_mean():
  """Errors +10%, +20%, +30% in one group: the group is 20% over, and
  against it the strategies are -10, 0 and +10 points."""
  records = [
    _record('a', [100, 100, 100], 110, 1),
    _record('b', [100, 100, 100], 120, 1),
    _record('c', [100, 100, 100], 130, 1),
    _record('d', [100, 100, 100], 140, 1, link=100.0),  # a group of one
  ]
  bias = vm.strategy_bias(records)
  assert bias == {
    ('a', 'shared', 2): [pytest.approx(-10.0)],
    ('b', 'shared', 2): [pytest.approx(0.0)],
    ('c', 'shared', 2): [pytest.approx(10.0)],
  }
  assert vm.strategy_bias(records[:2]) == {}  # fewer than three strategies
  report = vp.vr.markdown(records, [])
  assert '| c | shared | 2 | 1 | +10.0 | +10.0 |' in report
