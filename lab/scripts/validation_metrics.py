"""Scoring rules and metrics of lab/scripts/validate_predictor.py (no TF).

A cell is one cluster (model, workers, ps, link, topology) run with one
strategy; its record holds the measured repeats and the predictions. The
metrics here compare predicted images/sec with the measured median:

- absolute error, as % of the measured median, its median and its 90th
  percentile (linear interpolation between the closest ranks);
- top-1 regret per group (cells of one model, worker count, link and
  topology): the share of the measured best's throughput lost by running the
  strategy predicted best instead;
- Kendall's tau-b between the predicted and the measured order of a group's
  strategies (ties count for neither side; None when one side is all ties,
  counted as 0 in the mean over groups). Two strategies whose repeats
  overlap (one's [min, max] meets the other's) are tied in the measured
  order: the measurement does not say which is faster, so neither order of
  the prediction is wrong; a group whose measured strategies all tie so
  has no order to check and is left out of the mean. The strict tau
  (every measured median ordered, however close) is kept beside it.
"""

from __future__ import annotations

import math
import statistics

MAX_SPREAD = 0.10  # (max - min) / median of the repeats; above: not scored
MIN_REPEATS = 3
# The cells latency_cpu_fraction was chosen on (cost_model_calibration.py:
# resnet20 and lenet, 2 colocated workers x 1 tower, unthrottled loopback).
CALIBRATION_MODELS = ('resnet20', 'lenet')
CALIBRATION_WORKERS = 2
CALIBRATION_RULE = (
  'cells of model %s with %d workers on an unthrottled link (any topology, '
  'any strategy) are not scored: latency_cpu_fraction was chosen on them '
  '(tf_cnn_benchmarks/scaling/model/cost_model_calibration.py)'
  % ('/'.join(CALIBRATION_MODELS), CALIBRATION_WORKERS)
)
PREDICTORS = ('model', 'paleo', 'daydream')


# The --variable_update=auto cells (without and with the launcher's
# trials): judged by their pick (_validation_auto.py), not scored here.
AUTO_STRATEGIES = ('auto', 'auto_trials')


def spread(values) -> float:
  """(max - min) / median of `values` (0 for one value)."""
  med = statistics.median(values)
  return (max(values) - min(values)) / med if med else math.inf


def is_calibration_cell(cell: dict) -> bool:
  """True for a cell a calibration constant was chosen on (CALIBRATION_RULE)."""
  return (
    cell['model'] in CALIBRATION_MODELS
    and cell['num_workers'] == CALIBRATION_WORKERS
    and cell['link_mbits'] is None
  )


def unscored_reason(cell: dict, measured) -> str | None:
  """Why a cell with these measured repeats is not scored, or None."""
  if is_calibration_cell(cell):
    return 'calibration cell (a constant was chosen on it)'
  if not measured:
    return 'no measurement'
  if len(measured) < MIN_REPEATS:
    return 'fewer than %d repeats' % MIN_REPEATS
  s = spread(measured)
  if s > MAX_SPREAD:
    return 'spread %.1f%% > %.0f%%' % (100 * s, 100 * MAX_SPREAD)
  return None


def percentile(values, q) -> float:
  """The q-th percentile (0-100) by linear interpolation between ranks."""
  ordered = sorted(values)
  if not ordered:
    raise ValueError('percentile of no values')
  pos = (len(ordered) - 1) * q / 100.0
  low = math.floor(pos)
  high = min(low + 1, len(ordered) - 1)
  return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def abs_error_pct(predicted: float, measured: float) -> float:
  """|predicted - measured| / measured, in %."""
  return 100.0 * abs(predicted - measured) / measured


def kendall_tau_b(xs, ys, y_tied=None):
  """Kendall's tau-b of paired values; None when undefined (all tied).

  y_tied(i, j): True when ys[i] and ys[j] count as tied though they differ
  (measured figures the repeats cannot tell apart)."""
  if len(xs) != len(ys):
    raise ValueError('kendall_tau_b: lengths differ')
  concordant = discordant = tied_x = tied_y = 0
  n = len(xs)
  for i in range(n):
    for j in range(i + 1, n):
      dx = xs[i] - xs[j]
      dy = 0 if y_tied and y_tied(i, j) else ys[i] - ys[j]
      if dx == 0 and dy == 0:
        tied_x += 1
        tied_y += 1
      elif dx == 0:
        tied_x += 1
      elif dy == 0:
        tied_y += 1
      elif (dx > 0) == (dy > 0):
        concordant += 1
      else:
        discordant += 1
  pairs = n * (n - 1) // 2
  denominator = math.sqrt((pairs - tied_x) * (pairs - tied_y))
  if denominator == 0:
    return None
  return (concordant - discordant) / denominator


def repeats_overlap(a: dict, b: dict) -> bool:
  """True when the repeats of records a and b overlap ([min, max] ranges):
  the measurement does not order them."""
  return min(a['measured']) <= max(b['measured']) and min(b['measured']) <= max(
    a['measured']
  )


def _all_pairs(n, tied) -> bool:
  """True when tied(i, j) holds for every pair of n items."""
  return all(tied(i, j) for i in range(n) for j in range(i + 1, n))


def _overlap_of(members):
  """y_tied for kendall_tau_b: the repeats of members i and j overlap."""
  return lambda i, j: repeats_overlap(members[i], members[j])


def top1_regret(predicted, measured) -> float:
  """Share (0-1) of the measured best lost by taking the predicted best.

  A tie for the predicted best takes the worse measured of the tied ones
  (the predictor did not choose).
  """
  top = max(predicted)
  chosen = min(m for p, m in zip(predicted, measured) if p == top)
  best = max(measured)
  return (best - chosen) / best


