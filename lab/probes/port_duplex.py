"""Does a ps task's link carry a push in while it sends reads out? TF gRPC.

    python scripts/launch_local_cluster.py \\
        --module=lab.probes.port_duplex \\
        --num_workers=3 --num_ps=1 --no-controller \\
        [--link_mbits=R --topology=switch] -- [--message_bytes=B] [--rounds=N]

Each task gets the cluster flags from the launcher. Worker 0 drives three
steps from its own session and times each (the median of --rounds runs):

- push: a B-byte tensor made on worker 0, summed on the ps task: one message
  into the ps task's link (as a worker's push of its gradients);
- reads: a B-byte tensor made on the ps task, summed on every other worker:
  one message each out of the ps task's link (as the others' reads);
- both: the two at once.

It prints one line, `port_duplex: {"push_ms": ..., "reads_ms": ...,
"both_ms": ..., "overlap": ...}`. overlap is how much of the shorter of the
two the link carried beside the other: 1 when `both` takes as long as the
longer alone (a full-duplex port), 0 when it takes their sum (one direction
at a time). The other tasks serve until worker 0's server is gone.
"""

from __future__ import annotations

import json
import socket
import statistics
import sys
import time

from lab.probes import launched_task

PREFIX = 'port_duplex: '
# How often a serving task checks that worker 0 still serves.
POLL_S = 0.5


def parse_args(argv):
  """The task's flags (the launcher's cluster flags and this module's)."""
  p = launched_task.parser(__doc__.splitlines()[0])
  p.add_argument('--message_bytes', type=int, default=4 << 20)
  p.add_argument('--rounds', type=int, default=5)
  args, _ = p.parse_known_args(argv)
  return args


def overlap(push_ms: float, reads_ms: float, both_ms: float) -> float:
  """The share of the shorter step carried beside the longer (module
  docstring), clipped to 0..1."""
  shorter = min(push_ms, reads_ms)
  if shorter <= 0:
    return 0.0
  saved = push_ms + reads_ms - both_ms
  return round(min(1.0, max(0.0, saved / shorter)), 3)


def _fetches(nbytes: int, num_workers: int) -> dict:
  """{'push': op, 'reads': [ops], 'both': [...]} in the default graph."""
  import tensorflow as tf

  size = [max(1, nbytes // 4)]
  with tf.device('/job:worker/task:0/device:CPU:0'):
    gradient = tf.fill(size, 1.0)
  with tf.device('/job:ps/task:0/device:CPU:0'):
    push = tf.reduce_sum(gradient)
    value = tf.fill(size, 2.0)
  reads = []
  for w in range(1, num_workers):
    with tf.device('/job:worker/task:%d/device:CPU:0' % w):
      reads.append(tf.reduce_sum(value))
  return {'push': push, 'reads': reads, 'both': [push] + reads}


def chief(args) -> dict:
  """Worker 0: times the three steps; their medians and the overlap."""
  import tensorflow as tf

  from tf_cnn_benchmarks.scaling.profile import transport_bench as bench

  server = launched_task.server(args)
  num_workers = len(launched_task.spec(args)['worker'])
  graph = tf.Graph()
  with graph.as_default():
    fetches = _fetches(args.message_bytes, num_workers)
  out = {}
  with tf.compat.v1.Session(
    server.target, graph=graph, config=bench.plain_config()
  ) as s:
    for name in ('push', 'reads', 'both'):
      s.run(fetches[name])  # builds the executors
      times = []
      for _ in range(args.rounds):
        start = time.perf_counter()
        s.run(fetches[name])
        times.append((time.perf_counter() - start) * 1000.0)
      out[name + '_ms'] = round(statistics.median(times), 3)
  out['overlap'] = overlap(out['push_ms'], out['reads_ms'], out['both_ms'])
  return out


def serve_while_chief_serves(args) -> None:
  """A serving task: up until worker 0's server stops answering."""
  server = launched_task.server(args)
  host, port = launched_task.spec(args)['worker'][0].rsplit(':', 1)
  seen = False
  while True:
    try:
      socket.create_connection((host, int(port)), timeout=1.0).close()
      seen = True
    except OSError:
      if seen:
        break
    time.sleep(POLL_S)
  del server


def main(argv=None) -> int:
  """The task: worker 0 times, the others serve."""
  args = parse_args(sys.argv[1:] if argv is None else argv)
  if args.job_name == 'worker' and args.task_index == 0:
    print(PREFIX + json.dumps(chief(args)), flush=True)
  else:
    serve_while_chief_serves(args)
  return 0


if __name__ == '__main__':
  sys.exit(main())
