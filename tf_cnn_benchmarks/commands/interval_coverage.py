#!/usr/bin/env python3
"""How often a run's printed 95% interval holds what other runs measure.

  python scripts/interval_coverage.py [--runs=8] [--modes=fixed,auto]
      [--fixed_batches=30] [--fixed_warmup=10] [--target_interval=0.02]
      [--max_run_seconds=120] [--timeout=900] [--json=FILE]
      [-- BENCHMARK FLAGS...]

Runs one benchmark configuration --runs times in each mode, as separate
processes, alternating the modes (fixed, auto, fixed, auto, ...) so that a
slow drift of the machine reaches both alike. The modes:

  fixed: --num_warmup_batches=W --num_batches=N (--fixed_warmup,
    --fixed_batches).
  auto: --num_warmup_batches=auto --num_batches=auto --target_interval=T
    --max_run_seconds=S (docs/performance.md#run-length).

The configuration is the flags after `--` (default: --model=trivial
--data_name=cifar10 --batch_size=32 --device=cpu); the script adds the
length flags, --peak_tflops_per_device=none and --result_file.

For each run, its results line's 95% interval of images/sec
(`images_per_sec_spread`) is checked against the median images/sec of the
OTHER runs of the same mode: `covered` counts the runs whose interval holds
it. An honest 95% interval holds it in about 19 runs of 20 when runs differ
only by noise the interval sees; fewer means the interval is too narrow for
the run-to-run spread (which also holds what one run cannot see: start-up
placement, neighbours, frequency). Prints one table row per mode: runs,
covered, between-run sd (% of the mean), mean half-width (% of the rate),
mean timed steps, mean wall seconds per run (start-up included) and, for
auto, how many runs reached the target. --json=FILE also writes the rows
and every run (FILE '-' : stdout, after the table).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from tf_cnn_benchmarks.commands import results_io as rio

DEFAULT_CONFIG = (
  '--model=trivial',
  '--data_name=cifar10',
  '--batch_size=32',
  '--device=cpu',
)
MODES = ('fixed', 'auto')


def parse_args(argv):
  """The script's options; bad values: one line, exit 2."""
  parser = rio.OneLineParser(
    prog='interval_coverage.py', description=__doc__.splitlines()[0]
  )
  parser.add_argument('--runs', type=_at_least(3), default=8, metavar='N')
  parser.add_argument('--modes', type=_modes, default=MODES)
  parser.add_argument('--fixed_batches', type=_at_least(2), default=30)
  parser.add_argument('--fixed_warmup', type=_at_least(0), default=10)
  parser.add_argument(
    '--target_interval',
    type=_share,
    default=0.02,
    help='auto: --target_interval of the runs (default %(default)s)',
  )
  parser.add_argument(
    '--max_run_seconds',
    type=rio.positive_number('a number of seconds > 0'),
    default=120.0,
  )
  parser.add_argument(
    '--timeout',
    type=rio.positive_number('a number of seconds > 0'),
    default=900.0,
    help='kill a run after this long',
  )
  parser.add_argument(
    '--json', metavar='FILE', help="write rows and runs as JSON ('-': stdout)"
  )
  parser.add_argument(
    'flags',
    nargs=argparse.REMAINDER,
    help='after --: the benchmark configuration',
  )
  args = parser.parse_args(argv)
  flags = [f for f in args.flags if f != '--']
  for flag in flags:
    if flag.split('=')[0] in _SET_HERE:
      parser.error('%s: set by this script; leave it out' % flag)
  args.flags = flags or list(DEFAULT_CONFIG)
  if args.json and args.json != '-':
    rio.check_output('--json', args.json)
  return args


_SET_HERE = (
  '--num_batches',
  '--num_warmup_batches',
  '--num_epochs',
  '--target_interval',
  '--max_run_seconds',
  '--result_file',
)


def _at_least(low):
  def parse(text):
    try:
      value = int(text)
    except ValueError:
      value = low - 1
    if value < low:
      raise argparse.ArgumentTypeError(
        'expected a whole number >= %d, got %r' % (low, text)
      )
    return value

  return parse


def _share(text):
  try:
    value = float(text)
  except ValueError:
    value = -1.0
  if not 0 < value < 1:
    raise argparse.ArgumentTypeError(
      'expected a share in (0, 1), e.g. 0.02, got %r' % text
    )
  return value


def _modes(text):
  modes = tuple(m.strip() for m in text.split(',') if m.strip())
  if not modes or set(modes) - set(MODES):
    raise argparse.ArgumentTypeError(
      'expected fixed, auto or fixed,auto, got %r' % text
    )
  return modes


def mode_flags(args, mode: str) -> list:
  """The length flags of one mode."""
  if mode == 'fixed':
    return [
      '--num_warmup_batches=%d' % args.fixed_warmup,
      '--num_batches=%d' % args.fixed_batches,
    ]
  return [
    '--num_warmup_batches=auto',
    '--num_batches=auto',
    '--target_interval=%g' % args.target_interval,
    '--max_run_seconds=%g' % args.max_run_seconds,
  ]


