"""A strategy's step on a HardwareTarget in closed form (no simulation).

Every GPU of the cluster computes the same step, so one GPU's timeline
stands for all: its compute (the profile's step), its gradients' ready
times, and the messages each strategy sends for them, queued one after
another on the strategy's bottleneck (a host's NIC, a GPU's link, a PCIe
link to host memory, the ps task's CPU). A message starts when its
gradient is ready and the one before it is done, so communication overlaps
the backward pass (not NCCL's: NCCL_OVERLAPS_COMPUTE); the step ends when
both the compute and the last message are done, plus what must follow them
(the apply). The ps strategies queue each variable's push, and its read,
on every distinct host's NIC directions and comm cores (HostLanes), where
the classic harness makes them. The work is O(gradients x distinct
hosts), whatever the cluster's size.

Costs of one all-reduce of b bytes over n ranks (each rank's link B, each
step's latency L; NCCL's own accounting, nccl-tests PERFORMANCE.md):
ring 2(n-1)/n * b / B + 2(n-1) L; tree (NCCL 2.4's double binary trees:
logarithmic latency, the same bus bandwidth) 2(n-1)/n * b / B +
2 ceil(log2 n) L. Across hosts the NIC is the B of a ring's crossing.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import statistics

from tf_cnn_benchmarks.scaling.model import cost_model_compression as cmc
from tf_cnn_benchmarks.scaling.model import cost_model_strategies as st
from tf_cnn_benchmarks.scaling.model import hardware as hw_lib

_ITEMSIZE = {'float32': 4, 'float16': 2, 'bfloat16': 2, 'float64': 8}
# TensorFlow ops dispatched per step of xring / collective rings inside a
# host: assumed 20 us each (an op's executor and stream handoff), no figure
# read; NCCL's kernels run a whole ring in one launch (the link's latency).
TF_STEP_US = 20.0
# The standard normal's 90th percentile (p10..p90 spans 2 x this sigma).
_Z90 = statistics.NormalDist().inv_cdf(0.9)
# Horovod's cycle runs apart from the step: its phase against the step is
# averaged over this many evenly spread starts.
_CYCLE_PHASES = 8
# NCCL's collectives are CUDA kernels on the GPU's SMs (NCCL user guide,
# overview), launched beside the backward pass's kernels, and the compute
# they overlap slows: NVIDIA/nccl#338 (batch-norm backward kernels 4-8 ms
# overlapped with an all-reduce, 2 ms alone), #661, #689. The model gives an
# NCCL all-reduce no credit for overlap: it runs after the compute. The ps
# strategies' copies are DMA on the copy engines (cudaMemcpy), and keep theirs.
NCCL_OVERLAPS_COMPUTE = False
# The optimizer's apply on a CPU reads the variable and the gradient and
# writes the variable: 3 passes over the bytes.
APPLY_PASSES = 3.0


class HardwareStrategyError(ValueError):
  """A strategy the hardware model does not cover (one line)."""


@dataclasses.dataclass(frozen=True)
class Step:
  """One step's time and its parts (ms)."""

  step_ms: float
  compute_ms: float
  exposed_ms: float  # what communication adds beyond the compute


def ring_ms(nbytes, n, bytes_per_us, latency_us, algorithm='ring'):
  """All-reduce of nbytes over n ranks (ring or tree), in ms."""
  if n <= 1 or nbytes <= 0:
    return 0.0
  moved = 2.0 * (n - 1) / n * nbytes / bytes_per_us
  steps = 2 * (n - 1) if algorithm == 'ring' else 2 * math.ceil(math.log2(n))
  return (moved + steps * latency_us) / 1000.0


def fifo_end(messages) -> float:
  """When the last of [(ready_ms, cost_ms)] ends, sent one at a time in
  the order they are ready."""
  t = 0.0
  for ready, cost in sorted(messages):
    t = max(t, ready) + cost
  return t


