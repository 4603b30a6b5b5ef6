"""A small discrete-event simulation of jobs sharing resources.

A job is work of some `amount` (bytes for a transfer, microseconds of
full-speed work for compute) that starts `delay_us` after all its
dependencies finished (the delay is a message's latency: it holds no
resource). Alone, a job would progress at

    alone = min(cap, min over its resources r of capacity[r] / demand[j][r])

and ask demand[j][r] * alone of each resource. Where the running jobs ask a
resource for more than its capacity (load[r], the sum of those asks), each
of them gets the same share of what it asked (processor sharing), so it
progresses at

    rate = alone * min(1, min over its resources r of capacity[r] / load[r])

A transfer asks 1 unit of each link per byte (and, where it costs CPU, a
little of a CPU per byte); a compute job asks `cores_busy` cores per
microsecond of progress; a job crossing several links runs at the pace of
its most loaded one. (A transfer that shares a CPU with compute is slowed
by the CPU's overload, not held to the CPU's capacity in bytes: its ask is
scaled from its own full-speed rate.) The simulation runs until every job
finished and returns each job's finish time.

A resource may instead be shared by start order (`decay`: resource -> q,
0 < q <= 1): the k-th running job to have started there (k from 0; ties:
the one added first) weighs q^k, and an overloaded resource is split in
proportion to the weights, none above its ask (what one leaves goes to the
others). TCP flows that start together on one bottleneck do not end
together: the first of three ends at 0.6-0.9 of the last (measured,
cost_model_calibration.FLOW_STAGGER), as if it held a larger share. A job
may carry its own q (`stagger`: long messages stagger less), which it
weighs by there in place of the resource's.

A job may also use a resource first (`priority`: resource -> units per unit
of progress): that use never slows the job, it is taken off the resource
before the others share what is left. A transfer's per-byte CPU is such a
use: the kernel's packet work and the few cycles a streaming thread asks
per wake-up are served ahead of compute (measured: a 1 MB gRPC message with
every core kept busy by spinners takes 1.3 ms against 1.1 ms idle, while a
64-byte one, its CPU all software, takes three times as long; and 90 ms over
a 100 Mbit/s link, its wire time). Priority users of one resource that ask
more than it has share it among themselves; what they leave is at least
PRIORITY_FLOOR of it (the others never stop).

Jobs of one `crowd` (a label) running at the same time share part of their
work (`crowds`: label -> s, the shared fraction): each of k running costs
1 - s + s / k of its amount, as k messages in flight at once pay one
thread wake-up between them (measured with 16 at once, Transport.
cpu_shared_fraction). Such a job asks less of its resources per unit of
progress and may progress faster than its cap.

Jobs of one `queue` (a label) are served in the order they started (ties:
the one added first), as many at once as their resources have room for
(the first always): the others wait, holding nothing, but count as in
flight for their crowd. A host's messages are such a queue: each message's
CPU work (a few hundred microseconds, well under a scheduler's time slice)
runs to its end on a core, so the sends a step hands over at once do not
all finish their CPU work together and then all take to the wire; the
first goes out while the next is still being prepared (measured: a
three-worker ring after compute takes about its wire time, not its CPU
time plus its wire time; lab/notes/predicting_experiments_continued.md,
section 13).
"""

from __future__ import annotations

import dataclasses
import heapq
from typing import Dict, List, Sequence, Tuple

_EPS = 1e-9
# The share of a resource its priority users always leave to the others.
PRIORITY_FLOOR = 0.02


@dataclasses.dataclass
class Job:
  """One piece of work; see the module docstring.

  amount: work units (bytes or full-speed microseconds); 0 finishes at once.
  demands: resource -> resource units per unit of progress.
  cap: the fastest progress rate alone (units per microsecond).
  delay_us: fixed wait after the dependencies, holding no resource.
  deps: indices of jobs that must finish first.
  name: for debugging and tests.
  priority: resource -> units per unit of progress taken ahead of the
    other jobs' demands (module docstring).
  crowd: the label of the jobs it shares part of its work with ('' none).
  queue: the label of the jobs served in start order with it, as many at
    once as their resources hold ('' none).
  stagger: the q it weighs by on a resource shared by start order, in
    place of the resource's (0: the resource's).
  """

  amount: float
  demands: Dict[str, float] = dataclasses.field(default_factory=dict)
  cap: float = float('inf')
  delay_us: float = 0.0
  deps: Tuple[int, ...] = ()
  name: str = ''
  priority: Dict[str, float] = dataclasses.field(default_factory=dict)
  crowd: str = ''
  queue: str = ''
  stagger: float = 0.0


