"""How long sets of collective all-reduces take over the workers, at once.

    python scripts/launch_local_cluster.py \\
        --module=lab.probes.ring_sets \\
        --num_workers=3 --num_ps=1 --no-controller \\
        [--link_mbits=R --topology=shared|switch] \\
        -- --sets='6291456;256x9;19200,409600,6291456' [--rounds=9] \\
           [--link_mbits=R]

Each task gets the cluster flags from the launcher. Worker 0 builds, for
each set of --sets (';' between sets, ',' between tensors, BxK for K
tensors of B bytes), one CollectiveReduceV2 per tensor over every worker
(the harness's collective algorithm), all of a set in one step, and times
the step (--rounds times each after two untimed runs, the sets taken in
turn). It prints one line per set, `ring_sets: {...}`: the set, its bytes,
the median, least and most ms, and the wire's share of the time: what the
ring's busiest port carries, 2 (n - 1) / n of the bytes, over the module's
--link_mbits (the launcher's, given again after --) as TCP payload (absent
without it). A step of many small tensors shows
what each costs beside the others, the kernel and the messages of every
ring step; one of a big tensor, how near its ring comes to the wire. The
ps task only serves (the launcher's modules take one); the other tasks
serve until worker 0's server is gone.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from lab.probes import launched_task
from lab.probes import port_duplex
from tf_cnn_benchmarks.scaling.model import cost_model_calibration

PREFIX = 'ring_sets: '


def parse_sets(text: str) -> list:
  """'6291456;256x9' -> [[6291456], [256] * 9] (ValueError when bad)."""
  sets = []
  for part in text.split(';'):
    sizes = []
    for item in part.split(','):
      nbytes, _, count = item.strip().partition('x')
      n, k = int(nbytes), int(count or 1)
      if n < 4 or not 1 <= k <= 64:
        raise ValueError('want bytes >= 4 and 1-64 copies, got %r' % item)
      sizes += [n] * k
    sets.append(sizes)
  return sets


def wire_ms(sizes, num_workers: int, link_mbits) -> float | None:
  """The ms the busiest port of the rings takes at the payload rate."""
  if link_mbits is None or num_workers < 2:
    return None
  carried = 2.0 * (num_workers - 1) / num_workers * sum(sizes)
  # The model's share of a shaped link's rate that is TCP payload.
  payload = cost_model_calibration.default_calibration().value('wire_payload')
  return carried / (link_mbits / 8.0 * payload) / 1000.0


def parse_args(argv):
  """The task's flags (the launcher's cluster flags and this module's)."""
  p = launched_task.parser(__doc__.splitlines()[0])
  p.add_argument('--sets', default='6291456;256x9')
  p.add_argument('--rounds', type=int, default=9)
  p.add_argument('--link_mbits', type=float, default=None)
  args, _ = p.parse_known_args(argv)
  args.sets = parse_sets(args.sets)
  return args


def _set_steps(sets, num_workers: int) -> tuple:
  """(one fetch per set, the variables to initialise), in the default
  graph: each worker's source tensor of each size, reduced over all."""
  import tensorflow as tf

  from tf_cnn_benchmarks.scaling.profile import transport_bench as bench
  from variable_mgr import allreduce

  devices = [
    '/job:worker/replica:0/task:%d/device:CPU:0' % w for w in range(num_workers)
  ]
  fetches, variables = [], []
  for sizes in sets:
    tips = []
    for nbytes in sizes:
      starts = [bench.source_variable(nbytes, d) for d in devices]
      variables += starts
      sums = allreduce.collective_all_reduce(
        [tf.convert_to_tensor(s) for s in starts], devices
      )
      tips += [bench.tip(x) for x in sums]
    fetches.append(tf.group(*tips))
  return fetches, variables


def chief(args) -> list:
  """Worker 0: each set's timing (its ring_sets line's dict)."""
  import tensorflow as tf

  from tf_cnn_benchmarks.scaling.profile import transfer_cpu
  from tf_cnn_benchmarks.scaling.profile import transport_bench as bench

  server = launched_task.server(args)
  num_workers = len(launched_task.spec(args)['worker'])
  graph = tf.Graph()
  with graph.as_default():
    fetches, variables = _set_steps(args.sets, num_workers)
    init = tf.compat.v1.variables_initializer(variables)
  config = bench.plain_config()
  config.experimental.collective_group_leader = transfer_cpu.LEADER
  times = [[] for _ in fetches]
  with tf.compat.v1.Session(server.target, graph=graph, config=config) as s:
    s.run(init)
    for fetch in fetches * 2:  # builds the executors, resolves the groups
      s.run(fetch)
    for _ in range(args.rounds):
      for i, fetch in enumerate(fetches):
        start = time.perf_counter()
        s.run(fetch)
        times[i].append((time.perf_counter() - start) * 1000.0)
  return [
    _line(sizes, ms, num_workers, args.link_mbits)
    for sizes, ms in zip(args.sets, times)
  ]


def _line(sizes, ms, num_workers, link_mbits) -> dict:
  wire = wire_ms(sizes, num_workers, link_mbits)
  median = statistics.median(ms)
  return {
    'tensors': len(sizes),
    'bytes': sum(sizes),
    'workers': num_workers,
    'median_ms': round(median, 2),
    'min_ms': round(min(ms), 2),
    'max_ms': round(max(ms), 2),
    'wire_ms': None if wire is None else round(wire, 2),
    'wire_share': None if wire is None else round(wire / median, 3),
  }


def main(argv=None) -> int:
  """The task: worker 0 times, the others serve."""
  args = parse_args(sys.argv[1:] if argv is None else argv)
  if args.job_name == 'worker' and args.task_index == 0:
    for line in chief(args):
      print(PREFIX + json.dumps(line, sort_keys=True), flush=True)
  else:
    port_duplex.serve_while_chief_serves(args)
  return 0


if __name__ == '__main__':
  sys.exit(main())