def wire_bytes(gradient, hw) -> float:
  """A gradient's bytes on the wire at the target's gradient precision."""
  elements = gradient.bytes / _ITEMSIZE.get(gradient.dtype, 4)
  return elements * hw_lib.PRECISIONS[hw.gradient_precision]


def _fp32_bytes(gradient) -> float:
  """A gradient's variable's bytes (fp32 master copy)."""
  return gradient.bytes * 4 / _ITEMSIZE.get(gradient.dtype, 4)


def var_bytes(profile) -> float:
  """The variables' bytes (fp32 master copies)."""
  return sum(_fp32_bytes(g) for g in profile.gradients)


class Costs:
  """The all-reduce costs of one target (ms for b bytes)."""

  def __init__(self, hw):
    self.hw = hw
    self.link = hw.ring_link()
    self.g, self.h, self.n = hw.gpus_per_host, hw.num_workers, hw.num_devices
    self.b_intra = self.link.bytes_per_us
    self.b_net = hw.net_bytes_per_us()
    self.l_net = hw.net_latency_us()
    self.b_host = self.link.host_gb_s * 1e3 * hw_lib._PCIE_PAYLOAD
    self.cpu = hw.cpu_bytes_per_us()

  def nccl(self, b):
    """NCCL over every GPU: one ring (or trees) through every host."""
    alg = self.hw.nccl_algorithm
    if self.h == 1:
      return ring_ms(b, self.g, self.b_intra, self.link.latency_us, alg)
    slowest = min(self.b_intra, self.b_net)
    return ring_ms(b, self.n, slowest, self.l_net, alg)

  def hierarchical(self, b):
    """Horovod's hierarchical all-reduce: NCCL reduce-scatter in the host,
    an all-reduce of the host's sum across hosts (every GPU's shard at
    once through the NIC), NCCL all-gather in the host; one after another."""
    inside = ring_ms(b, self.g, self.b_intra, self.link.latency_us)
    across = ring_ms(b, self.h, self.b_net, self.l_net, self.hw.nccl_algorithm)
    return inside + across

  def to_host(self, b):
    """Every GPU's b bytes to host memory (GPUs sharing a PCIe link wait
    for each other; a host with fewer GPUs shares it with fewer)."""
    sharing = min(self.hw.gpus_per_host_link, self.g)
    return sharing * b / self.b_host / 1000.0

  def cpu_ms(self, b):
    """The host CPU streaming through b bytes once."""
    return b / self.cpu / 1000.0

  def intra(self, alg, b):
    """One host's part of a spec: algorithm `alg` over its GPUs."""
    g, lat = self.g, self.link.latency_us
    if g <= 1:
      return 0.0
    if alg == 'nccl':
      return ring_ms(b, g, self.b_intra, lat, self.hw.nccl_algorithm)
    if alg in ('xring', 'collective'):
      return ring_ms(b, g, self.b_intra, TF_STEP_US)
    if alg == 'rechd':
      return ring_ms(b, g, self.b_intra, TF_STEP_US, 'tree')
    if alg == 'pscpu':  # gathered to host memory, summed, sent back
      return 2 * self.to_host(b) + self.cpu_ms(g * b) + 2 * lat / 1e3
    # psgpu, copy, shuffle, hierarchical_copy: gathered on GPUs, each
    # tensor on one (spread over all): a GPU moves (g-1)/g of the bytes.
    return 2.0 * (g - 1) / g * b / self.b_intra / 1e3 + 2 * TF_STEP_US / 1e3

  def across(self, alg, b):
    """The hosts' part: `alg` over one rank per host through the NICs."""
    if self.h <= 1:
      return 0.0
    steps = 'tree' if alg in ('rechd',) else 'ring'
    if alg in ('pscpu', 'psgpu', 'copy', 'hierarchical_copy', 'shuffle'):
      # gathered on one host per tensor (spread over all): like a ring's
      # bytes, two messages of latency.
      return 2.0 * (self.h - 1) / self.h * b / self.b_net / 1e3 + (
        2 * self.l_net / 1e3
      )
    return ring_ms(b, self.h, self.b_net, self.l_net, steps)


