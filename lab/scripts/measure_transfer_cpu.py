#!/usr/bin/env python3
"""What a transfer takes from the compute beside it, per message.

  python -m lab.scripts.measure_transfer_cpu [--transports=grpc,collective]
      [--sizes=64,65536,1048576,4194304,16777216] [--seconds=3]
      [--concurrent=1,4,16] [--groups=2,3] [--json_out=FILE]

Starts the transport profile's three tasks on 127.0.0.1 (ps 0 and worker 1
serve in their own processes, this one is worker 0) and one spinning
process per core, then times chains of messages and reads the CPU the
spinners lost (tf_cnn_benchmarks/scaling/profile/transfer_cpu.py). Prints, per
transport and size, a hop's wall time with every core busy and the
core-microseconds it took from the spinners, per hop and per message (a
collective hop, an all-reduce over two tasks, is two ring steps of two
messages each). What the
cost model charges instead: latency_cpu_fraction x a message's latency,
and interference_cores per byte (docs/predicting.md). --concurrent=K,...
also runs K chains at once (K hops in flight together, as a step's
gradients are): their messages share some of the cost
(lab/notes/predicting_experiments.md). --groups=2,3 (the default) also times
the smallest collective over three tasks (ps 0 joins): with the two-task
one it splits a task's CPU per all-reduce into a ring step's message and
the op's own part (cpu_us_per_op). Linux only; keep the machine otherwise
idle.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tf_cnn_benchmarks.platform import checkout

REPO_ROOT = checkout.ROOT

TRANSPORTS = ('grpc', 'collective')
DEFAULT_SIZES = '64,65536,1048576,4194304,16777216'


class UsageError(ValueError):
  """Bad input: one line, exit status 2."""


def parse_args(argv):
  """The script's options, checked (UsageError names the flag)."""
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('--transports', default=','.join(TRANSPORTS))
  p.add_argument('--sizes', default=DEFAULT_SIZES, help='bytes, ascending')
  p.add_argument('--seconds', type=float, default=3.0)
  p.add_argument(
    '--concurrent', default='1', help='chains at once, e.g. 1,4,16'
  )
  p.add_argument(
    '--groups', default='2,3', help='collective group sizes: 2 or 2,3'
  )
  p.add_argument('--json_out', default=None)
  args = p.parse_args(argv)
  kinds = args.transports.split(',')
  if not kinds or any(k not in TRANSPORTS for k in kinds):
    raise UsageError(
      '--transports: want some of %s, got %r'
      % (','.join(TRANSPORTS), args.transports)
    )
  try:
    sizes = [int(s) for s in args.sizes.split(',')]
  except ValueError:
    sizes = []
  if not sizes or min(sizes) < 4:
    raise UsageError('--sizes: want byte counts >= 4, got %r' % args.sizes)
  try:
    copies = [int(k) for k in args.concurrent.split(',')]
  except ValueError:
    copies = []
  if not copies or min(copies) < 1 or max(copies) > 64:
    raise UsageError(
      '--concurrent: want chain counts 1-64, got %r' % args.concurrent
    )
  args.concurrent = copies
  if args.groups not in ('2', '2,3'):
    raise UsageError('--groups: want 2 or 2,3, got %r' % args.groups)
  args.groups = [int(n) for n in args.groups.split(',')]
  if not 0.1 <= args.seconds <= 60:
    raise UsageError('--seconds: want 0.1 to 60, got %g' % args.seconds)
  if not os.path.exists('/proc/self/stat'):
    raise UsageError('measure_transfer_cpu.py: needs Linux /proc')
  args.transports, args.sizes = kinds, sizes
  return args


def run(args) -> list:
  """Every transport and size measured: transfer_cpu.HopCpu rows."""
  from tf_cnn_benchmarks.scaling.profile import busy_cores
  from tf_cnn_benchmarks.scaling.profile import transfer_cpu
  from tf_cnn_benchmarks.scaling.profile import transport
  from tf_cnn_benchmarks.scaling.profile import transport_task

  spec = transport.local_spec()
  with transport.serving_tasks(spec):
    task = transport_task.server(spec, 'worker', 0)
    with busy_cores.spinners() as pids:
      rows = transfer_cpu.measure_all(
        task.target,
        pids,
        args.sizes,
        args.seconds,
        kinds=args.transports,
        report=lambda row: print(_line(row), flush=True),
        copies=args.concurrent,
        groups=args.groups,
      )
  _print_fits(args, rows)
  return rows


def _print_fits(args, rows) -> None:
  """The profile's figures the rows give (those they have sizes for)."""
  from tf_cnn_benchmarks.scaling.profile import transfer_cpu

  if len(args.sizes) >= 3 and 1 in args.concurrent:
    for name, (message, byte) in transfer_cpu.fit(rows).items():
      print(
        '%s: %.1f core-us a message, %.3f core-us a kB of it '
        '(two tasks: cpu_us_per_byte, and cpu_us_per_message without a '
        'group fit)' % (name, message, byte * 1000)
      )
  for name, (step, op) in transfer_cpu.fit_group(rows).items():
    print(
      "%s over 2 and 3 tasks: %.1f core-us a ring step's message, %.1f a "
      "task's op (the profile's cpu_us_per_message, cpu_us_per_op)"
      % (name, step, op)
    )


def _line(row) -> str:
  j = row.as_json()
  return (
    '%-10s %9d B x%-2d: %9.1f us a hop, %9.1f core-us lost (%.2f cores); '
    '%9.1f core-us a message'
    % (
      j['transport'],
      j['bytes'],
      j['copies'],
      j['wall_us_per_hop'],
      j['lost_core_us_per_hop'],
      j['cores'],
      j['lost_core_us_per_message'],
    )
  )


def main(argv=None) -> int:
  """Entry point; bad input: one line on stderr, exit status 2."""
  try:
    args = parse_args(sys.argv[1:] if argv is None else argv)
  except UsageError as e:
    print(str(e), file=sys.stderr)
    return 2
  rows = run(args)
  if args.json_out:
    with open(args.json_out, 'w', encoding='utf-8') as f:
      for row in rows:
        f.write(json.dumps(row.as_json(), sort_keys=True) + '\n')
  return 0


if __name__ == '__main__':
  sys.exit(main())
