#!/usr/bin/env python3
"""Choose the cost model's latency_cpu_fraction on the calibration cells.

  python -m lab.scripts.choose_latency_cpu_fraction \\
      --measured=lab/results/latency_cpu_fraction_cells.json \\
      [--profile_dir=lab/results/profiles/epyc_avx2]
      [--fractions=1,0.5,0.25,0.1,0]

The calibration cells are scripts/cluster_overhead.py's: each cluster
manager with 2 workers x 1 tower colocated on one host (unthrottled
loopback, plus a ps or a controller where the manager needs one) against
its local manager with 2 towers in one process. --measured holds their
measured ratios (cluster / local images/sec). For each candidate fraction
this predicts the same ratios from the profiles and prints them with their
mean absolute error; the fraction with the smallest error is the choice.
The validation grid leaves these cells out of its scored set
(validate_predictor.py), as nothing may be chosen on a cell it is scored on.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

from tf_cnn_benchmarks.platform import checkout
from tf_cnn_benchmarks.platform import json_input
from tf_cnn_benchmarks.scaling.model import cost_model
from tf_cnn_benchmarks.scaling.model import cost_model_calibration as cal_lib
from tf_cnn_benchmarks.scaling.model import profile_format as fmt
from tf_cnn_benchmarks.scaling.model import target as target_lib

REPO_ROOT = checkout.ROOT

# Cluster manager -> (ps tasks, the local strategy with the same reduction),
# as scripts/cluster_overhead.py pairs them.
PAIRS = {
  'parameter_server': (1, cost_model.Strategy('parameter_server')),
  'distributed_replicated': (1, cost_model.Strategy('replicated')),
  'distributed_all_reduce': (0, cost_model.Strategy('replicated')),
  'collective_all_reduce': (
    0,
    cost_model.Strategy('replicated', 'collective'),
  ),
  'hybrid': (1, cost_model.Strategy('replicated', 'collective')),
}


def parse_args(argv):
  """The script's options."""
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('--measured', required=True, help='JSON of measured cells')
  p.add_argument('--profile_dir', default='lab/results/profiles/epyc_avx2')
  p.add_argument('--fractions', default='1,0.5,0.25,0.1,0')
  p.add_argument('--workers', type=int, default=2)
  return p.parse_args(argv)


def with_fraction(fraction: float) -> cal_lib.Calibration:
  """The default calibration with latency_cpu_fraction = `fraction`."""
  constants = dict(cal_lib.default_calibration().constants)
  old = constants['latency_cpu_fraction']
  constants['latency_cpu_fraction'] = cal_lib.Constant(
    fraction, 'candidate', old.meaning
  )
  return cal_lib.Calibration(constants)


def profile_for(profile_dir: str, model: str):
  """The one profile of `model` in `profile_dir` (batch 32, CPU)."""
  found = sorted(
    glob.glob(os.path.join(profile_dir, model + '_*_b32_cpu.json'))
  )
  if len(found) != 1:
    raise SystemExit(
      'choose_latency_cpu_fraction.py: --profile_dir: want one %s profile '
      'in %s, found %d' % (model, profile_dir, len(found))
    )
  return fmt.load_profile(found[0])


def predicted_ratio(profile, manager: str, workers: int, cal) -> float:
  """Predicted cluster / local images/sec of one calibration cell."""
  num_ps, local_strategy = PAIRS[manager]
  cluster = target_lib.make_target(
    num_workers=workers, num_ps=num_ps, topology='shared', colocated=True
  )
  local = target_lib.make_target(num_workers=1, devices_per_worker=workers)
  there = cost_model.predict(
    profile, cluster, cost_model.Strategy(manager), cal
  )
  here = cost_model.predict(profile, local, local_strategy, cal)
  return there.images_per_sec / here.images_per_sec


def read_cells(path: str):
  """The cells of the --measured file, or None after one line on stderr."""
  try:
    data = json_input.load_file(path)
  except OSError as e:
    problem = 'cannot read: %s' % (e.strerror or e)
  except json_input.JsonInputError as e:
    problem = e.problem
  else:
    cells = data.get('cells') if isinstance(data, dict) else None
    if isinstance(cells, list) and all(isinstance(c, dict) for c in cells):
      return cells
    problem = 'want {"cells": [{"model", "manager", "ratio"}, ...]}'
  sys.stderr.write(
    'choose_latency_cpu_fraction.py: error: --measured %s: %s\n'
    % (path, problem)
  )
  return None


def main(argv=None) -> int:
  """Prints each fraction's predicted ratios and error; the best last."""
  args = parse_args(sys.argv[1:] if argv is None else argv)
  cells = read_cells(args.measured)
  if cells is None:
    return 2
  profiles = {
    c['model']: profile_for(args.profile_dir, c['model']) for c in cells
  }
  scores = []
  for fraction in [float(x) for x in args.fractions.split(',')]:
    cal = with_fraction(fraction)
    errors = []
    print('latency_cpu_fraction = %g' % fraction)
    for c in cells:
      ratio = predicted_ratio(
        profiles[c['model']], c['manager'], args.workers, cal
      )
      errors.append(abs(ratio - c['ratio']))
      print(
        '  %-9s %-24s measured %.3f  predicted %.3f'
        % (c['model'], c['manager'], c['ratio'], ratio)
      )
    mean = sum(errors) / len(errors)
    print('  mean absolute error of the ratio: %.3f' % mean)
    scores.append((mean, fraction))
  best = min(scores)
  print('chosen: latency_cpu_fraction = %g (mean error %.3f)' % best[::-1])
  return 0


if __name__ == '__main__':
  sys.exit(main())