def run_once(args, mode: str, result_file: str) -> dict:
  """One benchmark run: its figures (see summarize)."""
  argv = [
    sys.executable,
    '-m',
    'tf_cnn_benchmarks',
    *args.flags,
    *mode_flags(args, mode),
    '--peak_tflops_per_device=none',
    '--display_every=100000',
  ]
  start = time.monotonic()
  records = rio.run_for_records(argv, result_file, args.timeout, mode)
  seconds = time.monotonic() - start
  record = records[-1][1]
  spread = record.get('images_per_sec_spread') or {}
  length = record.get('run_length') or {}
  return {
    'mode': mode,
    'images_per_sec': record['images_per_sec'],
    'ci95_low': spread.get('ci95_low'),
    'ci95_high': spread.get('ci95_high'),
    'steps': record['num_steps'],
    'warmup_steps': record['num_warmup_steps'],
    'wall_seconds': round(seconds, 3),
    'target_reached': length.get('target_reached'),
    'stopped_by': length.get('stopped_by'),
  }


def covers(run: dict, value: float) -> bool:
  """Whether run's interval holds value (a null high end: unbounded)."""
  low, high = run['ci95_low'], run['ci95_high']
  if low is None:
    return False
  return low <= value and (high is None or value <= high)


def summarize(mode: str, runs: list) -> dict:
  """One mode's row: coverage of the others' median, spreads, costs."""
  rates = [r['images_per_sec'] for r in runs]
  covered = 0
  for i, run in enumerate(runs):
    others = rates[:i] + rates[i + 1 :]
    run['others_median'] = statistics.median(others)
    run['covered'] = covers(run, run['others_median'])
    covered += run['covered']
  mean = statistics.mean(rates)
  halves = [
    (r['ci95_high'] - r['ci95_low']) / 2 / r['images_per_sec']
    for r in runs
    if r['ci95_low'] is not None and r['ci95_high'] is not None
  ]
  reached = [
    r['target_reached'] for r in runs if r['target_reached'] is not None
  ]
  return {
    'mode': mode,
    'runs': len(runs),
    'covered': covered,
    'mean_images_per_sec': mean,
    'between_run_sd_percent': 100 * statistics.stdev(rates) / mean,
    'mean_half_width_percent': 100 * statistics.mean(halves)
    if halves
    else None,
    'mean_steps': statistics.mean(r['steps'] for r in runs),
    'mean_wall_seconds': statistics.mean(r['wall_seconds'] for r in runs),
    'target_reached': sum(reached) if reached else None,
  }


def table(rows: list) -> list:
  """The printed table's lines."""
  lines = [
    '%-6s %5s %8s %15s %16s %11s %12s %15s'
    % (
      'mode',
      'runs',
      'covered',
      'between-run sd',
      'mean half-width',
      'mean steps',
      'mean wall s',
      'target reached',
    )
  ]
  for row in rows:
    half = row['mean_half_width_percent']
    reached = row['target_reached']
    lines.append(
      '%-6s %5d %8s %14.2f%% %16s %11.1f %12.1f %15s'
      % (
        row['mode'],
        row['runs'],
        '%d/%d' % (row['covered'], row['runs']),
        row['between_run_sd_percent'],
        '-' if half is None else '%.2f%%' % half,
        row['mean_steps'],
        row['mean_wall_seconds'],
        '-' if reached is None else '%d/%d' % (reached, row['runs']),
      )
    )
  return lines


def main(argv=None) -> int:
  """Runs the modes --runs times each, alternating; prints the table."""
  args = parse_args(sys.argv[1:] if argv is None else argv)
  runs = {mode: [] for mode in args.modes}
  with tempfile.TemporaryDirectory() as tmp:
    result_file = os.path.join(tmp, 'r.jsonl')
    for k in range(args.runs):
      for mode in args.modes:
        try:
          got = run_once(args, mode, result_file)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
          print(
            'interval_coverage.py: run %d (%s): %s' % (k, mode, e),
            file=sys.stderr,
          )
          return 1
        runs[mode].append(got)
        print(
          'run %d %-5s %10.1f images/sec  [%s, %s]  %d steps  %.1fs'
          % (
            k,
            mode,
            got['images_per_sec'],
            _shown(got['ci95_low']),
            _shown(got['ci95_high']),
            got['steps'],
            got['wall_seconds'],
          ),
          flush=True,
        )
  rows = [summarize(mode, runs[mode]) for mode in args.modes]
  print('\n'.join(table(rows)))
  if args.json:
    _write_json(args.json, {'config': args.flags, 'rows': rows, 'runs': runs})
  return 0


def _shown(value) -> str:
  return 'inf' if value is None else '%.1f' % value


def _write_json(path: str, data: dict) -> None:
  text = json.dumps(data, indent=1, sort_keys=True)
  if path == '-':
    print(text)
    return
  try:
    with open(path, 'w') as f:
      f.write(text + '\n')
  except OSError as e:
    raise rio.InputError(
      '--json: cannot write %s: %s' % (path, e.strerror)
    ) from None


if __name__ == '__main__':
  sys.exit(rio.run_main(main, 'interval_coverage.py'))
