"""`auto` cells of lab/scripts/validate_predictor.py: --variable_update=auto run
for real, scored by what its pick measured against the group's best.

An `auto` cell runs the launcher with --variable_update=auto and the model's
profile (--scaling_profile) and no --num_ps: the launcher predicts every
strategy and cluster shape it may start (scaling/auto/auto_launch.py), starts
the best and runs it. Its record keeps the pick (`auto_pick`: the strategy, spec
and ps tasks the launcher ran, from the results line's `prediction`) next to
what it measured. Its score is the pick's regret: the share of the group's best
measured strategy (the other cells of the same model, workers, link and
topology) that running auto's pick lost; a pick faster than every measured cell
has none. Needs TensorFlow (the launcher's own ranking code).
"""

from __future__ import annotations

import re
import statistics

from lab.scripts import validation_metrics as vm

# auto, and an auto cell whose launcher measures its close calls first
# (launch_local_cluster.py --auto_trials=TRIALS).
KINDS = AUTO, AUTO_TRIALS = vm.AUTO_STRATEGIES
TRIALS = 3
WITHIN = 0.05  # issue 31: auto's pick within 5% of the measured best


def is_auto(cell: dict) -> bool:
  """True for a cell that runs --variable_update=auto (with or without
  trials)."""
  return cell['strategy'] in KINDS


def launcher_flags(cell: dict) -> list:
  """The launcher's own flags of an auto cell: its trials, as long as the
  cell's timed steps, for an auto_trials cell."""
  if cell['strategy'] != AUTO_TRIALS:
    return []
  return [
    '--auto_trials=%d' % TRIALS,
    '--auto_trial_batches=%d' % cell['num_batches'],
  ]


def pools_overrides(cell: dict) -> dict:
  """The flags (as overrides) that size the pools `cell` ran with: every
  task of the cluster colocated, or TensorFlow's pools for older switch
  cells (split_cores)."""
  if vm.split_cores(cell):
    return {'tasks_colocated': True}
  return {'tasks_colocated': True, 'cluster_threads': 'tf_default'}


def predict(profile_file: str, task_flags: list, cell: dict) -> dict:
  """{'auto': {...}}: what the launcher will pick for `cell` (its ranking
  over the shapes it may start, from the same profile and link)."""
  from tf_cnn_benchmarks.scaling.auto import auto_launch

  extra = ['--scaling_profile=' + profile_file]
  for name, value in pools_overrides(cell).items():
    extra.append('--%s=%s' % (name, str(value).lower()))
  shape, rate = auto_launch.link_flags(
    task_flags, cell['link_mbits'], cell['topology']
  )
  overrides = auto_launch.overrides_from_argv(task_flags + extra + shape + rate)
  num_ps, _, best = auto_launch.best_shape(overrides, cell['num_workers'])
  return {
    AUTO: {
      'variable_update': best.strategy.variable_update,
      'all_reduce_spec': best.strategy.all_reduce_spec,
      'num_ps': num_ps,
      'images_per_sec': round(best.images_per_sec, 3),
      'low': round(best.low, 3),
      'high': round(best.high, 3),
    }
  }


def pick_of(result: dict) -> dict:
  """The strategy the run's results line says auto ran."""
  pred = result.get('prediction') or {}
  return {
    'variable_update': pred.get('variable_update'),
    'all_reduce_spec': pred.get('all_reduce_spec'),
    'cluster': pred.get('cluster'),
  }


def pick_text(pick) -> str:
  """'collective_all_reduce' or 'distributed_all_reduce (xring)'."""
  if not pick or not pick.get('variable_update'):
    return '-'
  spec = pick.get('all_reduce_spec')
  return pick['variable_update'] + (' (%s)' % spec if spec else '')


def _ps_of(pick) -> int | None:
  """The ps tasks of a pick: its num_ps, or the '+Nps' of its cluster text."""
  if pick.get('num_ps') is not None:
    return pick['num_ps']
  found = re.search(r'\+(\d+)ps', pick.get('cluster') or '')
  return int(found.group(1)) if found else None


def same_pick(ran, now) -> bool:
  """Whether two picks are the same strategy, spec and ps tasks."""
  key = lambda p: (p.get('variable_update'), p.get('all_reduce_spec'))  # noqa: E731
  return key(ran) == key(now) and _ps_of(ran) == _ps_of(now)