def expected_max_z(n: int) -> float:
  """E[max of n standard normal draws] (Blom's approximation, exact at
  n = 1 and within 1% beyond): Phi^-1((n - 0.375) / (n + 0.25))."""
  if n <= 1:
    return 0.0
  return statistics.NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def compute_ms(profile, n: int) -> float:
  """The compute of a synchronous step over n GPUs: each waits for the
  slowest, so the step is the expected longest of n draws of one GPU's
  step (normal, its sigma from the profile's p10..p90: 2 x 1.2816 sigma)."""
  c = profile.compute
  sigma = max(0.0, c.step_ms_p90 - c.step_ms_p10) / (2 * _Z90)
  return c.step_ms + sigma * expected_max_z(n)


def _stretched(profile, hw):
  """(compute ms, ready-time factor): the slowest GPU's step."""
  c = compute_ms(profile, hw.num_devices)
  return c, c / profile.compute.step_ms


def _overlapped(
  profile, hw, cost_of, *, packed=0, after=0.0, overlap=True, compression=None
):
  """Step with one message per gradient (or `packed` even packs made once
  all are ready) queued on one bottleneck, overlapping the compute (or,
  overlap=False, all sent once the compute is done); a compressor's
  messages and work from cost_model_compression."""
  c, k = _stretched(profile, hw)
  grads = profile.gradients
  if compression is not None and compression.compresses:
    sent, work_ms = cmc.messages(compression, profile, k)
    c += work_ms
    msgs = [
      (ready if overlap else c, cost_of(nbytes)) for ready, nbytes in sent
    ]
  elif packed:
    total = sum(wire_bytes(g, hw) for g in grads)
    msgs = [(c, cost_of(total / packed)) for _ in range(packed)]
  else:
    msgs = [
      (g.ready_ms * k if overlap else c, cost_of(wire_bytes(g, hw)))
      for g in grads
    ]
  end = max(c, fifo_end(msgs)) + after
  return Step(end, c, end - c)


def _worker_apply_ms(profile):
  a = profile.apply.worker
  return sum(a.ms(g.bytes) for g in profile.gradients)


def replicated(profile, hw, spec=None, repacking=0, compression=None):
  """One host: every GPU's gradient all-reduced by the spec's algorithm;
  without a spec the classic default (tensorflow/benchmarks
  batch_allreduce.algorithm_from_params; variable_mgr@9165a70
  VariableMgrLocalReplicated without --use_nccl): each gradient copied to
  and summed on one GPU, round-robin (local_parameter_device=gpu), or on
  the CPU (cpu), and read back from there by every tower."""
  costs = Costs(hw)
  default = 'copy' if hw.local_parameter_device == 'gpu' else 'pscpu'
  alg = _one_algorithm(spec) or default
  return _overlapped(
    profile,
    hw,
    lambda b: costs.intra(alg, b),
    packed=repacking,
    after=_worker_apply_ms(profile),
    overlap=alg != 'nccl' or NCCL_OVERLAPS_COMPUTE,
    compression=compression,
  )


def _one_algorithm(spec):
  """The single algorithm of a spec ('nccl', 'xring#2' ...), or None."""
  if not spec:
    return None
  return spec.split('#')[0].split(':')[0].split('/')[0]


def _two_level(spec):
  """(intra, inter) algorithms of a spec text ('nccl/xring', 'xring')."""
  head = spec.split('#')[0].split(':')[-1]
  parts = head.split('/')
  return parts[0], parts[-1]


