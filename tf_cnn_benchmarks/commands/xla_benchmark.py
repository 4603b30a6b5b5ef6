#!/usr/bin/env python3
"""Images/sec without XLA, with --xla and with --xla_compile, side by side.

  python scripts/xla_benchmark.py [--configs=NAME,...] [--num_batches=30]
      [--num_warmup_batches=5] [--repeats=2] [--timeout=1800]
      [--json_out=FILE]

Each configuration (model, dataset, towers, batch) runs as its own
`python -m tf_cnn_benchmarks` process per variant, interleaved A B C A B C
(--repeats rounds), so a change in the machine's load hits every variant
alike. Images/sec is read from each run's results line (--result_file); the
table gives the mean over the rounds and the ratio to the run without XLA
(> 1: XLA is faster). Warm-up steps (which include XLA's compilation) are
not timed. Prints a markdown table; --json_out also appends one JSON line
per configuration and variant.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

from tf_cnn_benchmarks.commands import lifetime
from tf_cnn_benchmarks.commands import results_io
from tf_cnn_benchmarks.platform import checkout
from tf_cnn_benchmarks.reporting import result_lines  # noqa: E402  (no TensorFlow)

REPO_ROOT = checkout.ROOT

# name -> (model, data_name, towers, batch size per tower); all replicated.
CONFIGS = {
  'trivial': ('trivial', 'cifar10', 1, 32),
  'lenet': ('lenet', 'imagenet', 1, 32),
  'resnet20': ('resnet20', 'cifar10', 1, 32),
  'resnet20x2': ('resnet20', 'cifar10', 2, 32),
  'resnet50': ('resnet50', 'imagenet', 1, 16),
}
# variant -> extra flags; the first is the baseline of the ratios.
VARIANTS = {
  'no XLA': [],
  '--xla': ['--xla'],
  '--xla_compile': ['--xla_compile'],
}


def parse_args(argv):
  """The script's options."""
  parser = results_io.OneLineParser(description=__doc__.splitlines()[0])
  parser.add_argument('--configs', default=','.join(CONFIGS))
  parser.add_argument('--num_batches', type=int, default=30)
  parser.add_argument('--num_warmup_batches', type=int, default=5)
  parser.add_argument('--repeats', type=int, default=2)
  parser.add_argument('--timeout', type=int, default=1800)
  parser.add_argument('--json_out', default=None)
  args = parser.parse_args(argv)
  unknown = set(args.configs.split(',')) - set(CONFIGS)
  if unknown:
    parser.error(
      '--configs: unknown %s; one of %s'
      % (', '.join(sorted(unknown)), ', '.join(CONFIGS))
    )
  for name in ('num_batches', 'repeats', 'timeout'):
    if getattr(args, name) < 1:
      parser.error('--%s: must be >= 1' % name)
  if args.num_warmup_batches < 1:  # the first step compiles
    parser.error('--num_warmup_batches: must be >= 1 (XLA compiles then)')
  return args


def command(args, config: str, variant: str) -> list:
  """The benchmark command line of one configuration and variant."""
  model, data_name, towers, batch = CONFIGS[config]
  return [
    sys.executable,
    '-m',
    'tf_cnn_benchmarks',
    '--device=cpu',
    '--model=%s' % model,
    '--data_name=%s' % data_name,
    '--num_gpus=%d' % towers,
    '--variable_update=replicated',
    '--batch_size=%d' % batch,
    '--num_batches=%d' % args.num_batches,
    '--num_warmup_batches=%d' % args.num_warmup_batches,
    '--display_every=1000',
    '--peak_tflops_per_device=none',
    *VARIANTS[variant],
  ]


def images_per_sec(argv, result_file: str, timeout: int) -> float:
  """Runs one benchmark; images/sec from its results line."""
  records = results_io.run_for_records(
    argv,
    result_file,
    timeout,
    ' '.join(argv[3:]),
    preexec_fn=lifetime.die_with_parent_preexec(),
  )
  return float(records[-1][1]['images_per_sec'])


def measure(args, config: str, tmp: str) -> dict:
  """{variant: mean images/sec}, variants interleaved in every round."""
  result_file = os.path.join(tmp, 'r.jsonl')
  runs = {v: [] for v in VARIANTS}
  for _ in range(args.repeats):
    for variant in VARIANTS:
      runs[variant].append(
        images_per_sec(
          command(args, config, variant), result_file, args.timeout
        )
      )
  return {v: statistics.mean(r) for v, r in runs.items()}


def describe(config: str) -> str:
  """The table's first cells: model, towers and batch."""
  model, _, towers, batch = CONFIGS[config]
  return '%s | %d | %d' % (model, towers, batch)


def markdown(rows) -> list:
  """The table: images/sec of each variant and its ratio to no XLA."""
  names = list(VARIANTS)
  head = (
    ['model', 'towers', 'batch/tower']
    + names
    + ['ratio %s' % n for n in names[1:]]
  )
  lines = [
    '| %s |' % ' | '.join(head),
    '|---|---:|---:|%s' % ('---:|' * (len(head) - 3)),
  ]
  for config, got in rows:
    base = got[names[0]]
    cells = ['%.1f' % got[n] for n in names]
    cells += ['%.2f' % (got[n] / base) for n in names[1:]]
    lines.append('| %s | %s |' % (describe(config), ' | '.join(cells)))
  return lines


def main(argv=None) -> int:
  args = parse_args(argv)
  rows = []
  with tempfile.TemporaryDirectory(prefix='xla_benchmark_') as tmp:
    for config in args.configs.split(','):
      try:
        got = measure(args, config, tmp)
      except (RuntimeError, subprocess.TimeoutExpired) as e:
        print('error: %s' % e, file=sys.stderr)
        return 1
      rows.append((config, got))
      print(
        '%-11s %s'
        % (config, '  '.join('%s %.1f' % (v, n) for v, n in got.items())),
        flush=True,
      )
      if args.json_out:
        model, data_name, towers, batch = CONFIGS[config]
        result_lines.append_json_lines(
          args.json_out,
          [
            dict(
              model=model,
              data_name=data_name,
              num_gpus=towers,
              batch_size=batch,
              variant=variant,
              images_per_sec=ips,
              num_batches=args.num_batches,
              repeats=args.repeats,
            )
            for variant, ips in got.items()
          ],
        )
  print()
  print('\n'.join(markdown(rows)))
  return 0


if __name__ == '__main__':
  sys.exit(results_io.run_main(main, 'xla_benchmark.py'))
