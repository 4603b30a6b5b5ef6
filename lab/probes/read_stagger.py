"""Workers reading one ps task at once over TF's gRPC: when each read ends.

    python scripts/launch_local_cluster.py \\
        --module=lab.probes.read_stagger \\
        --num_workers=3 --num_ps=1 --no-controller \\
        [--link_mbits=R --topology=shared|switch] \\
        -- --start_at=EPOCH_S [--read_bytes=B] [--rounds=N] [--period_ms=P]

Each task gets the cluster flags from the launcher. The ps task serves until
the rounds are over. Each worker reads a B-byte tensor that the ps task
makes (one gRPC response, as a packed ps read is) at the same wall-clock
times as the others: round r at --start_at + r * --period_ms (one host
clock for every task). It prints one line, `read_stagger: {"task": k,
"ends_ms": [...]}`: how long after the round's start its read ended.

TCP flows that start together on one bottleneck do not end together
(lab/notes/predicting_experiments.md); this times it for TensorFlow's own
transfers, as a ps task answers every worker's read of a step.
summarise() turns the workers' lines into each finisher's median end and
its share of the last one's.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from lab.probes import launched_task
from tf_cnn_benchmarks.platform import json_input

PREFIX = 'read_stagger: '


def parse_args(argv):
  """The task's flags (the launcher's cluster flags and this module's)."""
  p = launched_task.parser(__doc__.splitlines()[0])
  p.add_argument('--start_at', type=float, required=True)
  p.add_argument('--read_bytes', type=int, default=1 << 20)
  p.add_argument('--rounds', type=int, default=15)
  p.add_argument('--period_ms', type=float, default=1000.0)
  args, _ = p.parse_known_args(argv)
  return args


def _read_fetch(nbytes: int, task: int):
  """A tensor the ps task makes, summed on worker `task`: one response."""
  import tensorflow as tf

  with tf.device('/job:ps/task:0/device:CPU:0'):
    value = tf.fill([max(1, nbytes // 4)], 1.0)
  with tf.device('/job:worker/task:%d/device:CPU:0' % task):
    return tf.reduce_sum(value)


def worker(args) -> dict:
  """Runs the rounds; {'task': k, 'ends_ms': [...]}."""
  import tensorflow as tf

  from tf_cnn_benchmarks.scaling.profile import transport_bench as bench

  tf1 = tf.compat.v1
  server = launched_task.server(args)
  graph = tf.Graph()
  with graph.as_default():
    fetch = _read_fetch(args.read_bytes, args.task_index)
  ends = []
  with tf1.Session(
    server.target, graph=graph, config=bench.plain_config()
  ) as s:
    for _ in range(3):  # builds the executors before the first round
      s.run(fetch)
    for r in range(args.rounds):
      start = args.start_at + r * args.period_ms / 1000.0
      time.sleep(max(0.0, start - time.time()))
      s.run(fetch)
      ends.append(round((time.time() - start) * 1000.0, 3))
  return {'task': args.task_index, 'ends_ms': ends}


def summarise(lines) -> dict:
  """From the workers' lines: each finisher's median end (ms, the first
  to end first) and those ends as shares of the last one's."""
  per_task = [
    json_input.loads(ln[ln.index(PREFIX) + len(PREFIX) :], "a worker's line")
    for ln in lines
  ]
  ends, shares = finisher_medians(zip(*[t['ends_ms'] for t in per_task]))
  return {'ends_ms': ends, 'shares': shares}


def finisher_medians(rounds) -> tuple:
  """([median end of the k-th to finish], [those over the last one's]) of
  rounds of flows' end times (each round in any order), rounded to 3."""
  ordered = [sorted(r) for r in rounds]
  ends = [
    statistics.median(r[k] for r in ordered) for k in range(len(ordered[0]))
  ]
  return [round(t, 3) for t in ends], [round(t / ends[-1], 3) for t in ends]


def main(argv=None) -> int:
  """The task: the ps serves, a worker times its reads."""
  args = parse_args(sys.argv[1:] if argv is None else argv)
  if args.job_name == 'ps':
    server = launched_task.server(args)
    end = args.start_at + args.rounds * args.period_ms / 1000.0 + 10.0
    time.sleep(max(0.0, end - time.time()))
    del server
    return 0
  print(PREFIX + json.dumps(worker(args)), flush=True)
  return 0


if __name__ == '__main__':
  sys.exit(main())
