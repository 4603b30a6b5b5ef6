#!/usr/bin/env python3
"""The CPU a byte takes on the launcher's links, by rate and topology.

  python -m lab.scripts.measure_link_cpu [--links=25,100,1000,none]
      [--topologies=shared,switch] [--runs=2] [--seconds=3]
      [--json_out=FILE]

Runs lab/probes/link_cpu.py under launch_local_cluster.py
(two workers and a ps task, --no-controller) once per link, topology and
run: worker 0 keeps every core busy with spinners and times gRPC and
collective messages of 64 KiB and 1 MiB (and 4 MiB from 1000 Mbit/s up),
reading the CPU the spinners lost. Prints, per topology and link, the
core-us a byte takes (link_cpu.per_byte, the median of the runs) and that
less the unthrottled figure of the same topology: the rows of
cost_model_calibration.LINK_CPU. --json_out writes every measured row with
its topology, link and run; --from_json=FILE prints the figures of such
a file again. Also prints, per rate, the share of a switch port each way
the collective carries while its ring crosses it both ways (link_cpu.
two_way_efficiency): cost_model_calibration.TWO_WAY_EFFICIENCY's 1000
Mbit/s row. Linux only; keep the machine otherwise idle.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from tf_cnn_benchmarks.platform import checkout

REPO_ROOT = checkout.ROOT

from tf_cnn_benchmarks.platform import json_input  # noqa: E402

PREFIX = 'link_cpu: '
TOPOLOGIES = ('shared', 'switch')


class UsageError(ValueError):
  """Bad input: one line, exit status 2."""


def _link(text):
  if text == 'none':
    return None
  rate = float(text)
  if not 0 < rate <= 100000:
    raise ValueError(text)
  return rate


def parse_args(argv):
  """The script's options, checked (UsageError names the flag)."""
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('--links', default='25,100,1000,none')
  p.add_argument('--topologies', default=','.join(TOPOLOGIES))
  p.add_argument('--runs', type=int, default=2)
  p.add_argument('--seconds', type=float, default=3.0)
  p.add_argument('--json_out', default=None)
  p.add_argument(
    '--from_json',
    default=None,
    help='measure nothing: print the figures of the rows a --json_out wrote',
  )
  args = p.parse_args(argv)
  try:
    args.links = [_link(t) for t in args.links.split(',')]
  except ValueError:
    raise UsageError(
      '--links: want Mbit/s rates (0-100000) or none, got %r' % args.links
    ) from None
  if None not in args.links:
    raise UsageError('--links: include none (the figures are less it)')
  args.topologies = args.topologies.split(',')
  if any(t not in TOPOLOGIES for t in args.topologies):
    raise UsageError(
      '--topologies: want some of shared,switch, got %r'
      % ','.join(args.topologies)
    )
  if not 1 <= args.runs <= 20:
    raise UsageError('--runs: want 1 to 20, got %d' % args.runs)
  if not 0.5 <= args.seconds <= 60:
    raise UsageError('--seconds: want 0.5 to 60, got %g' % args.seconds)
  return args


def sizes_for(link) -> str:
  """Message sizes: 4 MiB too where it takes little time."""
  if link is None or link >= 1000:
    return '65536,1048576,4194304'
  return '65536,1048576'


def measure_one(link, topology, seconds) -> list:
  """The rows of one launcher run (dicts, HopCpu.as_json)."""
  with tempfile.TemporaryDirectory() as tmp:
    argv = [
      sys.executable,
      os.path.join(REPO_ROOT, 'scripts', 'launch_local_cluster.py'),
      '--module=lab.probes.link_cpu',
      '--num_workers=2',
      '--num_ps=1',
      '--no-controller',
      '--timeout=900',
      '--topology=%s' % topology,
    ]
    if link is not None:
      argv.append('--link_mbits=%g' % link)
    argv += [
      '--',
      '--done_file=%s' % os.path.join(tmp, 'done'),
      '--sizes=%s' % sizes_for(link),
      '--seconds=%g' % seconds,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
  rows = [
    json_input.loads(line[line.index(PREFIX) + len(PREFIX) :], 'the launcher')
    for line in done.stdout.splitlines()
    if PREFIX in line
  ]
  if done.returncode or not rows:
    tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
    raise RuntimeError(
      'launcher run failed (exit %d): %s' % (done.returncode, tail)
    )
  return rows


def table(records) -> dict:
  """{(topology, link): {transport: median core-us a byte}} of the runs."""
  from lab.probes import link_cpu

  runs = {}
  for r in records:
    key = (r['topology'], r['link_mbits'], r['run'])
    runs.setdefault(key, []).append(r)
  out = {}
  for (topology, link, _), rows in runs.items():
    for name, value in link_cpu.per_byte(rows).items():
      out.setdefault((topology, link), {}).setdefault(name, []).append(value)
  return {
    k: {n: statistics.median(v) for n, v in d.items()} for k, d in out.items()
  }


def _row_order(item):
  """Topology, then rate, unthrottled last."""
  (topology, link), _ = item
  return topology, link is None, link or 0.0


def print_table(figures) -> None:
  """Each link's figures, and less the unthrottled one of its topology."""
  for (topology, link), d in sorted(figures.items(), key=_row_order):
    base = figures.get((topology, None), {})
    print(
      '%-6s %12s: '
      % (topology, 'unthrottled' if link is None else '%g Mbit/s' % link)
      + ', '.join(
        '%s %.5f core-us/B (%+.5f beyond unthrottled)'
        % (n, v, v - base.get(n, 0.0))
        for n, v in sorted(d.items())
      )
    )


def print_two_way(records) -> None:
  """The collective's two-way share of a switch port, by rate
  (link_cpu.two_way_efficiency): cost_model_calibration.TWO_WAY_EFFICIENCY."""
  from lab.probes import link_cpu
  from tf_cnn_benchmarks.scaling.model import cost_model_calibration as cal_lib

  payload = cal_lib.default_calibration().value('wire_payload')
  for mbits, shares in sorted(
    link_cpu.two_way_efficiency(records, payload).items()
  ):
    print(
      'switch %9g Mbit/s: the collective carries %s of the port each way '
      '(median %.3f)'
      % (
        mbits,
        ', '.join('%.3f' % e for e in shares),
        statistics.median(shares),
      )
    )


def read_rows(path) -> list:
  """The rows of a --json_out file (UsageError names --from_json)."""
  from tf_cnn_benchmarks.commands import results_io

  try:
    results_io.check_files([path], '--from_json')
    return [record for _, record in results_io.read_jsonl(path, hint=None)]
  except results_io.InputError as e:
    message = str(e)
    if not message.startswith('--from_json'):
      message = '--from_json: %s' % message
    raise UsageError(message) from None


def main(argv=None) -> int:
  """Entry point; bad input: one line on stderr, exit status 2."""
  try:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.from_json:
      records = read_rows(args.from_json)
      print_table(table(records))
      print_two_way(records)
      return 0
  except UsageError as e:
    print(str(e), file=sys.stderr)
    return 2
  records = []
  for run in range(args.runs):
    for topology in args.topologies:
      for link in args.links:
        for row in measure_one(link, topology, args.seconds):
          records.append(dict(row, topology=topology, link_mbits=link, run=run))
          print(json.dumps(records[-1], sort_keys=True), flush=True)
  if args.json_out:
    with open(args.json_out, 'w', encoding='utf-8') as f:
      for r in records:
        f.write(json.dumps(r, sort_keys=True) + '\n')
  print_table(table(records))
  print_two_way(records)
  return 0


if __name__ == '__main__':
  sys.exit(main())