def split_cores(cell: dict) -> bool:
  """Whether the cell's tasks split this machine's cores among them (the
  launcher's --tasks_colocated=true, in the cells that say so); older
  cells on switch ports ran every task with TensorFlow's pools for all the
  cores (their addresses differ), on one shared link they split them."""
  return cell.get('split_cores', cell['topology'] == 'shared')


def group_key(cell: dict) -> tuple:
  """Cells of one group: same model, worker count, link, topology and
  thread pools (split_cores: cells from before and after the launcher
  split the cores on switch ports are different clusters)."""
  link = cell['link_mbits']
  return (
    cell['model'],
    cell['num_workers'],
    -1.0 if link is None else float(link),
    cell['topology'],
    split_cores(cell),
  )


def record_group(record) -> tuple:
  """The group of a record: its cell's group_key, the machine it ran on
  (one configuration measured on two CPUs is two clusters) and its set,
  the grid it was measured in (a pooled report, --pool: the same cluster
  measured on two days is two groups, each ranked at its own day's pace)."""
  machine = record.get('machine') or ''
  return group_key(record['cell']) + (machine, record.get('set') or '')


def group_text(key, machine: bool = False) -> str:
  """'lenet 2w 100Mbit/s shared' ('switch, full pools': a switch group
  whose tasks each kept TensorFlow's pools; `machine`: and ', on <CPU>'
  and its set in brackets, for reports that pool several machines or
  grids)."""
  model, workers, link, topology, split = key[:5]
  where = ''
  if machine and key[5:] and key[5]:
    where = ', on %s' % key[5].split(',')[0]
  if machine and key[6:] and key[6]:
    where += ' [%s]' % key[6]
  return '%s %dw %s %s%s%s' % (
    model,
    workers,
    'unthrottled' if link < 0 else '%gMbit/s' % link,
    topology,
    '' if split else ', full pools',
    where,
  )


def several_sources(keys) -> bool:
  """Whether record_group keys name more than one machine or set."""
  return len({k[5:] for k in keys if k[5:]}) > 1


def _prediction(record, predictor):
  return record['predicted'][predictor]['images_per_sec']


def counted(record, noisy: bool = False) -> bool:
  """True if `record` counts: scored; with `noisy` also a cell not scored
  only for its spread (still never a calibration or failed cell)."""
  if record['cell']['strategy'] in AUTO_STRATEGIES:  # judged by its pick
    return False
  if record.get('scored'):
    return True
  reason = record.get('unscored_reason', '')
  return noisy and reason.startswith('spread ') and 'predicted' in record


def groups(records, noisy: bool = False) -> dict:
  """{group key: [records]} of the counted records, groups of >= 2 only."""
  out = {}
  for r in records:
    if counted(r, noisy):
      out.setdefault(record_group(r), []).append(r)
  return {k: v for k, v in out.items() if len(v) >= 2}


def summarize(records, predictor: str, noisy: bool = False) -> dict:
  """The figures of one predictor over the scored records (`noisy`: and
  the cells not scored only for their spread, see counted())."""
  scored = [r for r in records if counted(r, noisy)]
  errors = [
    abs_error_pct(_prediction(r, predictor), r['measured_median'])
    for r in scored
  ]
  regrets, taus, strict = {}, {}, {}
  taus_or_zero, strict_or_zero = [], []
  for key, members in sorted(groups(records, noisy).items()):
    pred = [_prediction(r, predictor) for r in members]
    meas = [r['measured_median'] for r in members]
    regrets[key] = top1_regret(pred, meas)
    strict[key] = kendall_tau_b(pred, meas)
    overlap = _overlap_of(members)
    taus[key] = kendall_tau_b(pred, meas, overlap)
    # A predictor that ties every strategy of a group ranks nothing: its
    # undefined tau counts as 0 in the mean, not left out (which would
    # favour the baselines, whose ps-held strategies always tie). A group
    # whose measured strategies all tie orders nothing to check: left out.
    if not _all_pairs(len(members), overlap):
      taus_or_zero.append(taus[key] or 0.0)
    strict_or_zero.append(strict[key] or 0.0)
  within = [g for g in regrets.values() if g <= 0.05]
  return {
    'cells': len(scored),
    'median_abs_error_pct': statistics.median(errors) if errors else None,
    'p90_abs_error_pct': percentile(errors, 90) if errors else None,
    'regret_by_group': regrets,
    'tau_by_group': taus,
    'groups': len(regrets),
    'groups_regret_within_5pct': len(within),
    'tau_groups': len(taus_or_zero),
    'mean_tau': statistics.mean(taus_or_zero) if taus_or_zero else None,
    'tau_strict_by_group': strict,
    'mean_tau_strict': (
      statistics.mean(strict_or_zero) if strict_or_zero else None
    ),
  }


def strategy_bias(records, predictor: str = 'model', min_group: int = 3):
  """{(strategy, topology, workers): [points]}: each scored cell's signed
  error (predicted / measured - 1, in %) less the mean of its group's, in
  groups of at least `min_group` scored strategies.

  Taking the group's mean out leaves what the predictor gets wrong about
  one strategy against the others of the same cluster, not the profile's
  compute against the machine's pace on the day (which moves a whole
  group together).
  """
  out = {}
  for members in groups(records).values():
    if len(members) < min_group:
      continue
    signed = [
      (_prediction(r, predictor) / r['measured_median'] - 1) * 100
      for r in members
    ]
    mean = statistics.mean(signed)
    for r, error in zip(members, signed):
      c = r['cell']
      key = (c['strategy'], c['topology'], c['num_workers'])
      out.setdefault(key, []).append(error - mean)
  return out
