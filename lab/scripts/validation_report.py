"""The Markdown report of validate_predictor.py (from its records)."""

from __future__ import annotations

import statistics

from lab.scripts import validation_auto as va
from lab.scripts import validation_metrics as vm

TARGETS = (
  'median abs error <= 10%, p90 <= 25%, top-1 regret <= 5% in >= 90% of '
  "groups, Kendall's tau >= 0.8, both baselines worse"
)


def _fmt(value, pattern='%.1f'):
  return '-' if value is None else pattern % value


def _link(cell):
  link = cell['link_mbits']
  return 'none' if link is None else '%g' % link


def _picks_text(r) -> str:
  """What an auto cell ran: one name, or each run's when they differ."""
  picks = r.get('auto_picks') or []
  if len(set(picks)) > 1:
    return ', '.join(picks)
  return va.pick_text(r.get('auto_pick'))


def _cell_row(r) -> str:
  c = r['cell']
  p = r.get('predicted', {})
  model = p.get('model') or p.get(va.AUTO) or {}
  strategy = c['strategy']
  if va.is_auto(c):
    strategy = '%s: ran %s' % (c['strategy'], _picks_text(r))
  return '| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |' % (
    c['model'],
    c['num_workers'],
    '-' if c['num_ps'] is None else c['num_ps'],
    _link(c),
    c['topology'],
    strategy,
    ', '.join('%.1f' % v for v in r.get('measured', [])) or '-',
    _fmt(r.get('measured_median')),
    _fmt(model.get('images_per_sec')),
    '%s-%s' % (_fmt(model.get('low')), _fmt(model.get('high'))),
    '%s / %s'
    % (
      _fmt(p.get('paleo', {}).get('images_per_sec')),
      _fmt(p.get('daydream', {}).get('images_per_sec')),
    ),
    'yes' if r.get('scored') else r.get('unscored_reason', 'no'),
  )


def _summary_rows(records, noisy=False) -> list:
  rows = [
    '| predictor | scored cells | median abs error | p90 abs error '
    '| groups | regret <= 5% | mean tau | mean tau (strict) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
  ]
  for name in vm.PREDICTORS:
    s = vm.summarize(records, name, noisy)
    rows.append(
      '| %s | %d | %s | %s | %d | %s | %s | %s |'
      % (
        name,
        s['cells'],
        _fmt(s['median_abs_error_pct'], '%.1f%%'),
        _fmt(s['p90_abs_error_pct'], '%.1f%%'),
        s['groups'],
        '%d of %d' % (s['groups_regret_within_5pct'], s['groups']),
        _fmt(s['mean_tau'], '%.2f'),
        _fmt(s['mean_tau_strict'], '%.2f'),
      )
    )
  return rows


def _group_rows(records, noisy=False) -> list:
  sums = {name: vm.summarize(records, name, noisy) for name in vm.PREDICTORS}
  rows = [
    '| group | strategies | regret model | paleo | daydream '
    '| tau model | paleo | daydream |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
  ]
  grouped = vm.groups(records, noisy)
  pooled = vm.several_sources(grouped)
  for key, members in sorted(grouped.items()):
    regrets = [
      _fmt(100 * sums[n]['regret_by_group'][key], '%.1f%%')
      for n in vm.PREDICTORS
    ]
    taus = [_fmt(sums[n]['tau_by_group'][key], '%.2f') for n in vm.PREDICTORS]
    rows.append(
      '| %s | %d | %s | %s |'
      % (
        vm.group_text(key, pooled),
        len(members),
        ' | '.join(regrets),
        ' | '.join(taus),
      )
    )
  return rows


def _bias_rows(records) -> list:
  """The model's error on each strategy against its group's mean."""
  bias = vm.strategy_bias(records)
  if not bias:
    return []
  out = [
    '## The model per strategy, against its group',
    '',
    "Each scored cell's signed error less its group's mean (groups of",
    'three or more scored strategies), in points: what the model gets',
    'wrong about one strategy against the others of the same cluster,',
    "apart from the profile's pace against the machine's on the day.",
    '',
    '| strategy | topology | workers | cells | median | mean |',
    '|---|---|---:|---:|---:|---:|',
  ]
  for (strategy, topology, workers), points in sorted(bias.items()):
    out.append(
      '| %s | %s | %d | %d | %+.1f | %+.1f |'
      % (
        strategy,
        topology,
        workers,
        len(points),
        statistics.median(points),
        statistics.mean(points),
      )
    )
  return out + ['']


def markdown(records, header_lines) -> str:
  """The whole report: header, summary, groups, every cell."""
  out = ['# Predictor validation', '']
  out += header_lines
  out += ['', '## Summary (scored cells only)', '']
  out += _summary_rows(records)
  out += ['', 'Targets (issue 31): %s.' % TARGETS, '']
  out += ['## Groups (scored cells of one model, workers, link, topology)', '']
  out += _group_rows(records)
  out += [''] + _bias_rows(records)
  out += [
    '## Not the score: every measured cell but the calibration ones',
    '',
    'The same figures with the cells left out for their spread put back',
    '(their median against the prediction), to show what the noisy cells',
    'say; the targets are judged on the tables above.',
    '',
  ]
  out += _summary_rows(records, noisy=True)
  out += ['']
  out += _group_rows(records, noisy=True)
  out += [''] + va.markdown_rows(records)
  out += ['## Cells', '']
  out += [
    '| model | workers | ps | link Mbit/s | topology | strategy '
    '| measured images/sec | median | predicted | band | paleo / daydream '
    '| scored |',
    '|---|---:|---:|---:|---|---|---|---:|---:|---|---|---|',
  ]
  out += [_cell_row(r) for r in records]
  return '\n'.join(out) + '\n'