def _cell_record(records, group, pick):
  """The group's measured record of the cell that runs `pick` (the grid's
  cells run each manager's default spec), or None."""
  if pick.get('all_reduce_spec'):
    return None
  for r in records:
    c = r['cell']
    if (
      not is_auto(c)
      and r.get('measured')
      and vm.record_group(r) == group
      and c['strategy'] == pick.get('variable_update')
      and c['num_ps'] == _ps_of(pick)
    ):
      return r
  return None


def _measured_cell(records, group, pick):
  """The measured median of the group's cell that runs `pick`, or None."""
  r = _cell_record(records, group, pick)
  return None if r is None else r['measured_median']


def _tied_with_best(records, group, pick, best) -> bool:
  """Whether the repeats of the pick's cell and of the best's overlap
  ([min, max]): the grid's measurement does not order the two (the rule
  Kendall's tau uses for the measured order, _validation_metrics.py)."""
  mine = _cell_record(records, group, pick)
  if mine is None or best is None:
    return False
  theirs = _cell_record(
    records, group, {'variable_update': best[0]['strategy'],
                     'num_ps': best[0]['num_ps']}
  )  # fmt: skip
  if theirs is None:
    return False
  a, b = mine['measured'], theirs['measured']
  return min(a) <= max(b) and min(b) <= max(a)


def scores(records) -> list:
  """One row per auto cell with repeats: its group, pick, measured median,
  the group's best measured strategy, and the regret (0-1; None when the
  group has no other measured cell). Cells of any spread count here, with
  their spread shown: auto's pick is judged, not the model's error."""
  best_of = {}
  for r in records:
    if is_auto(r['cell']) or not r.get('measured'):
      continue
    key = vm.record_group(r)
    if key not in best_of or r['measured_median'] > best_of[key][1]:
      best_of[key] = (r['cell'], r['measured_median'])
  rows = []
  for r in records:
    if not is_auto(r['cell']) or not r.get('measured'):
      continue
    # A constant was chosen on these groups: they judge no pick.
    if vm.is_calibration_cell(r['cell']):
      continue
    key = vm.record_group(r)
    best = best_of.get(key)
    median = statistics.median(r['measured'])
    regret = None if best is None else max(0.0, (best[1] - median) / best[1])
    pick = r.get('auto_pick') or {}
    predicted = (r.get('predicted') or {}).get(AUTO, {})
    now = None  # a re-prediction (--repredict) that picks another strategy
    # (a pick made by trials is measured, not predicted: no re-prediction)
    trials = r['cell']['strategy'] == AUTO_TRIALS
    if predicted and pick and not trials and not same_pick(pick, predicted):
      now = dict(predicted, measured=_measured_cell(records, key, predicted))
    rows.append(
      {
        'kind': r['cell']['strategy'],
        'group': key,
        'pick': pick,
        'predicted': {} if now else predicted,
        'now': now,
        'measured_median': median,
        'spread': vm.spread(r['measured']),
        'best': best,
        'regret': regret,
        'pick_regret': _pick_regret(records, key, pick, best, regret),
        'tied': _tied_with_best(records, key, now or pick, best),
      }
    )
  return rows


def _pick_regret(records, group, pick, best, regret):
  """The pick's regret judged by the grid's own cell of the same strategy
  (and ps tasks) where the group has one, else `regret` (the auto run's).

  The auto run and the grid's cells are separate runs, minutes or hours
  apart: the same strategy measured twice differs by the machine's drift
  (up to 6% on the second grid). Judging the pick by its grid cell compares
  it with the best under the same conditions: how good the choice was.
  """
  if best is None:
    return None
  mine = _measured_cell(records, group, pick)
  if mine is None:
    return regret
  return max(0.0, (best[1] - mine) / best[1])


def _pct(share) -> str:
  return '-' if share is None else '%.1f%%' % (100 * share)


def _best_text(best) -> str:
  if best is None:
    return '-'
  cell, median = best
  return '%s %dps: %.1f' % (cell['strategy'], cell['num_ps'], median)


def _now_text(row) -> str:
  """The re-predicted pick where it differs from the one that ran: its
  prediction, what its cell measured and its regret ('-' when the same)."""
  now = row['now']
  if not now:
    return '-'
  text = '%s %dps: %.1f predicted' % (
    pick_text(now),
    _ps_of(now) or 0,
    now['images_per_sec'],
  )
  if now['measured'] is None:
    return text + ', not measured'
  return text + ', %.1f measured (regret %.1f%%)' % (
    now['measured'],
    100 * _now_regret(row),
  )