def all_reduce_cluster(profile, hw, spec=None, repacking=0, compression=None):
  """distributed_all_reduce / collective_all_reduce across hosts: the
  spec's intra algorithm in each host, its inter one across the hosts
  (one after the other); a one-level spec is a ring over every GPU."""
  costs = Costs(hw)
  spec = spec or 'collective'
  if '/' in spec.split(':')[-1]:
    a, b_alg = _two_level(spec)
    cost = lambda b: costs.intra(a, b) + costs.across(b_alg, b)  # noqa: E731
  else:
    alg = _one_algorithm(spec)
    slowest = min(costs.b_intra, costs.b_net)
    lat = costs.l_net + (TF_STEP_US if alg != 'nccl' else 0.0)
    steps = 'tree' if alg == 'rechd' else 'ring'
    cost = lambda b: ring_ms(b, costs.n, slowest, lat, steps)  # noqa: E731
  overlap = 'nccl' not in spec or NCCL_OVERLAPS_COMPUTE
  return _overlapped(
    profile,
    hw,
    cost,
    packed=repacking,
    after=_worker_apply_ms(profile),
    overlap=overlap,
    compression=compression,
  )


def _placement(profile, hw, round_robin=False) -> list:
  """The ps task of each variable: greedily by size in model order (the
  classic's GreedyLoadBalancingStrategy for parameter_server,
  tensorflow/benchmarks@9165a70 variable_mgr.py#L530-536), or round_robin:
  variable i on task i mod p (distributed_replicated's shadow variables go
  through tf.train.replica_device_setter with no ps_strategy, whose default
  is round-robin: tf_cnn_benchmarks.py#L783-784, variable_mgr.py#L585-599).
  A variable is never split, so one big variable can load one task most."""
  p = max(1, hw.num_ps)
  sizes = [g.bytes for g in profile.gradients]
  if round_robin:
    return [i % p for i in range(len(sizes))]
  return st.greedy_placement(sizes, p)


def ps_fractions(profile, hw, round_robin=False) -> list:
  """Each ps task's share of the model's bytes (placed by _placement)."""
  load = [0.0] * max(1, hw.num_ps)
  for k, g in zip(_placement(profile, hw, round_robin), profile.gradients):
    load[k] += g.bytes
  total = sum(load) or 1.0
  return [x / total for x in load]


def _host_loads(hw, fractions):
  """[(bytes out, bytes in, bytes by loopback)] per host, per byte of the
  model every worker pushes (or reads back: out and in swap). A ps task on
  a worker host takes its own worker's share by loopback, not the NIC."""
  h = hw.num_workers
  if hw.ps_placement == 'own_hosts':
    return [(1.0, 0.0, 0.0)] + [(0.0, h * f, 0.0) for f in fractions]
  loads = [(1.0 - f, (h - 1) * f, f) for f in fractions]
  if h > len(fractions):  # worker hosts without a ps task
    loads.append((1.0, 0.0, 0.0))
  return loads


def _local_means_ms(costs, hw, b, on_gpus=False):
  """One host's towers' gradient averaged before its push: on the worker's
  CPU (every tower's copy over PCIe, then summed), or on_gpus: each tensor
  gathered on one GPU (round-robin), then one copy to host memory for
  gRPC."""
  if hw.gpus_per_host <= 1:
    return 0.0
  if on_gpus:
    return costs.intra('psgpu', b) / 2.0 + b / costs.b_host / 1e3
  return costs.to_host(b) + costs.cpu_ms(hw.gpus_per_host * b)


def _to_towers_ms(costs, hw, nbytes, from_cpu=False):
  """The values copied from where they are cached to every GPU of a host
  (from_cpu: from host memory whatever local_parameter_device says)."""
  if hw.local_parameter_device == 'gpu' and not from_cpu:
    g = hw.gpus_per_host
    return (g - 1) / g * nbytes / costs.b_intra / 1e3
  return costs.to_host(nbytes)


