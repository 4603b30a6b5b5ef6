#!/usr/bin/env python3
"""What a cluster on one host costs against one process with the same towers.

  python scripts/cluster_overhead.py [--models=lenet,resnet20]
      [--managers=parameter_server,...] [--workers=2] [--batch_size=32]
      [--num_batches=30] [--repeats=2] [--compare_tuning] [--markdown]

For each model and cluster manager, runs the matching local manager in one
process with W towers (W = --workers), then the cluster with W workers of one
tower each on 127.0.0.1 (scripts/launch_local_cluster.py), alternating
A B A B (--repeats pairs), all with the same per-tower batch, so both run the
same global batch. Prints images/sec of each (the mean of its runs) and the
ratio cluster / local: 1.0 means the cluster costs nothing.

--compare_tuning runs the cluster twice in each round: "before" without the
tuning (--cluster_threads=tf_default: every task sizes its thread pools for
all the cores; --nopack_ps_transfers: one RPC per gradient or variable
copy) and "after" with the defaults (--cluster_threads=auto: the tasks
sharing the host split its cores; --pack_ps_transfers), so both are measured
side by side in one run: local, before, after, local, before, after, ...
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from tf_cnn_benchmarks.commands import results_io as rio
from tf_cnn_benchmarks.platform import checkout

REPO_ROOT = checkout.ROOT
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
CLUSTER_THREADS = ('auto', 'tf_default')


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
  parser.add_argument(
    '--compare_tuning',
    action='store_true',
    help='measure the cluster without the tuning (--cluster_threads='
    'tf_default --nopack_ps_transfers) and with it (the defaults)',
  )
  parser.add_argument(
    '--cluster_threads',
    default=None,
    choices=CLUSTER_THREADS,
    help="the cluster's --cluster_threads (default: the driver's, auto); "
    'not with --compare_tuning',
  )
  parser.add_argument('--markdown', action='store_true')
  args = parser.parse_args(argv)
  if args.compare_tuning and args.cluster_threads:
    parser.error('--cluster_threads: not with --compare_tuning (it runs both)')
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
  records = rio.run_for_records(argv, result_file, timeout, ' '.join(argv[:6]))
  return float(records[0][1]['images_per_sec'])


def _variants(args) -> dict:
  """{column name: extra cluster flags} of the cluster runs of each round."""
  if args.compare_tuning:
    return {
      'before': ['--cluster_threads=tf_default', '--nopack_ps_transfers'],
      'after': ['--cluster_threads=auto', '--pack_ps_transfers'],
    }
  chosen = ['--cluster_threads=%s' % args.cluster_threads]
  return {'cluster': chosen if args.cluster_threads else []}


def measure(args, model, manager, tmp) -> dict:
  """Mean images/sec of the local run and of each cluster variant, A B A B.

  Returns {'local': ..., <variant>: ..., 'ratio_<variant>': ...}.
  """
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
  variants = _variants(args)
  result_file = os.path.join(tmp, 'r.jsonl')
  runs = {name: [] for name in ['local', *variants]}
  for _ in range(args.repeats):
    runs['local'].append(_images_per_sec(local, result_file, args.timeout))
    for name, flags in variants.items():
      runs[name].append(
        _images_per_sec(cluster + flags, result_file, args.timeout)
      )
  out = {k: statistics.mean(v) for k, v in runs.items()}
  for name in variants:
    out['ratio_' + name] = out[name] / out['local']
  return out


def _line(model, manager, got, variants) -> str:
  """One console line: local, each cluster variant and its ratio."""
  parts = ['%-9s %-24s local %8.1f' % (model, manager, got['local'])]
  for name in variants:
    parts.append(
      '%s %8.1f  ratio %.3f' % (name, got[name], got['ratio_' + name])
    )
  return '  '.join(parts)


def _markdown(rows, variants) -> list:
  """The markdown table of every row."""
  if list(variants) == ['cluster']:
    head = ['cluster img/s', 'ratio']
  else:
    head = [
      *('cluster img/s (%s)' % n for n in variants),
      *('ratio (%s)' % n for n in variants),
    ]
  lines = [
    '| model | cluster manager | local img/s | %s |' % ' | '.join(head),
    '|---|---|%s' % ('---:|' * (1 + len(head))),
  ]
  for model, manager, got in rows:
    cells = ['%.1f' % got['local']]
    cells += ['%.1f' % got[n] for n in variants]
    cells += ['%.3f' % got['ratio_' + n] for n in variants]
    lines.append('| %s | %s | %s |' % (model, manager, ' | '.join(cells)))
  return lines


def main(argv=None) -> int:
  args = parse_args(sys.argv[1:] if argv is None else argv)
  variants = _variants(args)
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
        print(_line(model, manager, got, variants), flush=True)
  if args.markdown:
    print()
    print('\n'.join(_markdown(rows, variants)))
  return 1 if not rows else 0


if __name__ == '__main__':
  sys.exit(main())
