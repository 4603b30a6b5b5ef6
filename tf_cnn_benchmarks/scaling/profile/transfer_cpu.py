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
(messages_in_hop). Over three tasks (ps 0 joins the group) it is four
steps of three messages: a task's CPU per all-reduce grows by less than
its steps do (each task runs the op's kernel once), so the two group sizes
give a step's cost and the op's own (fit_group).

Used by lab/scripts/measure_transfer_cpu.py with the transport profile's tasks
(transport.serving_tasks) up; Linux (/proc) only.
"""

from __future__ import annotations

import dataclasses
import time

import tensorflow as tf

from tf_cnn_benchmarks.scaling.model import profile_format as fmt
from tf_cnn_benchmarks.scaling.profile import busy_cores
from tf_cnn_benchmarks.scaling.profile import transport_bench as bench

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
  tasks: int = 2  # the tasks a hop spans (a collective's group size)

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
      'tasks': self.tasks,
    }


def messages_in_hop(transport_name: str, tasks: int = 2) -> int:
  """Every message of one measured hop: its sequential steps times the
  tasks sending in each (every task in a collective's ring step, of which
  an all-reduce over n tasks has 2(n - 1))."""
  if transport_name == 'collective':
    return ring_steps(tasks) * tasks
  return fmt.MESSAGES_PER_HOP[transport_name]


def ring_steps(tasks: int) -> int:
  """The steps of a ring all-reduce over `tasks` (reduce-scatter, then
  all-gather): 2 (n - 1); fmt.MESSAGES_PER_HOP['collective'] at two."""
  return 2 * (tasks - 1)


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


def _group(tasks: int) -> list:
  """A collective's devices: the two workers, then ps 0 for a third."""
  if tasks not in (2, 3):
    raise ValueError('collective groups of 2 or 3 tasks, not %d' % tasks)
  return list(WORKERS) + [PS] * (tasks - 2)


def _chains(kind: str, nbytes: int, hops: int, copies: int = 1, tasks=2):
  """(short, long, the variables to initialise) in the default graph:
  `copies` independent chains of each length, run together (a collective's
  over `tasks` tasks)."""
  shorts, longs, variables = [], [], []
  for _ in range(copies):
    if kind == 'grpc':
      starts = [bench.source_variable(nbytes, PS)]
      pair = [PS, WORKERS[0]]
      shorts.append(bench.pass_chain(starts[0], pair, 1))
      longs.append(bench.pass_chain(starts[0], pair, 1 + hops))
    else:
      group = _group(tasks)
      starts = [bench.source_variable(nbytes, d) for d in group]
      shorts.append(bench.reduce_chain(starts, group, 1))
      longs.append(bench.reduce_chain(starts, group, 1 + hops))
    variables += starts
  return tf.group(*shorts), tf.group(*longs), variables


def measure(
  target, kind, nbytes, hops, pids, seconds, graph, copies=1, tasks=2
) -> tuple:
  """(wall us, lost core-us) of one hop of `kind` at `nbytes` (of
  `copies` hops at once; a collective's over `tasks` tasks).

  graph: the collectives share one graph (the tasks remember instance
  keys across graphs); a gRPC chain may take a new one.
  """
  config = bench.plain_config()
  config.experimental.collective_group_leader = LEADER
  with graph.as_default():
    short, long, variables = _chains(kind, nbytes, hops, copies, tasks)
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
  transport without one is left out; two-task hops only)."""
  out = {}
  for r in sorted(rows, key=lambda r: r.nbytes, reverse=True):
    if r.copies == fmt.CONCURRENT_MESSAGES and r.tasks == 2:
      out[r.transport] = max(0.0, r.lost_core_us / (r.messages * r.copies))
  return out


def fit(rows) -> dict:
  """{transport: (core-us a message, core-us a byte of a message)} of the
  HopCpu rows of each transport (its three or more sizes; rows of
  several copies at once, or of more than two tasks, are left out).

  A hop of an S-byte tensor is `messages` messages; they carry S
  bytes per ring step (fmt.MESSAGES_PER_HOP steps). The smallest
  size's loss is its messages'; the slope between the two largest sizes,
  per byte carried, is a byte's.
  """
  out = {}
  for name in sorted({r.transport for r in rows}):
    mine = _alone(rows, name, 2)
    small, mid, big = mine[0], mine[-2], mine[-1]
    steps = fmt.MESSAGES_PER_HOP[name]
    slope = (big.lost_core_us - mid.lost_core_us) / (big.nbytes - mid.nbytes)
    out[name] = (
      max(0.0, small.lost_core_us / small.messages),
      max(0.0, slope / steps),
    )
  return out


def _alone(rows, name, tasks) -> list:
  """The one-chain rows of transport `name` over `tasks`, by size."""
  mine = (
    r
    for r in rows
    if r.transport == name and r.copies == 1 and r.tasks == tasks
  )
  return sorted(mine, key=lambda r: r.nbytes)


def fit_group(rows) -> dict:
  """{transport: (core-us a ring step's message, core-us a task's op)}
  of each transport with one-chain rows of its smallest size over 2 and
  3 tasks.

  A task of an all-reduce over n tasks sends one message in each of its
  2(n - 1) steps and runs the op once: it pays op + step * 2(n - 1) =
  (the hop's loss) / n. Two group sizes give both (each kept >= 0, the
  two-task hop's loss kept whole).
  """
  out = {}
  for name in sorted({r.transport for r in rows if r.tasks == 3}):
    two, three = _alone(rows, name, 2), _alone(rows, name, 3)
    if not two or not three or two[0].nbytes != three[0].nbytes:
      continue
    per_task = {n: r[0].lost_core_us / n for n, r in ((2, two), (3, three))}
    step = (per_task[3] - per_task[2]) / (ring_steps(3) - ring_steps(2))
    step = min(max(step, 0.0), per_task[2] / ring_steps(2))
    out[name] = (step, per_task[2] - step * ring_steps(2))
  return out


def measure_all(
  target,
  pids,
  sizes=PROFILE_SIZES,
  seconds=PROFILE_SECONDS,
  kinds=('grpc', 'collective'),
  report=None,
  copies=(1,),
  groups=(2,),
):
  """HopCpu rows of each transport of `kinds` at `sizes` (and at the
  smallest size, with each number of `copies` at once, and a collective
  over each number of tasks in `groups` past 2, one chain), with the
  spinners `pids` running (a task whose collectives ran no other graph
  yet); `report` is called with each row as it is measured."""
  rows, collectives = [], tf.Graph()
  for kind, nbytes, k, tasks in _plan(kinds, sizes, copies, groups):
    hops = bench.plan_for(nbytes)[0]
    graph = collectives if kind == 'collective' else tf.Graph()
    wall, lost = measure(
      target, kind, nbytes, hops, pids, seconds, graph, k, tasks
    )
    messages = messages_in_hop(kind, tasks)
    rows.append(HopCpu(kind, nbytes, messages, wall, lost, k, tasks))
    if report:
      report(rows[-1])
  return rows


def _plan(kinds, sizes, copies, groups) -> list:
  """(kind, bytes, copies, tasks) of each row measure_all measures."""
  plan = []
  for kind in kinds:
    for nbytes in sizes:
      for k in copies:
        if k > 1 and nbytes != min(sizes):
          continue  # the shared cost is a message's, not its bytes'
        plan.append((kind, nbytes, k, 2))
    if kind == 'collective':
      plan += [(kind, min(sizes), 1, n) for n in groups if n > 2]
  return plan


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
      r.get('tasks', 2),
    )
    for r in items
  ]