class HostLanes:
  """The hosts of a ps cluster as first-come-first-served lanes: each
  distinct host's outgoing wire, incoming wire and comm cores (their
  per-byte loads from _host_loads). A message (every worker's bytes of one
  variable to its ps task, or back) holds each lane of each host for its
  share of the bytes, from when it is ready; it is through when the last
  lane is. Lanes are separate, so pushes into a ps host and reads out of it
  overlap (full duplex)."""

  def __init__(self, hw, fractions):
    wire = hw.wire_bytes_per_us()
    net_copy, loop_copy = hw.copy_bytes_per_us(), hw.copy_bytes_per_us('tcp')
    self._per_byte = [
      (
        out / wire,
        inward / wire,
        (out + inward) / net_copy + 2.0 * loop / loop_copy,
      )
      for out, inward, loop in sorted(set(_host_loads(hw, fractions)))
    ]
    self._free = [[0.0, 0.0, 0.0] for _ in self._per_byte]

  def send(self, ready_ms, nbytes, back=False) -> float:
    """When nbytes per worker are through (ms), queued from ready_ms; back:
    from the ps tasks to the workers (out and in swap)."""
    end = ready_ms
    for (out, inward, cores), free in zip(self._per_byte, self._free):
      if back:
        out, inward = inward, out
      for lane, per_byte in enumerate((out, inward, cores)):
        if per_byte > 0:
          free[lane] = max(free[lane], ready_ms) + per_byte * nbytes / 1e3
          end = max(end, free[lane])
    return end


def _ps_net_ms(hw, fractions, nbytes):
  """Every worker's nbytes to the ps tasks, alone on the lanes: at the
  busiest host, its NIC each way at the wire's rate (full duplex), or its
  comm cores copying both directions' TCP bytes and both ends of the
  loopback ones (gRPC runs over TCP on the host's own address too)."""
  return HostLanes(hw, fractions).send(0.0, nbytes)


def _forward_use_ms(profile, gradient) -> float:
  """When the forward pass reaches a variable (unstretched ms): at the
  share of the forward where the backward leaves it (its gradient's ready
  time, mirrored)."""
  c = profile.compute
  backward = max(c.step_ms - c.forward_ms, 1e-9)
  left = min(max((gradient.ready_ms - c.forward_ms) / backward, 0.0), 1.0)
  return c.forward_ms * (1.0 - left)


def _read_stall_ms(profile, k, read) -> float:
  """How long the forward waits for its variables: each read from the
  step's start, one after another in the order the forward uses them
  (read(fp32 bytes, the previous read's end) -> this one's end, ms),
  against when the forward reaches it (stretched by k)."""
  done = stall = 0.0
  for g in profile.gradients:
    done = read(_fp32_bytes(g), done)
    stall = max(stall, done - _forward_use_ms(profile, g) * k)
  return stall


def _ps_traffic_end(profile, hw, costs, lanes, where, shift, read_back):
  """When the last push's apply (read_back: the last read-back's copy to
  the towers) ends: each gradient, when ready (+shift), averaged over the
  host's towers one after another, pushed on the lanes, summed over the
  workers and applied by its ps task's CPU; read_back: then, after the
  variable's barrier (a latency), read back and assigned to every tower's
  copy (distributed_replicated, variable_mgr.py#L601-617), sharing the
  lanes with later pushes in the order they are ready."""
  grads, h = profile.gradients, hw.num_workers
  k = _stretched(profile, hw)[1]
  on_gpus = read_back and hw.local_parameter_device == 'gpu'
  queue = [(g.ready_ms * k + shift, False, i) for i, g in enumerate(grads)]
  heapq.heapify(queue)
  ps_cpu = [0.0] * max(1, hw.num_ps)
  means = towers = end = 0.0
  while queue:
    ready, back, i = heapq.heappop(queue)
    g, p = grads[i], where[i]
    if back:
      through = lanes.send(ready, _fp32_bytes(g), back=True)
      towers = max(towers, through)
      towers += _to_towers_ms(costs, hw, _fp32_bytes(g), from_cpu=True)
      end = max(end, towers)
      continue
    b = wire_bytes(g, hw)
    means = max(means, ready) + _local_means_ms(costs, hw, b, on_gpus)
    arrived = lanes.send(means, b)
    work = h * b + APPLY_PASSES * _fp32_bytes(g)
    ps_cpu[p] = max(ps_cpu[p], arrived) + costs.cpu_ms(work)
    end = max(end, ps_cpu[p])
    if read_back:
      heapq.heappush(queue, (ps_cpu[p] + costs.l_net / 1e3, True, i))
  return end