class Graph:
  """Jobs in the order they were added (a job only depends on earlier ones)."""

  def __init__(self):
    self.jobs: List[Job] = []

  def add(self, job: Job) -> int:
    """Adds `job`; returns its index."""
    for d in job.deps:
      if not 0 <= d < len(self.jobs):
        raise ValueError('job %r depends on unknown job %d' % (job.name, d))
    self.jobs.append(job)
    return len(self.jobs) - 1

  def join(self, deps: Sequence[int], name: str = 'join') -> int:
    """A zero-work job finishing when all of `deps` finished."""
    return self.add(Job(0.0, deps=tuple(sorted(set(deps))), name=name))


def _costs(jobs, running, crowds) -> Dict[int, float]:
  """{job: the share of its amount it costs now} for the running jobs of a
  crowd in `crowds` (1 - s + s / k, k of its crowd running)."""
  if not crowds:
    return {}
  count: Dict[str, int] = {}
  for j in running:
    if jobs[j].crowd in crowds:
      count[jobs[j].crowd] = count.get(jobs[j].crowd, 0) + 1
  return {
    j: 1.0 - crowds[jobs[j].crowd] * (1.0 - 1.0 / count[jobs[j].crowd])
    for j in running
    if jobs[j].crowd in count
  }


def _queued(jobs, running, started, capacity) -> set:
  """The running jobs waiting behind earlier-started ones of their queue.

  A queue serves its jobs in start order, as many at once as the resources
  they ask for hold (the first always): a job waits once its demands on top
  of those served before it would pass a resource's capacity.
  """
  members: Dict[str, List[int]] = {}
  for j in running:
    if jobs[j].queue:
      members.setdefault(jobs[j].queue, []).append(j)
  waiting = set()
  for mine in members.values():
    mine.sort(key=lambda j: (started[j], j))
    used: Dict[str, float] = {}
    for k, j in enumerate(mine):
      asks = jobs[j].demands
      if k and any(
        used.get(r, 0.0) + d > capacity[r] + _EPS for r, d in asks.items()
      ):
        waiting.update(mine[k:])
        break
      for r, d in asks.items():
        used[r] = used.get(r, 0.0) + d
  return waiting


def _rates(jobs, running, capacity, decay=None, started=None, costs=None):
  """The progress rate of each running job (see the module docstring).

  The jobs first share the resources as if no use had priority; the
  priority uses at those rates (scaled down where they ask more than a
  resource has) come off the capacities, and the jobs share what is left.
  """
  costs = costs or {}
  first = _shared_rates(jobs, running, capacity, decay, started, costs)
  users = [j for j in running if jobs[j].priority]
  if not users:
    return first
  load: Dict[str, float] = {}
  for j in users:
    for r, d in jobs[j].priority.items():
      if d > 0:  # alone, a job uses no more of a resource than it has
        first[j] = min(first[j], capacity[r] / d)
    for r, d in jobs[j].priority.items():
      load[r] = load.get(r, 0.0) + d * first[j]
  scale = {r: min(1.0, capacity[r] / u) for r, u in load.items() if u > 0}
  left = dict(capacity)
  for r, u in load.items():
    taken = u * scale.get(r, 1.0)
    left[r] = max(capacity[r] - taken, PRIORITY_FLOOR * capacity[r])
  rates = _shared_rates(jobs, running, left, decay, started, costs)
  for j in users:
    most = first[j] * min(scale.get(r, 1.0) for r in jobs[j].priority)
    rates[j] = min(rates[j], most)
  return rates


