#!/usr/bin/env python3
"""What a cluster on one host costs against one process with the same towers.

  python scripts/cluster_overhead.py [--models=lenet,resnet20]
      [--managers=parameter_server,...] [--workers=2] [--batch_size=32]
      [--num_batches=30] [--repeats=2] [--markdown]

For each model and cluster manager, runs the matching local manager in one
process with W towers (W = --workers), then the cluster with W workers of one
tower each on 127.0.0.1 (scripts/launch_local_cluster.py), alternating
A B A B (--repeats pairs), all with the same per-tower batch, so both run the
same global batch. Prints images/sec of each (the mean of its runs) and the
ratio cluster / local: 1.0 means the cluster costs nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCHER = os.path.join(REPO_ROOT, 'scripts', 'launch_local_cluster.py')

# Cluster manager -> (local manager flags with the same reduction, launcher
# flags).
PAIRS = {
  'parameter_server': (['--variable_update=parameter_server'], ['--num_ps=1']),
  'distributed_replicated': (['--variable_update=replicated'], ['--num_ps=1']),
  'distributed_all_reduce': (
    ['--variable_update=replicated'],
    ['--num_ps=0', '--controller'],
  ),
  'collective_all_reduce': (
    ['--variable_update=replicated', '--all_reduce_spec=collective'],
    ['--num_ps=0'],
  ),
  'hybrid': (
    ['--variable_update=replicated', '--all_reduce_spec=collective'],
    ['--num_ps=1'],
  ),
}
DATA_NAME = {'lenet': 'imagenet', 'trivial': 'cifar10'}


def parse_args(argv):
  """The script's options."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--models', default='lenet,resnet20')
  parser.add_argument('--managers', default=','.join(PAIRS))
  parser.add_argument('--workers', type=int, default=2)
  parser.add_argument('--batch_size', type=int, default=32)
  parser.add_argument('--num_batches', type=int, default=30)
  parser.add_argument('--num_warmup_batches', type=int, default=5)
  parser.add_argument('--repeats', type=int, default=2)
  parser.add_argument('--timeout', type=int, default=600)
  parser.add_argument('--markdown', action='store_true')
  args = parser.parse_args(argv)
  unknown = set(args.managers.split(',')) - set(PAIRS)
  if unknown:
    parser.error(
      '--managers: unknown %s; one of %s'
      % (', '.join(sorted(unknown)), ', '.join(PAIRS))
    )
  return args


def _common_flags(args, model):
  return [
    '--device=cpu',
    '--model=%s' % model,
    '--data_name=%s' % DATA_NAME.get(model, 'cifar10'),
    '--batch_size=%d' % args.batch_size,
    '--num_batches=%d' % args.num_batches,
    '--num_warmup_batches=%d' % args.num_warmup_batches,
    '--display_every=1000',
    '--peak_tflops_per_device=none',
  ]


def _images_per_sec(argv, result_file, timeout) -> float:
  """Runs one benchmark command; images/sec of its results line."""
  if os.path.exists(result_file):
    os.remove(result_file)
  proc = subprocess.run(
    argv + ['--result_file=%s' % result_file],
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=timeout,
  )
  if proc.returncode != 0 or not os.path.exists(result_file):
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
    raise RuntimeError('%s failed: %s' % (' '.join(argv[:6]), tail))
  with open(result_file) as f:
    return float(json.loads(f.readline())['images_per_sec'])


def measure(args, model, manager, tmp) -> dict:
  """Mean images/sec of the local run and of the cluster, A B A B."""
  local_flags, launcher_flags = PAIRS[manager]
  common = _common_flags(args, model)
  local = [
    sys.executable,
    '-m',
    'tf_cnn_benchmarks',
    *common,
    *local_flags,
    '--num_gpus=%d' % args.workers,
  ]
  cluster = [
    sys.executable,
    LAUNCHER,
    '--num_workers=%d' % args.workers,
    '--timeout=%d' % args.timeout,
    *launcher_flags,
    '--',
    *common,
    '--num_gpus=1',
    '--variable_update=%s' % manager,
  ]
  result_file = os.path.join(tmp, 'r.jsonl')
  runs = {'local': [], 'cluster': []}
  for _ in range(args.repeats):
    runs['local'].append(_images_per_sec(local, result_file, args.timeout))
    runs['cluster'].append(_images_per_sec(cluster, result_file, args.timeout))
  out = {k: statistics.mean(v) for k, v in runs.items()}
  out['ratio'] = out['cluster'] / out['local']
  return out


def main(argv=None) -> int:
  args = parse_args(sys.argv[1:] if argv is None else argv)
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    for model in args.models.split(','):
      for manager in args.managers.split(','):
        try:
          got = measure(args, model, manager, tmp)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
          print('%s %s: %s' % (model, manager, e), file=sys.stderr)
          continue
        rows.append((model, manager, got))
        print(
          '%-9s %-24s local %8.1f  cluster %8.1f  ratio %.3f'
          % (model, manager, got['local'], got['cluster'], got['ratio']),
          flush=True,
        )
  if args.markdown:
    print('\n| model | cluster manager | local img/s | cluster img/s | ratio |')
    print('|---|---|---:|---:|---:|')
    for model, manager, got in rows:
      print(
        '| %s | %s | %.1f | %.1f | %.3f |'
        % (model, manager, got['local'], got['cluster'], got['ratio'])
      )
  return 0


if __name__ == '__main__':
  sys.exit(main())