def parameter_server(profile, hw, replicated=False):
  """Variables on ps tasks (or, on one host, its CPU or GPUs).

  parameter_server (tensorflow/benchmarks@9165a70 variable_mgr.py
  VariableMgrDistributedFetchFromPS): the forward reads each variable when
  it reaches it (_read_stall_ms); the towers' gradients are averaged on
  the worker's CPU (param_server_device: a replica_device_setter onto the
  worker's cpu:0, tf_cnn_benchmarks.py#L783-784) and pushed as they are
  ready; the step ends when the last apply does. replicated
  (distributed_replicated, VariableMgrDistributedReplicated): averaged on
  the GPUs round-robin when local_parameter_device is gpu, else on the
  worker's CPU; each variable read back once applied, while later
  gradients are still pushed. Either way a barrier ends the step
  (tf_cnn_benchmarks.py#L933-935: sync_queues_step_end_).
  """
  costs = Costs(hw)
  if hw.num_workers == 1 and hw.num_ps == 0:
    return _local_parameter_server(profile, hw, costs)
  where = _placement(profile, hw, round_robin=replicated)
  lanes = HostLanes(hw, ps_fractions(profile, hw, round_robin=replicated))
  c, k = _stretched(profile, hw)

  def read(v, previous):
    # once per host, through the caching device (variable_mgr.py#L513-520),
    # then copied to the towers
    through = lanes.send(costs.l_net / 1e3, v, back=True)
    return max(previous, through) + _to_towers_ms(costs, hw, v)

  stall = 0.0 if replicated else _read_stall_ms(profile, k, read)
  end = _ps_traffic_end(profile, hw, costs, lanes, where, stall, replicated)
  total = max(c + stall, end) + costs.l_net / 1e3
  return Step(total, c, total - c)


def _local_parameter_server(profile, hw, costs):
  """One host: variables on its CPU (behind PCIe) or spread on its GPUs;
  every tower reads each one when its forward reaches it (no caching
  device: VariableMgrLocalFetchFromPS, variable_mgr.py), pushes its
  gradients as they are ready; the apply follows the last."""
  g, v = hw.gpus_per_host, var_bytes(profile)
  if hw.local_parameter_device == 'gpu':
    per = (g - 1) / g / costs.b_intra / 1e3
    read = lambda b, previous: previous + b * per  # noqa: E731
    push = lambda b: b * per  # noqa: E731  (each to the GPU that holds it)
    after = _worker_apply_ms(profile)
  else:
    read = lambda b, previous: previous + costs.to_host(b)  # noqa: E731
    push = lambda b: costs.to_host(b) + costs.cpu_ms(g * b)  # noqa: E731
    after = costs.cpu_ms(APPLY_PASSES * v)
  c, k = _stretched(profile, hw)
  stall = _read_stall_ms(profile, k, read)
  pushes = [
    (gr.ready_ms * k + stall, push(wire_bytes(gr, hw)))
    for gr in profile.gradients
  ]
  total = max(c + stall, fifo_end(pushes)) + after
  return Step(total, c, total - c)


def hybrid(profile, hw, threshold_bytes=1 << 20):
  """Big variables on the ps tasks, small ones all-reduced (collective)."""
  costs = Costs(hw)
  big = [g for g in profile.gradients if g.bytes > threshold_bytes]
  fractions = ps_fractions(dataclasses.replace(profile, gradients=big), hw)
  v = sum(_fp32_bytes(g) for g in big)
  on_gpus = hw.local_parameter_device == 'gpu'
  net_ms_per_byte = _ps_net_ms(hw, fractions, 1.0)  # linear in the bytes

  def cost(g):
    b = wire_bytes(g, hw)
    if g.bytes > threshold_bytes:
      return _local_means_ms(costs, hw, b, on_gpus) + net_ms_per_byte * b
    return ring_ms(b, costs.n, min(costs.b_intra, costs.b_net), costs.l_net)

  c, k = _stretched(profile, hw)
  end = fifo_end([(g.ready_ms * k, cost(g)) for g in profile.gradients])
  reads = net_ms_per_byte * v + _to_towers_ms(costs, hw, v)
  total = max(c, end) + costs.cpu_ms(APPLY_PASSES * v) + reads
  return Step(total, c, total - c)