def _shared_rates(jobs, running, capacity, decay, started, costs):
  """The rates with every use shared (the priority uses left out; a crowd's
  job asks `costs[j]` of its demands per unit of progress, its cap over it).

  Each job first asks what it would use alone (its full-speed rate: its cap
  and its tightest resource), then every resource asked for more than it
  has slows its jobs: all by the same factor, or (a resource in `decay`)
  by weights of their start order (`started`: job -> start time).
  """
  alone, users = {}, {}
  for j in running:
    cost = costs.get(j, 1.0)
    rate = jobs[j].cap / cost
    for r, d in jobs[j].demands.items():
      if d > 0:  # nothing asked is nothing (0 * an unbounded rate is nan)
        rate = min(rate, capacity[r] / (d * cost))
        users.setdefault(r, []).append(j)
    alone[j] = rate
  factor = {j: 1.0 for j in running}
  for r, mine in users.items():
    asks = {j: jobs[j].demands[r] * costs.get(j, 1.0) * alone[j] for j in mine}
    if sum(asks.values()) <= capacity[r]:
      continue
    if decay and r in decay:
      order = sorted(mine, key=lambda j: (started[j], j))
      weights = {
        j: (jobs[j].stagger or decay[r]) ** k for k, j in enumerate(order)
      }
      shares = weighted_shares(capacity[r], asks, weights)
    else:
      scale = capacity[r] / sum(asks.values())
      shares = {j: a * scale for j, a in asks.items()}
    for j in mine:
      factor[j] = min(factor[j], shares[j] / asks[j])
  return {j: alone[j] * factor[j] for j in running}


def weighted_shares(capacity, asks, weights) -> dict:
  """`capacity` split in proportion to `weights`, none above its ask (what
  one does not take goes to the others in the same proportion)."""
  out, left, active = {}, capacity, dict(asks)
  while active:
    total = sum(weights[j] for j in active)
    full = [j for j, a in active.items() if a <= left * weights[j] / total]
    if not full:
      out.update({j: left * weights[j] / total for j in active})
      break
    for j in full:
      out[j] = active.pop(j)
      left -= out[j]
  return out


def _dependents(jobs):
  waiting = [len(set(j.deps)) for j in jobs]
  after: List[List[int]] = [[] for _ in jobs]
  for i, job in enumerate(jobs):
    for d in set(job.deps):
      after[d].append(i)
  return waiting, after


def run(
  graph: Graph, capacity: Dict[str, float], decay=None, crowds=None
) -> List[float]:
  """Simulates `graph`; returns every job's finish time (microseconds).

  capacity: resource -> units per microsecond (bytes/us for a link, cores
  for a CPU). A resource a job names must be in it. decay: {resource: q},
  the resources shared by start order (module docstring), or None.
  crowds: {crowd label: shared fraction s} (module docstring), or None.
  """
  jobs = graph.jobs
  for job in jobs:
    for r in (*job.demands, *job.priority):
      if r not in capacity or capacity[r] <= 0:
        raise ValueError('job %r uses unknown resource %r' % (job.name, r))
  waiting, after = _dependents(jobs)
  remaining = [max(0.0, j.amount) for j in jobs]
  finish = [float('nan')] * len(jobs)
  starts: List[Tuple[float, int]] = [
    (jobs[i].delay_us, i) for i in range(len(jobs)) if waiting[i] == 0
  ]
  heapq.heapify(starts)
  running: set = set()
  started: Dict[int, float] = {}
  now, left = 0.0, len(jobs)
  while left:
    while starts and starts[0][0] <= now + _EPS:
      j = heapq.heappop(starts)[1]
      running.add(j)
      started[j] = now
    done = [j for j in running if remaining[j] <= _EPS]
    if not done:
      costs = _costs(jobs, running, crowds)  # the queued are in flight
      queued = _queued(jobs, running, started, capacity)
      serving = running - queued
      rates = _rates(jobs, serving, capacity, decay, started, costs)
      rates.update(dict.fromkeys(queued, 0.0))
      now = _advance(rates, running, remaining, starts, now)
      continue
    for j in done:
      running.discard(j)
      finish[j], left = now, left - 1
      for k in after[j]:
        waiting[k] -= 1
        if waiting[k] == 0:
          heapq.heappush(starts, (now + jobs[k].delay_us, k))
  return finish


def _advance(rates, running, remaining, starts, now):
  """Moves time to the next finish or start at `rates`; the new time."""
  unbounded = [j for j in running if rates[j] == float('inf')]
  if unbounded:  # no cap and no resource: done at once
    for j in unbounded:
      remaining[j] = 0.0
    return now
  step = starts[0][0] - now if starts else float('inf')
  for j in running:
    if rates[j] > 0:
      step = min(step, remaining[j] / rates[j])
  if step == float('inf'):
    raise ValueError('the simulation is stuck (a job with rate 0)')
  for j in running:
    remaining[j] -= rates[j] * step
    if remaining[j] <= _EPS * max(1.0, rates[j] * step):
      remaining[j] = 0.0
  return now + step
