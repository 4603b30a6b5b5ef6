"""What one transfer takes from the compute beside it, measured.

A transfer between tasks on one host is CPU work (serialising, copies, the
RPC's threads). On a host whose cores all compute, that work is taken from
the compute. This measures it directly: with one spinning process per core
(busy_cores.spinners), a chain of messages runs for a while, and the
spinners' CPU time shows how much they lost. A short chain and a chain with
H more hops run for the same time each (transport_bench's chains), so

    lost per hop = (lost per long run - lost per short run) / H

where a run's loss is (cores x its wall time - the spinners' CPU in it).
The wall time per hop comes the same way. With `copies` > 1 that many
chains run at once (independent hops in flight together, as a step's
gradients are): a message's CPU then is what the copies' hops lost over
all their messages. A gRPC hop is one message; a
collective's hop, an all-reduce over two tasks, is two ring steps
(fmt.MESSAGES_PER_HOP) in each of which both tasks send one: four
(messages_in_hop).

Used by scripts/measure_transfer_cpu.py with the transport profile's tasks
(transport.serving_tasks) up; Linux (/proc) only.
"""

from __future__ import annotations

import dataclasses
import time

import tensorflow as tf

from tf_cnn_benchmarks.scaling import busy_cores
from tf_cnn_benchmarks.scaling import profile_format as fmt
from tf_cnn_benchmarks.scaling import transport_bench as bench

tf1 = tf.compat.v1

PS = '/job:ps/replica:0/task:0/device:CPU:0'
WORKERS = tuple(
  '/job:worker/replica:0/task:%d/device:CPU:0' % t for t in (0, 1)
)
LEADER = '/job:worker/replica:0/task:0'  # of the collectives' group


@dataclasses.dataclass(frozen=True)
class Window:
  """Runs of one chain for a while: how many, their wall seconds, and the
  spinners' CPU seconds meanwhile."""

  runs: int
  wall_s: float
  spinner_cpu_s: float


@dataclasses.dataclass(frozen=True)
class HopCpu:
  """One transport and size: a hop's wall time and the CPU it took."""

  transport: str
  nbytes: int
  messages: int  # all the hop's messages (every task's)
  wall_us: float  # per hop (of every copy at once), all cores busy
  lost_core_us: float  # per hop (of every copy): spinner CPU lost
  copies: int = 1  # chains run at once

  @property
  def cores(self) -> float:
    """Cores the hop kept from the spinners while it ran."""
    return self.lost_core_us / self.wall_us if self.wall_us > 0 else 0.0

  def as_json(self) -> dict:
    """The figures, per hop and per message."""
    m = self.messages * self.copies
    return {
      'transport': self.transport,
      'bytes': self.nbytes,
      'copies': self.copies,
      'messages_in_hop': self.messages,
      'wall_us_per_hop': round(self.wall_us, 1),
      'lost_core_us_per_hop': round(self.lost_core_us, 1),
      'lost_core_us_per_message': round(self.lost_core_us / m, 1),
      'cores': round(self.cores, 3),
    }


def messages_in_hop(transport_name: str) -> int:
  """Every message of one measured hop: its sequential steps times the
  tasks sending in each (both tasks in a collective's ring step)."""
  senders = 2 if transport_name == 'collective' else 1
  return fmt.MESSAGES_PER_HOP[transport_name] * senders


def per_hop(short: Window, long: Window, hops: int, cores: int) -> tuple:
  """(wall us, lost core-us) of one hop from a short and a long window."""

  def per_run(w):
    lost = cores * w.wall_s - w.spinner_cpu_s
    return w.wall_s / w.runs, lost / w.runs

  (wall_s, lost_s), (wall_l, lost_l) = per_run(short), per_run(long)
  return (wall_l - wall_s) * 1e6 / hops, (lost_l - lost_s) * 1e6 / hops


def _window(sess, fetch, pids, seconds) -> Window:
  runs, cpu0, start = 0, busy_cores.cpu_seconds(pids), time.perf_counter()
  while time.perf_counter() - start < seconds:
    sess.run(fetch)
    runs += 1
  wall = time.perf_counter() - start
  return Window(runs, wall, busy_cores.cpu_seconds(pids) - cpu0)