def horovod(profile, hw):
  """Horovod: every cycle its coordinator agrees which gradients are ready
  on every rank (a gather and a broadcast: 2 ceil(log2 n) latencies), fuses
  them into buffers of at most the fusion threshold and all-reduces each
  (NCCL, or hierarchical); the next cycle starts a cycle after this one or
  when its all-reduces end, whichever is later. The cycle's phase against
  the step is averaged over _CYCLE_PHASES starts."""
  c, k = _stretched(profile, hw)
  pending = sorted(
    (g.ready_ms * k if NCCL_OVERLAPS_COMPUTE else c, wire_bytes(g, hw))
    for g in profile.gradients
  )
  cycle = hw.horovod_cycle_ms
  ends = [
    _horovod_end(pending, hw, -cycle * i / _CYCLE_PHASES)
    for i in range(_CYCLE_PHASES)
  ]
  total = max(c, sum(ends) / len(ends)) + _worker_apply_ms(profile)
  return Step(total, c, total - c)


def _horovod_end(pending, hw, start):
  """When the last fused all-reduce ends, cycles starting at `start`."""
  costs = Costs(hw)
  all_reduce = costs.hierarchical if hw.horovod_hierarchical else costs.nccl
  n = hw.num_devices
  lat = costs.l_net if hw.num_workers > 1 else costs.link.latency_us
  negotiate = 2 * math.ceil(math.log2(n)) * lat / 1e3 if n > 1 else 0.0
  cycle, limit = hw.horovod_cycle_ms, hw.horovod_fusion_bytes
  t, i = start, 0
  while i < len(pending):
    # the first cycle that starts after this gradient is ready
    t = max(t + cycle, t + cycle * math.ceil((pending[i][0] - t) / cycle))
    t += negotiate
    buffer = 0.0
    while i < len(pending) and pending[i][0] <= t:
      b = pending[i][1]
      if limit and buffer and buffer + b > limit:
        t += all_reduce(buffer)
        buffer = 0.0
      buffer += b
      i += 1
    t += all_reduce(buffer)
  return t


def step(profile, hw, strategy) -> Step:
  """The step of `strategy` (a cost_model.Strategy) on `hw`."""
  name, spec = strategy.variable_update, strategy.all_reduce_spec
  repack = strategy.gradient_repacking
  if not strategy.sync:
    raise HardwareStrategyError(
      'the hardware model predicts synchronous steps only'
    )
  compression = cmc.of_strategy(strategy)
  if name == 'horovod':
    return horovod(profile, hw)
  if name == 'replicated':
    if hw.num_workers > 1:
      raise HardwareStrategyError('replicated runs on one host')
    return replicated(profile, hw, spec, repack, compression)
  if name in ('distributed_all_reduce', 'collective_all_reduce'):
    return all_reduce_cluster(profile, hw, spec, repack, compression)
  if name in ('parameter_server', 'distributed_replicated'):
    return parameter_server(profile, hw, name == 'distributed_replicated')
  if name == 'hybrid':
    return hybrid(profile, hw, strategy.hybrid_threshold_bytes)
  raise HardwareStrategyError('--variable_update=%s: not modelled' % name)


def images_per_sec(profile, hw, strategy) -> float:
  """Images/sec of the whole cluster."""
  s = step(profile, hw, strategy)
  return hw.num_devices * profile.run.batch_size / s.step_ms * 1000.0