def current_pick_regret(row):
  """The regret of the pick the current model makes for the row's group:
  the pick that ran (judged by its grid cell, pick_regret) when the model
  still picks it; the changed pick's grid cell otherwise (None where that
  pick has no measured cell, or the group no best)."""
  now = row['now']
  if not now:
    return row['pick_regret']
  if now['measured'] is None or not row['best']:
    return None
  return _now_regret(row)


def _now_regret(row) -> float:
  """The changed pick's measured cell against the group's best (itself
  when the group has no other measured cell)."""
  now = row['now']
  best = row['best'][1] if row['best'] else now['measured']
  return max(0.0, (best - now['measured']) / best)


def _current_picks_line(rows) -> str:
  """How the current model's picks fare where the grid measured them."""
  regrets = [(current_pick_regret(r), r['tied']) for r in rows]
  judged = [(g, tied) for g, tied in regrets if g is not None]
  return (
    "The current model's picks, judged by the grid's cells where their "
    'strategy was measured: %d of %d within 5%% of the best (%d within 5%% '
    "or inside the best's repeats, which do not order them; left out, "
    'their new pick not measured: %d).'
    % (
      sum(g <= WITHIN for g, _ in judged),
      len(judged),
      sum(g <= WITHIN or tied for g, tied in judged),
      len(regrets) - len(judged),
    )
  )


def _changed_picks_line(rows) -> str:
  """How many picks a re-prediction changes, and how those measured."""
  changed = [r for r in rows if r['now']]
  if not changed:
    return 'Re-predicted by the current model, every pick is the same.'
  measured = [r for r in changed if r['now']['measured'] is not None]
  within = [
    r
    for r in measured
    if r['best'] and r['now']['measured'] >= (1 - WITHIN) * r['best'][1]
  ]
  return (
    'Re-predicted by the current model (`--repredict`), %d of %d picks '
    'differ ("picks now"); of those with a measured cell, %d of %d are '
    'within 5%% of the best.'
    % (len(changed), len(rows), len(within), len(measured))
  )


def _within_lines(rows) -> list:
  """'Within 5% of the measured best: ...' for each kind of auto cell."""
  out = []
  for kind in KINDS:
    judged = [r for r in rows if r['kind'] == kind and r['regret'] is not None]
    if not judged and kind != AUTO:
      continue
    within = [r for r in judged if r['regret'] <= WITHIN]
    picked = [r for r in judged if r['pick_regret'] <= WITHIN]
    out.append(
      'Within 5%% of the measured best%s: %d of %d groups by the auto runs; '
      '%d of %d by the regret of the pick.'
      % (
        '' if kind == AUTO else ' with --auto_trials',
        len(within),
        len(judged),
        len(picked),
        len(judged),
      )
    )
  return out


def markdown_rows(records) -> list:
  """The auto section of the report ([] when the grid has no auto cell)."""
  rows = scores(records)
  if not rows:
    return []
  out = [
    '## --variable_update=auto: its pick against the measured best',
    '',
    'Each `auto` cell ran the launcher with --variable_update=auto and the',
    "model's profile: it picked a strategy and cluster shape, then ran it.",
    'Regret: the share of the best measured strategy of the same group',
    'lost by running the pick (0 when the pick ran faster than all).',
    'Regret of the pick: the same, with the pick measured by the',
    "group's own cell of that strategy where the grid has one (the same",
    "strategy run at another time differs by the machine's drift); the",
    "auto run's figure where it has none.",
    'An `auto_trials` cell ran the launcher with --auto_trials=%d: the'
    % TRIALS,
    'close calls measured briefly, the fastest run.',
    *_within_lines(rows),
    _changed_picks_line([r for r in rows if r['kind'] == AUTO]),
    _current_picks_line([r for r in rows if r['kind'] == AUTO]),
    '',
    '| group | auto ran | predicted | measured median (spread) '
    '| best measured | regret | regret of the pick | picks now |',
    '|---|---|---:|---:|---|---:|---:|---|',
  ]
  pooled = vm.several_sources([r['group'] for r in rows])
  for r in rows:
    out.append(
      '| %s | %s | %s | %.1f (%.0f%%) | %s | %s | %s | %s |'
      % (
        vm.group_text(r['group'], pooled),
        pick_text(r['pick'])
        + (' (trials)' if r['kind'] == AUTO_TRIALS else ''),
        '%.1f' % r['predicted']['images_per_sec'] if r['predicted'] else '-',
        r['measured_median'],
        100 * r['spread'],
        _best_text(r['best']),
        _pct(r['regret']),
        _pct(r['pick_regret']),
        _now_text(r),
      )
    )
  return out + ['']
