"""A GPU cluster described as hardware: links, transports, hosts, placement.

The predictor's target for clusters people rent (hardware_model.py turns it
into a step time). Every preset value carries its source: a datasheet or
specification figure read for this table, or 'assumed: why' where no
source was read. `source_lines()` prints them beside a prediction.

Nothing here models this repository's loopback test-bed: that is the
test-bed calibration (cost_model_calibration.py), used only when no
hardware flag is given and the target is the local launcher.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional


class HardwareError(ValueError):
  """A hardware field or preset the model cannot use (one line)."""


@dataclasses.dataclass(frozen=True)
class Link:
  """One GPU's link inside a host, each direction.

  gb_s: raw rate per direction per GPU (GB/s, 1e9 bytes/s).
  efficiency: share of it that carries payload (packet headers).
  latency_us: one step of a collective over it (launch and handshake).
  host_gb_s: the GPU's PCIe link to host memory (for variables on the CPU).
  """

  gb_s: float
  efficiency: float
  latency_us: float
  host_gb_s: float
  source: str

  @property
  def bytes_per_us(self) -> float:
    """Payload bytes per microsecond, each direction."""
    return self.gb_s * 1e3 * self.efficiency


# PCIe: 8 GT/s (3.0) or 16 GT/s (4.0) per lane with 128b/130b coding, x16:
# 15.75 / 31.5 GB/s per direction (PCI-SIG PCIe 3.0 / 4.0 base
# specifications). A TLP of 256 payload bytes carries about 24 bytes of
# header, sequence number and CRC: 256/280 = 0.914 of the rate is payload.
_PCIE_PAYLOAD = 256.0 / 280.0
_PCIE3, _PCIE4 = 15.75, 31.5
# One collective step's fixed cost on a GPU link: assumed 5 us (a kernel
# launch and a flag handshake between GPUs; NCCL's small-message latency is
# of this order), not measured here.
_STEP_US = 5.0
# NVLink: 20 GB/s per link per direction on P100 (NVLink 1, 4 links: 160
# GB/s bidirectional, Tesla P100 whitepaper), 25 GB/s on V100 (NVLink 2, 6
# links: 300 GB/s, Tesla V100 datasheet), 25 GB/s on A100 (NVLink 3, 12
# links: 600 GB/s, A100 datasheet). NVSwitch gives every GPU its full NVLink
# rate to every other (DGX-2: 6 links of V100 to the switches; DGX A100: 12
# of A100). Payload share of an NVLink packet: assumed 0.9 (headers of 16
# bytes per flit group; no figure read).
_NVLINK_PAYLOAD = 0.9
INTRA_LINKS = {
  'pcie3': Link(
    _PCIE3, _PCIE_PAYLOAD, _STEP_US, _PCIE3, 'PCIe 3.0 x16 15.75 GB/s'
  ),
  'pcie4': Link(
    _PCIE4, _PCIE_PAYLOAD, _STEP_US, _PCIE4, 'PCIe 4.0 x16 31.5 GB/s'
  ),
  'nvlink1': Link(
    80.0, _NVLINK_PAYLOAD, _STEP_US, _PCIE3, 'NVLink 1: 4 x 20 GB/s (P100)'
  ),
  'nvlink2': Link(
    150.0, _NVLINK_PAYLOAD, _STEP_US, _PCIE3, 'NVLink 2: 6 x 25 GB/s (V100)'
  ),
  'nvswitch': Link(
    150.0,
    _NVLINK_PAYLOAD,
    _STEP_US,
    _PCIE3,
    'NVSwitch, V100: 6 x 25 GB/s per GPU (DGX-2)',
  ),
  'nvswitch3': Link(
    300.0,
    _NVLINK_PAYLOAD,
    _STEP_US,
    _PCIE4,
    'NVSwitch, A100: 12 x 25 GB/s per GPU (DGX A100)',
  ),
}


def host_staged_link(link: Link, sharing: int = 1) -> Link:
  """The link a ring's hop takes between GPUs that cannot access each
  other's memory (no peer access): through host memory, NCCL's SHM
  transport, at the rate NCCL reaches there (SHM_GB_S, whatever the PCIe
  generation), split between the `sharing` GPUs whose bytes cross one
  upstream link (a PCIe switch's, or a CPU's x16 port bifurcated between
  them)."""
  gb_s = SHM_GB_S / sharing
  return Link(
    gb_s,
    1.0,
    _STEP_US,
    link.host_gb_s,
    'no peer access: through host memory (NCCL SHM), %g GB/s (what SHM '
    'reaches, NVIDIA/nccl#406, shared by %d GPUs on one upstream link)'
    % (gb_s, sharing),
  )


@dataclasses.dataclass(frozen=True)
class Transport:
  """A network transport between hosts.

  payload: share of the wire rate that carries message bytes.
  latency_us: software latency per message (both ends).
  cpu_ns_per_byte: core time per byte moved (both ends): caps the rate at
    comm_cores / cpu_ns_per_byte.
  """

  payload: float
  latency_us: float
  cpu_ns_per_byte: float
  source: str


TRANSPORTS = {
  # 1448 payload bytes per 1538 on the wire: TCP over IPv4 with timestamps
  # (52 header bytes) in a 1500-byte Ethernet frame plus 38 bytes of header,
  # FCS, preamble and inter-frame gap (IEEE 802.3; RFC 7323). Latency and
  # CPU assumed: a kernel TCP stack under gRPC or NCCL's sockets, 25 us per
  # message, each byte copied once per end at about 4 GB/s per core.
  'tcp': Transport(
    1448.0 / 1538.0,
    25.0,
    0.5,
    'TCP/IPv4 1500 MTU: 1448/1538 payload; latency 25 us and '
    '0.5 core-ns/byte assumed',
  ),
  # InfiniBand / RoCE: 4096-byte MTU with 26 bytes of local route, transport
  # header and CRCs (LRH 8, BTH 12, ICRC 4, VCRC 2; InfiniBand spec vol. 1);
  # the NIC moves the bytes (kernel bypass, zero copy): no core time per
  # byte. Latency assumed 3 us (verbs small-message latency, order of).
  'rdma': Transport(
    4096.0 / 4122.0,
    3.0,
    0.0,
    'RDMA 4096 MTU: 4096/4122 payload, no CPU copies; latency 3 us assumed',
  ),
}

# Cores of a host's that move TCP bytes: assumed a quarter (the input
# pipeline and the framework's threads keep the rest).
COMM_CORE_SHARE = 0.25
# A CPU core sums or applies gradients at this many bytes/us (streaming
# float adds): assumed 4 GB/s per core, up to 8 cores (a socket's memory
# bandwidth bounds more).
CPU_BYTES_PER_US_PER_CORE = 4000.0
CPU_REDUCE_CORES_MAX = 8

# Horovod's defaults (docs/tensor-fusion.rst, horovod/horovod): a fusion
# buffer of 64 MB (HOROVOD_FUSION_THRESHOLD) and a cycle of 5 ms
# (HOROVOD_CYCLE_TIME); v0.21.0 changed them to 128 MB and 1 ms (its
# release notes, #2468).
HOROVOD_FUSION_BYTES = 64 * 1024 * 1024
HOROVOD_CYCLE_MS = 5.0

# Without peer access between two GPUs (cudaDeviceCanAccessPeer false, what
# TensorFlow logs as 'N' in its device interconnect matrix) NCCL moves the
# bytes through host memory: "SHM is used between devices when peer-to-peer
# cannot happen, therefore, host memory is used" (NCCL docs, env.html,
# NCCL_SHM_DISABLE). NCCL's topology model rates the path at PCI_BW, 12 GB/s
# (src/graph/topo.h), but SHM reaches less: GPUs that use NICs "instead of
# SHM ... achieve 12GB/s instead of 9 or 6" (NCCL's maintainer,
# NVIDIA/nccl#406, PCIe 3.0 hosts). The upper figure is taken. A newer PCIe
# generation does not raise it: SHM's kernels read host memory over PCIe a
# cache line at a time, and two PCIe 5.0 GPUs measured 1.9 GB/s on a 20 MB
# all-reduce (sgl-project/sglang#39605).
SHM_GB_S = 9.0

PS_PLACEMENTS = ('own_hosts', 'worker_hosts')
PARAMETER_DEVICES = ('cpu', 'gpu')
PRECISIONS = {'fp32': 4, 'fp16': 2, 'bf16': 2}
NCCL_ALGORITHMS = ('ring', 'tree')


@dataclasses.dataclass(frozen=True)
class HardwareTarget:
  """One GPU cluster as its owner describes it.

  num_workers: worker hosts; gpus_per_host: GPUs (towers) of each.
  intra: the GPU link preset name (or 'custom' with intra_gb_s).
  link_mbits / network / link_latency_us: each host's network (a wire
    rate), its transport, and the wire's one-way latency.
  host_cores: each host's cores. num_ps: ps tasks; ps_placement: on hosts
    of their own or on the worker hosts (sharing their NICs and cores).
  local_parameter_device: where a host's variables live (cpu: behind the
    PCIe link, shared by gpus_per_host_link GPUs).
  gradient_precision: bytes per gradient element on the wire.
  nccl_algorithm: ring or tree (NCCL_ALGO).
  peer_gpus: how many of a host's first GPUs can all access each other's
    memory (peer access); a ring over more goes through host memory. None:
    every GPU of the host. The bytes of a ring through host memory cross
    each GPU's link to it, shared by gpus_per_host_link GPUs.
  """

  num_workers: int = 1
  gpus_per_host: int = 8
  intra: str = 'pcie3'
  intra_gb_s: Optional[float] = None
  link_mbits: float = 25000.0
  network: str = 'tcp'
  link_latency_us: float = 1.0
  host_cores: int = 32
  num_ps: int = 0
  ps_placement: str = 'worker_hosts'
  # The classic flag's default (tf_cnn_benchmarks: --local_parameter_device
  # defaults to gpu), so that the flag means here what it means there.
  local_parameter_device: str = 'gpu'
  gradient_precision: str = 'fp32'
  gpus_per_host_link: int = 1
  nccl_algorithm: str = 'ring'
  horovod_fusion_bytes: int = HOROVOD_FUSION_BYTES
  horovod_cycle_ms: float = HOROVOD_CYCLE_MS
  horovod_hierarchical: bool = False
  peer_gpus: Optional[int] = None

  @property
  def num_devices(self) -> int:
    """Every GPU of every worker host."""
    return self.num_workers * self.gpus_per_host

  # The names the cost model's Target has, so the tables print either.
  @property
  def devices_per_worker(self) -> int:
    """GPUs per host (the Target's name)."""
    return self.gpus_per_host

  def link(self) -> Link:
    """The intra-host link (a preset, or custom GB/s at PCIe's payload)."""
    if self.intra_gb_s is not None:
      return Link(
        self.intra_gb_s,
        1.0,
        _STEP_US,
        _PCIE3,
        'given: %g GB/s payload' % self.intra_gb_s,
      )
    return INTRA_LINKS[self.intra]

  def ring_link(self) -> Link:
    """The link a ring over this host's GPUs runs at: the intra-host link,
    or host memory where some of them are not peers."""
    link = self.link()
    if self.peer_gpus is not None and self.gpus_per_host > self.peer_gpus:
      sharing = min(self.gpus_per_host_link, self.gpus_per_host)
      return host_staged_link(link, sharing)
    return link

  def transport(self) -> Transport:
    """The network transport's constants."""
    return TRANSPORTS[self.network]

  def net_bytes_per_us(self) -> float:
    """Payload bytes/us one host's NIC moves each way: the wire rate's
    payload share, capped by the cores that copy TCP bytes."""
    return min(self.wire_bytes_per_us(), self.copy_bytes_per_us())

  def wire_bytes_per_us(self) -> float:
    """Payload bytes/us of the wire, each way (full duplex)."""
    return self.link_mbits / 8.0 * self.transport().payload

  def copy_bytes_per_us(self, transport=None) -> float:
    """Bytes/us the host's comm cores copy through `transport`'s stack
    (default: the network's), both directions together; inf for RDMA."""
    t = TRANSPORTS[transport] if transport else self.transport()
    if t.cpu_ns_per_byte <= 0:
      return math.inf
    cores = max(1.0, self.host_cores * COMM_CORE_SHARE)
    return cores * 1e3 / t.cpu_ns_per_byte

  def net_latency_us(self) -> float:
    """One message between hosts: the wire's latency and the transport's."""
    return self.link_latency_us + self.transport().latency_us

  def cpu_bytes_per_us(self) -> float:
    """Bytes/us a host's CPU sums or applies (streaming adds)."""
    cores = min(self.host_cores, CPU_REDUCE_CORES_MAX)
    return cores * CPU_BYTES_PER_US_PER_CORE

  def wire_bytes(self, fp32_bytes: float) -> float:
    """A gradient's bytes on the wire at gradient_precision."""
    return fp32_bytes * PRECISIONS[self.gradient_precision] / 4.0

  def shape_text(self) -> str:
    """'4x8 nvlink2 25000Mbit/s rdma +4ps(worker_hosts)' for tables."""
    link = self.intra if self.intra_gb_s is None else '%gGB/s' % self.intra_gb_s
    ps = ' +%dps(%s)' % (self.num_ps, self.ps_placement) if self.num_ps else ''
    return '%dx%d %s %gMbit/s %s%s vars:%s grads:%s' % (
      self.num_workers,
      self.gpus_per_host,
      link,
      self.link_mbits,
      self.network,
      ps,
      self.local_parameter_device,
      self.gradient_precision,
    )

  def source_lines(self) -> list:
    """Where each figure of this target comes from."""
    ring = self.ring_link()
    return [
      'intra-host link: %s, payload %.3f, step %g us'
      % (ring.source, ring.efficiency, ring.latency_us),
      'network: %s' % self.transport().source,
      'CPU sums: %g GB/s per core (assumed), up to %d cores'
      % (CPU_BYTES_PER_US_PER_CORE / 1e3, CPU_REDUCE_CORES_MAX),
      'horovod: fusion %d MB, cycle %g ms (docs/tensor-fusion.rst defaults)'
      % (self.horovod_fusion_bytes >> 20, self.horovod_cycle_ms),
    ]


def _choice(name, value, allowed):
  if value not in allowed:
    raise HardwareError('%s=%s: one of %s' % (name, value, ', '.join(allowed)))


def _positive(name, value, integer=False):
  ok = isinstance(value, (int, float)) and not isinstance(value, bool)
  ok = ok and math.isfinite(value) and value > 0
  if integer:
    ok = ok and isinstance(value, int)
  if not ok:
    raise HardwareError(
      '%s=%s: want a%s number > 0'
      % (name, value, 'n integer' if integer else '')
    )


def check_hardware(hw: HardwareTarget) -> HardwareTarget:
  """Returns `hw` if every field is usable, else raises HardwareError."""
  for name in ('num_workers', 'gpus_per_host', 'host_cores'):
    _positive(name, getattr(hw, name), integer=True)
  _positive('gpus_per_host_link', hw.gpus_per_host_link, integer=True)
  if hw.peer_gpus is not None:
    _positive('peer_gpus', hw.peer_gpus, integer=True)
  _positive('link_mbits', hw.link_mbits)
  _positive('horovod_cycle_ms', hw.horovod_cycle_ms)
  if hw.intra_gb_s is not None:
    _positive('intra_link', hw.intra_gb_s)
  else:
    _choice('intra_link', hw.intra, tuple(INTRA_LINKS))
  if not (math.isfinite(hw.link_latency_us) and hw.link_latency_us >= 0):
    raise HardwareError(
      'link_latency_us=%s: want a number >= 0' % hw.link_latency_us
    )
  if isinstance(hw.num_ps, bool) or not isinstance(hw.num_ps, int):
    raise HardwareError('num_ps=%s: want an integer >= 0' % hw.num_ps)
  if hw.num_ps < 0:
    raise HardwareError('num_ps=%s: want an integer >= 0' % hw.num_ps)
  if hw.horovod_fusion_bytes < 0:
    raise HardwareError('horovod_fusion_bytes: want >= 0')
  _choice('network', hw.network, tuple(TRANSPORTS))
  _choice('ps_placement', hw.ps_placement, PS_PLACEMENTS)
  _choice(
    'local_parameter_device', hw.local_parameter_device, PARAMETER_DEVICES
  )
  _choice('gradient_precision', hw.gradient_precision, tuple(PRECISIONS))
  _choice('nccl_algorithm', hw.nccl_algorithm, NCCL_ALGORITHMS)
  if hw.ps_placement == 'worker_hosts' and hw.num_ps > hw.num_workers:
    raise HardwareError(
      'num_ps=%d: at most one ps task per worker host with '
      'ps_placement=worker_hosts (%d hosts)' % (hw.num_ps, hw.num_workers)
    )
  return hw


def parse_intra_link(text: str) -> dict:
  """{'intra': name} for a preset, {'intra_gb_s': x} for a number."""
  if text in INTRA_LINKS:
    return {'intra': text}
  try:
    value = float(text)
  except ValueError:
    value = float('nan')
  if not (math.isfinite(value) and value > 0):
    raise HardwareError(
      'intra_link=%s: one of %s, or GB/s per direction (a number > 0)'
      % (text, ', '.join(INTRA_LINKS))
    )
  return {'intra': 'custom', 'intra_gb_s': value}


def make_hardware(**fields) -> HardwareTarget:
  """A checked HardwareTarget (unknown names: HardwareError)."""
  known = {f.name for f in dataclasses.fields(HardwareTarget)}
  unknown = sorted(set(fields) - known)
  if unknown:
    raise HardwareError('unknown hardware field %s' % unknown[0])
  return check_hardware(HardwareTarget(**fields))