def _chains(kind: str, nbytes: int, hops: int, copies: int = 1):
  """(short, long, the variables to initialise) in the default graph:
  `copies` independent chains of each length, run together."""
  shorts, longs, variables = [], [], []
  for _ in range(copies):
    if kind == 'grpc':
      starts = [bench.source_variable(nbytes, PS)]
      pair = [PS, WORKERS[0]]
      shorts.append(bench.pass_chain(starts[0], pair, 1))
      longs.append(bench.pass_chain(starts[0], pair, 1 + hops))
    else:
      starts = [bench.source_variable(nbytes, d) for d in WORKERS]
      shorts.append(bench.reduce_chain(starts, list(WORKERS), 1))
      longs.append(bench.reduce_chain(starts, list(WORKERS), 1 + hops))
    variables += starts
  return tf.group(*shorts), tf.group(*longs), variables


def measure(
  target, kind, nbytes, hops, pids, seconds, graph, copies=1
) -> tuple:
  """(wall us, lost core-us) of one hop of `kind` at `nbytes` (of
  `copies` hops at once).

  graph: the collectives share one graph (the tasks remember instance
  keys across graphs); a gRPC chain may take a new one.
  """
  config = bench.plain_config()
  config.experimental.collective_group_leader = LEADER
  with graph.as_default():
    short, long, variables = _chains(kind, nbytes, hops, copies)
    init = tf1.variables_initializer(variables)
  with tf1.Session(target, graph=graph, config=config) as sess:
    sess.run(init)
    for fetch in (short, long, short, long):  # build the executors
      sess.run(fetch)
    first = _window(sess, short, pids, seconds)
    second = _window(sess, long, pids, seconds)
  return per_hop(first, second, hops, len(pids))


# Sizes the profile measures the CPU at: the smallest gives a message's
# own cost (its bytes are nothing), the two largest the cost of a byte.
PROFILE_SIZES = (64, 1 << 20, 16 << 20)
PROFILE_SECONDS = 2.0


def fit_concurrent(rows) -> dict:
  """{transport: core-us a message with fmt.CONCURRENT_MESSAGES chains in
  flight at once}, from the smallest size's row of that many copies (a
  transport without one is left out)."""
  out = {}
  for r in sorted(rows, key=lambda r: r.nbytes, reverse=True):
    if r.copies == fmt.CONCURRENT_MESSAGES:
      out[r.transport] = max(0.0, r.lost_core_us / (r.messages * r.copies))
  return out


def fit(rows) -> dict:
  """{transport: (core-us a message, core-us a byte of a message)} of the
  HopCpu rows of each transport (its three or more sizes; rows of
  several copies at once are left out).

  A hop of an S-byte tensor is `messages` messages; they carry S
  bytes per ring step (fmt.MESSAGES_PER_HOP steps). The smallest
  size's loss is its messages'; the slope between the two largest sizes,
  per byte carried, is a byte's.
  """
  out = {}
  for name in sorted({r.transport for r in rows}):
    mine = sorted(
      (r for r in rows if r.transport == name and r.copies == 1),
      key=lambda r: r.nbytes,
    )
    small, mid, big = mine[0], mine[-2], mine[-1]
    steps = fmt.MESSAGES_PER_HOP[name]
    slope = (big.lost_core_us - mid.lost_core_us) / (big.nbytes - mid.nbytes)
    out[name] = (
      max(0.0, small.lost_core_us / small.messages),
      max(0.0, slope / steps),
    )
  return out


def measure_all(
  target,
  pids,
  sizes=PROFILE_SIZES,
  seconds=PROFILE_SECONDS,
  kinds=('grpc', 'collective'),
  report=None,
  copies=(1,),
):
  """HopCpu rows of each transport of `kinds` at `sizes` (and at the
  smallest size, with each number of `copies` at once), with the spinners
  `pids` running (a task whose collectives ran no other graph yet);
  `report` is called with each row as it is measured."""
  rows, collectives = [], tf.Graph()
  for kind in kinds:
    for nbytes in sizes:
      for k in copies:
        if k > 1 and nbytes != min(sizes):
          continue  # the shared cost is a message's, not its bytes'
        hops = bench.plan_for(nbytes)[0]
        graph = collectives if kind == 'collective' else tf.Graph()
        wall, lost = measure(
          target, kind, nbytes, hops, pids, seconds, graph, k
        )
        messages = messages_in_hop(kind)
        rows.append(HopCpu(kind, nbytes, messages, wall, lost, k))
        if report:
          report(rows[-1])
  return rows


def rows_from_json(items) -> list:
  """HopCpu rows of their as_json() forms."""
  return [
    HopCpu(
      r['transport'],
      r['bytes'],
      r['messages_in_hop'],
      r['wall_us_per_hop'],
      r['lost_core_us_per_hop'],
      r.get('copies', 1),
    )
    for r in items
  ]
