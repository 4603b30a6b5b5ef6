"""The pieces one step is simulated from: places, links, messages, work.

A place is where a tensor lives or an op runs:
  ('dev', w, d)   tower device d of worker w
  ('cpu', w)      worker w's CPU (its packed transfers, local means)
  ('ps', k)       ps task k
Each worker and each ps task is its own host (unless the target is
colocated: then every place computes on the profiled host's cores).

StepBuilder adds jobs to a simulate.Graph: a tower's compute in segments
that end where gradients become ready, messages (a software part that is
CPU work on the sender, then the bytes on the links they cross), phases
(concurrent equal messages that advance together, e.g. one ring step) and
plain work (adds, optimizer applies).
"""

from __future__ import annotations

from typing import Dict, Sequence

from tf_cnn_benchmarks.cluster import thread_pools
from tf_cnn_benchmarks.scaling.model import cost_model_calibration
from tf_cnn_benchmarks.scaling.model import simulate

# What a tower computes on: the profile's device kind.
_GPU_KINDS = ('gpu', 'cuda', 'rocm')
# The resources that are links between hosts ('up:w0', 'down:p1', 'link').
_LINK_RESOURCES = ('link', 'up', 'down')


def host_of(place) -> str:
  """The host a place is on: 'w0', 'p1'."""
  return 'p%d' % place[1] if place[0] == 'ps' else 'w%d' % place[1]


