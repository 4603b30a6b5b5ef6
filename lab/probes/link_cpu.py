"""The CPU a transfer takes over the launcher's links, as compute sees it.

    python scripts/launch_local_cluster.py \\
        --module=lab.probes.link_cpu \\
        --num_workers=2 --num_ps=1 --no-controller \\
        [--link_mbits=R --topology=shared|switch] \\
        -- --done_file=PATH [--sizes=65536,1048576] [--seconds=3]

Each task gets the cluster flags from the launcher. Worker 0 keeps every
core busy with spinners and times chains of gRPC passes (ps 0 <-> worker 0)
and collective all-reduces (worker 0 with worker 1) at each size, reading
the CPU the spinners lost (transfer_cpu.measure_all, as
lab/scripts/measure_transfer_cpu.py does on 127.0.0.1). It prints one line per
row, `link_cpu: {...}` (transfer_cpu.HopCpu.as_json), then writes
--done_file; ps 0 and worker 1 serve until that file exists.

On a token-bucket link the bytes arrive frame by frame, and each frame
costs the kernel and the receiving threads a wake-up: a throttled transfer
takes far more CPU per byte than one over an unthrottled loopback
(lab/notes/predicting_experiments.md). per_byte() turns the rows into that
figure; cost_model_calibration.LINK_CPU_US_PER_BYTE holds the measured
table.
"""

from __future__ import annotations

import json
import os
import sys
import time

from lab.probes import launched_task

PREFIX = 'link_cpu: '
# How often a serving task looks for the done file, and how long it waits
# for it at most (the launcher's own --timeout ends a stuck run sooner).
POLL_S = 0.5
MAX_SERVE_S = 3600.0


def parse_args(argv):
  """The task's flags (the launcher's cluster flags and this module's)."""
  p = launched_task.parser(__doc__.splitlines()[0])
  p.add_argument('--done_file', required=True)
  p.add_argument('--sizes', default='65536,1048576')
  p.add_argument('--seconds', type=float, default=3.0)
  args, _ = p.parse_known_args(argv)
  args.sizes = [int(s) for s in args.sizes.split(',')]
  return args


def serve(args) -> None:
  """A serving task: its server until worker 0 wrote the done file."""
  server = launched_task.server(args)
  end = time.monotonic() + MAX_SERVE_S
  while not os.path.exists(args.done_file) and time.monotonic() < end:
    time.sleep(POLL_S)
  del server


def measure(args) -> list:
  """Worker 0: every row (HopCpu.as_json), each printed as it comes."""
  from tf_cnn_benchmarks.scaling.profile import busy_cores
  from tf_cnn_benchmarks.scaling.profile import transfer_cpu

  task = launched_task.server(args, 'worker', 0)
  rows = []

  def report(row):
    rows.append(row.as_json())
    print(PREFIX + json.dumps(rows[-1], sort_keys=True), flush=True)

  with busy_cores.spinners() as pids:
    transfer_cpu.measure_all(
      task.target, pids, args.sizes, args.seconds, report=report
    )
  return rows


def per_byte(rows) -> dict:
  """{transport: core-us a byte carried}: the slope of the CPU lost per hop
  between each transport's smallest and largest size (what a message costs
  whatever its size drops out), over the bytes the hop's messages carry (a
  collective hop over two tasks, 4 messages of half its tensor, carries
  twice its size: fmt.MESSAGES_PER_HOP ring steps)."""
  from tf_cnn_benchmarks.scaling.model import profile_format as fmt

  out = {}
  for name in sorted({r['transport'] for r in rows}):
    mine = sorted(
      (r for r in rows if r['transport'] == name), key=lambda r: r['bytes']
    )
    small, big = mine[0], mine[-1]
    carried = (big['bytes'] - small['bytes']) * fmt.MESSAGES_PER_HOP[name]
    lost = big['lost_core_us_per_hop'] - small['lost_core_us_per_hop']
    out[name] = max(0.0, lost / carried) if carried > 0 else 0.0
  return out


# The smallest collective hop two_way_efficiency reads: below it the
# latency, not the bytes, sets the time.
TWO_WAY_MIN_BYTES = 1 << 20


def two_way_efficiency(records, wire_payload) -> dict:
  """{Mbit/s: [share]}: how much of a switch port's payload rate each way
  TensorFlow's collective carries while its ring crosses the port both ways.

  A collective hop of B bytes over two tasks moves B through each task's
  port each way (two ring steps of B/2). On switch ports that takes
  B / rate if each way carried the full rate; one shared link carries the
  2B at the same rate with no second way to lose, so the shared hop's
  time beyond its 2B / rate is the hop's latency. Each share is
  (B / rate) / (switch time - that latency), for a switch row and a shared
  row of one run, rate and size (at least TWO_WAY_MIN_BYTES). `records`:
  rows as lab/scripts/measure_link_cpu.py writes them (topology, link_mbits
  and run beside the HopCpu fields). wire_payload: the share of the rate
  carrying payload (cost_model_calibration's).
  """
  walls = {}
  for r in records:
    if r['transport'] != 'collective' or r.get('copies', 1) != 1:
      continue
    if r.get('tasks', 2) != 2 or r['link_mbits'] is None:
      continue
    key = (r['link_mbits'], r['bytes'], r['run'])
    walls.setdefault(key, {})[r['topology']] = r['wall_us_per_hop']
  out = {}
  for (mbits, nbytes, _), pair in sorted(walls.items()):
    if nbytes < TWO_WAY_MIN_BYTES or len(pair) < 2:
      continue
    one_way_us = nbytes / (mbits / 8.0 * wire_payload)
    latency_us = pair['shared'] - 2.0 * one_way_us
    share = one_way_us / (pair['switch'] - latency_us)
    out.setdefault(mbits, []).append(round(share, 3))
  return out


def main(argv=None) -> int:
  """The task: worker 0 measures, the others serve."""
  args = parse_args(sys.argv[1:] if argv is None else argv)
  if args.job_name == 'worker' and args.task_index == 0:
    try:
      measure(args)
    finally:
      with open(args.done_file, 'w', encoding='utf-8') as f:
        f.write('done\n')
    return 0
  serve(args)
  return 0


if __name__ == '__main__':
  sys.exit(main())
