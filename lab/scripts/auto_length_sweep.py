"""A sweep with --num_batches=auto against the classic fixed protocol.

  python -m lab.scripts.auto_length_sweep [--out=DIR] [--target=0.01]
      [--max_run_seconds=120] [--auto_warmup] [--models=trivial,resnet20]
      [--batch_sizes=8,16,32,64]

Runs scripts/sweep.py twice over the same grid (models x batch sizes,
cifar10, CPU): first the classic protocol (--num_warmup_batches=10
--num_batches=100), then --num_batches=auto --target_interval=T (with
--auto_warmup also --num_warmup_batches=auto). Prints each sweep's wall
time, the auto / fixed ratio, how many auto points reached the target, and
per point: images/sec of both, the auto run's steps, interval and why it
stopped. The sweeps' lines stay in DIR (default: a temporary folder).
Issue 57's criterion: the target reached on >= 90% of the points in <= 60%
of the fixed protocol's wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from tf_cnn_benchmarks.platform import checkout

SWEEP = os.path.join(checkout.ROOT, 'scripts', 'sweep.py')


def parse_args(argv):
  """The script's options."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--out', default=None)
  parser.add_argument('--target', type=float, default=0.01)
  parser.add_argument('--max_run_seconds', type=float, default=120.0)
  parser.add_argument('--auto_warmup', action='store_true')
  parser.add_argument('--models', default='trivial,resnet20')
  parser.add_argument('--batch_sizes', default='8,16,32,64')
  return parser.parse_args(argv)


def _sweep(args, out, name, length_flags) -> float:
  """Runs one sweep; its wall seconds."""
  command = [
    sys.executable,
    SWEEP,
    '--name=%s' % name,
    '--results_dir=%s' % out,
    '--axis',
    'model=%s' % args.models,
    '--axis',
    'batch_size=%s' % args.batch_sizes,
    '--fixed',
    'data_name=cifar10',
    '--fixed',
    'device=cpu',
    '--fixed',
    'peak_tflops_per_device=none',
  ]
  for flag in length_flags:
    command += ['--fixed', flag]
  start = time.monotonic()
  proc = subprocess.run(command, cwd=checkout.ROOT, text=True)
  if proc.returncode:
    raise SystemExit('%s: sweep failed (%d)' % (name, proc.returncode))
  return time.monotonic() - start


def _lines(out, name) -> dict:
  """point_id -> the sweep's ok line."""
  with open(os.path.join(out, name + '.jsonl')) as f:
    records = [json.loads(line) for line in f if line.strip()]
  return {r['sweep']['point_id']: r for r in records if r['status'] == 'ok'}


def _half_width(record) -> float | None:
  spread = record.get('images_per_sec_spread') or {}
  if spread.get('ci95_low') is None or spread.get('ci95_high') is None:
    return None
  return (
    (spread['ci95_high'] - spread['ci95_low']) / 2 / record['images_per_sec']
  )


def report(fixed, auto, fixed_seconds, auto_seconds, target) -> list:
  """The printed lines."""
  lines = [
    '%-32s %10s %10s %6s %8s %8s %7s'
    % (
      'point',
      'fixed ips',
      'auto ips',
      'steps',
      'fixed hw',
      'auto hw',
      'stop',
    ),
  ]
  reached = 0
  for point in sorted(auto):
    a, f = auto[point], fixed.get(point)
    length = a['run_length']
    reached += length['stopped_by'] == 'target'
    fixed_hw = _half_width(f) if f else None
    lines.append(
      '%-32s %10s %10.1f %6d %8s %7.2f%% %7s'
      % (
        point,
        '%.1f' % f['images_per_sec'] if f else '-',
        a['images_per_sec'],
        a['num_steps'],
        '-' if fixed_hw is None else '%.2f%%' % (100 * fixed_hw),
        100 * length['interval_reached'],
        length['stopped_by'],
      )
    )
  lines.append(
    'fixed protocol (10 + 100 steps): %.1f s; auto (target %g): %.1f s; '
    'auto / fixed = %.2f; target reached on %d of %d points'
    % (
      fixed_seconds,
      target,
      auto_seconds,
      auto_seconds / fixed_seconds,
      reached,
      len(auto),
    )
  )
  return lines


def main(argv=None) -> int:
  """Both sweeps, then the comparison."""
  args = parse_args(sys.argv[1:] if argv is None else argv)
  out = args.out or tempfile.mkdtemp(prefix='auto_length_sweep-')
  fixed_seconds = _sweep(
    args, out, 'fixed', ['num_warmup_batches=10', 'num_batches=100']
  )
  auto_flags = [
    'num_batches=auto',
    'target_interval=%g' % args.target,
    'max_run_seconds=%g' % args.max_run_seconds,
  ]
  if args.auto_warmup:
    auto_flags.append('num_warmup_batches=auto')
  auto_seconds = _sweep(args, out, 'auto', auto_flags)
  lines = report(
    _lines(out, 'fixed'),
    _lines(out, 'auto'),
    fixed_seconds,
    auto_seconds,
    args.target,
  )
  print('\n'.join(lines))
  print('lines in %s' % out)
  return 0


if __name__ == '__main__':
  sys.exit(main())