class StepBuilder:
  """Builds one step's jobs for a profile, a target and a calibration.

  compute_scale multiplies compute times and comm_scale transfer amounts
  (the uncertainty band runs the step at both ends).
  """

  def __init__(
    self, profile, target, calibration, *, compute_scale=1.0, comm_scale=1.0
  ):
    self.profile, self.target, self.cal = profile, target, calibration
    self.compute_scale, self.comm_scale = compute_scale, comm_scale
    self.graph = simulate.Graph()
    self.on_gpu = profile.host.device.lower() in _GPU_KINDS
    self.cores = target.cores_per_host or profile.host.cpu_cores
    local = profile.transports.get('local_copy')
    self.intra_bpu = target.intra_bytes_per_us or (
      local.bytes_per_us if local else 1e4
    )
    self.intra_latency = (
      target.intra_latency_us
      if target.intra_latency_us is not None
      else (local.latency_us if local else 0.0)
    )
    # An add streams like the optimizer's SGD apply (read two, write one):
    # its measured ms per MB gives the rate; a local copy may be by reference.
    per_mb = profile.apply.ps.ms_per_mb
    self.add_bpu = 1e3 / per_mb if per_mb > 0 else self.intra_bpu
    # An all-to-all flow asks 1/efficiency units of each port per byte.
    self.all_to_all_weight = 1.0 / (
      cost_model_calibration.all_to_all_efficiency(
        target.link_mbits, target.topology
      )
    )
    # A flow whose ports also carry the other way in its phase asks
    # 1/efficiency units of each per byte (a ring's).
    self.two_way_weight = 1.0 / calibration.two_way_efficiency(
      target.link_mbits, target.topology
    )
    # {crowd label: shared fraction}: the messages' CPU jobs of one
    # transport on the same hosts share part of it while in flight together
    # (simulate.py's crowds; see phase).
    self.crowds: Dict[str, float] = {}
    # {worker: jobs} its step waits for: the previous step's end there
    # when steps are chained (cost_model.simulate_step); see begin.
    self.previous_end: Dict[int, list] = {}
    # Whether the step sends to or from a ps task: a worker's graph then
    # has a partition there, started each step (cost_model.controller_us).
    self.touches_ps = False

  def begin(self, w: int) -> list:
    """The jobs worker w's step starts after (its first reads, its
    towers): the end of its previous step, when one was built."""
    return list(self.previous_end.get(w, ()))

  # ---- resources ---------------------------------------------------------

  def cpu(self, place) -> str:
    """The CPU resource a place's host work runs on."""
    return 'cpu' if self.target.colocated else 'cpu:' + host_of(place)

  def link_bpu(self, transport: str) -> float:
    """Bandwidth of a host link, bytes/us."""
    if self.target.link_mbits is not None:
      # link_mbits is the rate on the wire; messages move as TCP payload.
      return self.target.link_mbits / 8.0 * self.cal.value('wire_payload')
    return self.transport(transport).bytes_per_us

  def capacities(self) -> Dict[str, float]:
    """Every resource a job may name, with its capacity."""
    t = self.target
    hosts = ['w%d' % w for w in range(t.num_workers)]
    hosts += ['p%d' % k for k in range(t.num_ps)]
    link = self.link_bpu('grpc')
    caps = {'cpu': float(self.profile.host.cpu_cores), 'link': link}
    for h in hosts:
      caps.update({'cpu:' + h: float(self.cores), 'intra:' + h: self.intra_bpu})
      caps.update({'up:' + h: link, 'down:' + h: link})
    for w in range(t.num_workers):
      for d in range(t.devices_per_worker):
        caps['dev:w%d:%d' % (w, d)] = 1.0
    return caps

  def link_decay(self) -> Dict[str, float]:
    """{host link resource: q}: links share flows by their start order
    (simulate.py) with the flow_stagger of the target's links (measured;
    a calibration may give one q)."""
    t = self.target
    q = self.cal.flow_stagger(t.link_mbits, t.topology)
    return {
      r: q for r in self.capacities() if r.split(':')[0] in _LINK_RESOURCES
    }

  def measured_transport(self, name):
    """The profile's transport `name` (grpc when it has no such one), as
    measured: per hop."""
    transports = self.profile.transports
    return transports.get(name) or transports['grpc']

  def transport(self, name):
    """measured_transport(name) per message: a ring step is one message,
    and the profile's collective was timed per all-reduce of two tasks, two
    such steps."""
    return self.measured_transport(name).per_message()

  # ---- jobs --------------------------------------------------------------

  def work(
    self, places: Sequence, us: float, deps, name='work', crowd='', queue=''
  ) -> int:
    """Work of `us` full-speed microseconds at each of `places` at once
    (crowd, queue: simulate.Job's)."""
    demands: Dict[str, float] = {}
    for p in places:
      r = self._work_resource(p)
      demands[r] = demands.get(r, 0.0) + 1.0
    return self.graph.add(
      simulate.Job(
        us * self.compute_scale,
        demands,
        cap=1.0,
        deps=tuple(deps),
        name=name,
        crowd=crowd,
        queue=queue,
      )
    )

  def _work_resource(self, place) -> str:
    if place[0] == 'dev' and self.on_gpu:
      return 'dev:w%d:%d' % (place[1], place[2])
    return self.cpu(place)

  def add_us(self, nbytes: float) -> float:
    """Full-speed time of one element-wise add over `nbytes` (CPU only)."""
    return 0.0 if self.on_gpu else nbytes / self.add_bpu

  def phase(
    self, flows, nbytes, deps, transport='grpc', name='phase', repeat=1
  ) -> int:
    """Concurrent messages of `nbytes` each, one per (src, dst) flow.

    They advance together (at the pace of the most loaded link), like one
    step of a ring. repeat: that many such steps back to back, as one job
    (each step's latency and bytes counted; the shares of the links taken
    as constant over them). A phase is one operation: each sending host
    pays the transport's cpu_us_per_op once for it (a collective's kernel,
    whatever its steps); the phases sent by one set of hosts over one
    transport prepare their messages in the order they were handed over,
    as many at once as the cores hold (simulate.py's queues). Returns the
    job that finishes when all arrived.
    """
    flows = [(s, d) for s, d in flows if s != d]
    if not flows:
      return self.graph.join(deps, name)
    if any(p[0] == 'ps' for flow in flows for p in flow):
      self.touches_ps = True
    crowded = self._all_to_all_flows(flows)
    both_ways = self._two_way_flows(flows)
    demands, first, cap, delay, senders = {}, {}, float('inf'), 0.0, []
    for src, dst in flows:
      weight = self.all_to_all_weight if (src, dst) in crowded else 1.0
      weight *= self.two_way_weight if (src, dst) in both_ways else 1.0
      c, lat, soft = self._flow(
        src, dst, transport, nbytes, (demands, first), weight
      )
      cap, delay = min(cap, c), max(delay, lat)
      if soft > 0:
        senders.append((src, soft))
    if senders:  # the transport's own work runs on the sender's host CPU
      op = self.transport(transport).cpu_us_per_op or 0.0  # once per phase
      soft = (max(s for _, s in senders) * repeat + op) / self.compute_scale
      hosts = [('cpu', p[1]) if p[0] == 'dev' else p for p, _ in senders]
      crowd = self._crowd(transport, hosts)
      queue = '%s@%s' % (transport, ','.join(sorted(map(host_of, hosts))))
      deps = [self.work(hosts, soft, deps, name + '/rpc', crowd, queue)]
    amount = nbytes * repeat * self.comm_scale
    t = self.target  # long messages stagger less (cost_model_calibration)
    stagger = self.cal.message_stagger(nbytes, t.link_mbits, t.topology)
    return self.graph.add(
      simulate.Job(
        amount,
        demands,
        cap,
        delay * repeat,
        tuple(deps),
        name,
        first,
        stagger=stagger,
      )
    )

  def _crowd(self, transport, hosts) -> str:
    """The crowd label of a phase's message CPU: its transport and the CPUs
    it runs on. Messages in flight together share part of their CPU (one
    thread wake-up serves several): the transport's measured
    cpu_shared_fraction, '' (none) when it has none."""
    shared = self.measured_transport(transport).cpu_shared_fraction()
    if shared <= 0:
      return ''
    cpus = sorted({self.cpu(h) for h in hosts})
    label = '%s@%s' % (transport, ','.join(cpus))
    self.crowds[label] = shared
    return label

  def message(self, src, dst, nbytes, deps, transport='grpc', name='msg'):
    """One message (a phase of one flow)."""
    return self.phase([(src, dst)], nbytes, deps, transport, name)

  def _all_to_all_flows(self, flows) -> set:
    """The flows of a phase whose sender sends to, and whose receiver
    receives from, more than one other host (an all-to-all part): they
    fill the links less well than one flow per port
    (cost_model_calibration.ALL_TO_ALL_EFFICIENCY, and _SHARED)."""
    if self.all_to_all_weight == 1.0:
      return set()
    outs, ins = {}, {}
    for s, d in flows:
      hs, hd = host_of(s), host_of(d)
      if hs != hd:
        outs.setdefault(hs, set()).add(hd)
        ins.setdefault(hd, set()).add(hs)
    return {
      (s, d)
      for s, d in flows
      if len(outs.get(host_of(s), ())) > 1 and len(ins.get(host_of(d), ())) > 1
    }

  def _two_way_flows(self, flows) -> set:
    """The flows of a phase between hosts whose ports carry data the other
    way too in it (the sender receives and the receiver sends, as every
    host of a ring does): they fill each way less than a one-way flow
    (cost_model_calibration.TWO_WAY_EFFICIENCY)."""
    if self.two_way_weight == 1.0:
      return set()
    hops = [(host_of(s), host_of(d)) for s, d in flows]
    senders = {hs for hs, hd in hops if hs != hd}
    receivers = {hd for hs, hd in hops if hs != hd}
    return {
      (s, d)
      for (s, d), (hs, hd) in zip(flows, hops)
      if hs != hd and hs in receivers and hd in senders
    }

  def _flow(self, src, dst, transport, nbytes, uses, weight=1.0):
    """Adds one flow's link demands (`weight` units of each port per byte)
    and its CPU per byte to `uses` (demands, priority uses); returns (cap,
    wire delay, cpu us).

    The CPU per byte is the transport's (measured over loopback) and the
    link's (cost_model_calibration.LINK_CPU: frames one by one), half on
    each end, taken ahead of compute (simulate.py: it does not slow the
    transfer, it slows what shares the cores)."""
    demands, first = uses

    def use(r, amount, into=demands):
      into[r] = into.get(r, 0.0) + amount

    hs, hd = host_of(src), host_of(dst)
    if hs == hd:  # one process: a device link, or a copy in host memory
      if self.on_gpu and 'dev' in (src[0], dst[0]):
        use('intra:' + hs, 1.0)  # PCIe / NVLink between a GPU and the host
        return self.intra_bpu, self.intra_latency, 0.0
      # Logical CPU devices of one process share host memory: a tensor
      # crosses by reference, only the executor's hop costs time.
      return float('inf'), self.intra_latency, 0.0
    t = self.transport(transport)
    if self.target.topology == 'shared':
      use('link', weight)
    else:
      use('up:' + hs, weight)
      use('down:' + hd, weight)
    per_byte = t.cpu_us_per_byte
    if per_byte is None:  # not measured: the assumed cores at its rate
      per_byte = self.cal.value('interference_cores') / t.bytes_per_us
    per_byte += self.cal.link_cpu(
      self.target.link_mbits, self.target.topology, transport
    )
    use(self.cpu(src), per_byte / 2.0, first)  # half on each end
    use(self.cpu(dst), per_byte / 2.0, first)
    latency = max(0.0, t.time_us(nbytes) - nbytes / t.bytes_per_us)
    soft, delay = t.cpu_us_per_message, latency  # measured: beside it
    if soft is None:  # not measured: a share of the latency is CPU work
      soft = latency * self.cal.value('latency_cpu_fraction')
      delay = latency - soft
    return t.bytes_per_us, delay + self.target.link_latency_us, soft

  def transfers_wait_for_compute(self) -> bool:
    """Whether a worker's all-reduce transfers start only once its compute
    is done.

    A worker whose server has one inter-op thread (--cluster_threads=auto
    gives that to workers sharing a small host) runs on it the compute it
    keeps making ready, and gets to the receives queued at the step's start
    only when that compute is done (traced: lab/notes/predicting_experiments.md,
    section 7). GPU towers leave the thread free (their kernels are queued
    on streams); one worker has no transfers between hosts.
    """
    t = self.target
    if self.on_gpu or t.num_workers < 2:
      return False
    pools = thread_pools.ThreadPools(0, t.worker_inter_op_threads or 0)
    return thread_pools.inter_op_threads(pools, self.cores) == 1

  # ---- a tower's compute -------------------------------------------------

  def tower(self, w: int, d: int, deps, gates=None) -> tuple:
    """Tower d of worker w: (job per gradient ready, the last job).

    The forward and backward pass run as segments cut at the gradients'
    profiled ready times (scaled by compute_scale); gradient i is ready
    when the segment ending at its ready time finishes. gates: {profiled
    ms: jobs} the compute from that point on waits for (a value read from
    another task gates only the ops that use it, not the whole step).
    """
    grads, gates = self.profile.gradients, gates or {}
    cuts = {g.ready_ms for g in grads} | {self.compute_ms()} | set(gates)
    place = ('dev', w, d)
    demands = {self._work_resource(place): self.tower_cores()}
    job_at, last, start = {}, self.graph.join(deps, 'start'), 0.0
    for end in sorted(cuts):
      waits = (last,) + tuple(gates.get(start, ()))
      last = self.graph.add(
        simulate.Job(
          (end - start) * 1000.0 * self.compute_scale,
          demands,
          cap=1.0,
          deps=waits,
          name='compute w%d d%d' % (w, d),
        )
      )
      job_at[end], start = last, end
    return [job_at[g.ready_ms] for g in grads], last

  def forward_use_ms(self, i: int) -> float:
    """When tower compute first uses variable i, in profiled ms: its
    gradient's place in the backward pass mirrored into the forward pass
    (layers run backward in the reverse order of forward)."""
    c, ready = self.profile.compute, self.profile.gradients[i].ready_ms
    forward, backward = c.forward_ms, c.backward_ms
    if forward <= 0 or backward <= 0:
      return 0.0
    into_backward = min(max((ready - forward) / backward, 0.0), 1.0)
    return forward * (1.0 - into_backward)

  def tower_cores(self) -> float:
    """The cores a tower asks for while it computes.

    One tower alone keeps compute.cores_busy cores busy. k towers at once
    on one CPU host (colocated workers, or a worker's CPU towers) get less
    done than k times that: the profile measured how much, speedup(k)
    (profile_concurrent.py). So each asks cores/speedup(k): alone on the
    host's cores, the k of them then run at speedup(k)/k of one tower's
    pace, as measured, and what else runs there (transfers, adds) takes
    its share of all the cores. cores_busy when that was not measured, for
    one tower, and for target hosts of another size (--cores_per_host).
    """
    if self.on_gpu:
      return 1.0
    busy = max(self.profile.compute.cores_busy, 1e-3)
    t = self.target
    towers = t.devices_per_worker * (t.num_workers if t.colocated else 1)
    speedup = self.profile.compute.speedup(towers)
    if speedup is None or t.cores_per_host:
      return busy
    cores = self.profile.host.cpu_cores if t.colocated else self.cores
    return cores / speedup

  def compute_ms(self) -> float:
    """Forward and backward of one tower: until the last gradient is ready."""
    c = self.profile.compute
    last = max(g.ready_ms for g in self.profile.gradients)
    return max(last, c.forward_ms + c.backward_ms)

  def apply_ms(self, where: str, gradients) -> float:
    """The optimizer apply of `gradients` on a worker or a ps task."""
    cost = getattr(self.profile.apply, where)
    return sum(cost.ms(g.bytes) for g in gradients)

  def overhead_ms(self) -> float:
    """What the profiled step spends beyond compute and apply (fixed)."""
    grads = self.profile.gradients
    rest = self.profile.compute.step_ms - self.compute_ms()
    return max(0.0, rest - self.apply_ms('worker', grads))
