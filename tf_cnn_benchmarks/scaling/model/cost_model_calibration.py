"""The test-bed calibration: the constants of this repository's loopback
clusters, each with where it came from.

Used only by the test-bed model (cost_model.py: the local launcher's
clusters, every task on one host's cores, links shaped by token buckets on
veths), which predict_scaling runs when it is given a CPU profile and no
hardware flag, and `--variable_update=auto`. Token-bucket CPU per byte,
veth flow stagger, switch-port duplex losses, spinning cores and the CPU a
message costs model that test-bed, not hardware: a GPU cluster described
as hardware is hardware_model.py's, which reads nothing here.

Nothing here is fitted on a cluster the model is scored on. The defaults
are assumptions (stated as such); a calibration file (JSON,
{"name": {"value": x, "fitted_on": "cells ..."}}) can replace them with
values fitted on cells kept out of the scored set.
"""

from __future__ import annotations

import dataclasses
import functools
import math

from tf_cnn_benchmarks.platform import json_input
from tf_cnn_benchmarks.scaling.model import simulate


class CalibrationError(ValueError):
  """A calibration file or value that cannot be used (one line)."""


@dataclasses.dataclass(frozen=True)
class Constant:
  """One constant: its value and where it was fitted (or 'assumed: why')."""

  value: float
  source: str
  meaning: str


_DEFAULTS = {
  'interference_cores': Constant(
    1.0,
    'assumed, not fitted: a gRPC or collective stream at its full rate '
    'keeps one core busy, half on each end (loopback transfers are '
    'CPU-bound)',
    'cores a software transfer takes from compute while it runs',
  ),
  'latency_cpu_fraction': Constant(
    0.1,
    'chosen among 1.0, 0.5, 0.25, 0.1, 0 by the cluster/local ratios of '
    'resnet20 and lenet, 2 colocated workers x 1 tower, unthrottled '
    'loopback (lab/scripts/choose_latency_cpu_fraction.py on '
    'lab/results/latency_cpu_fraction_cells.json, AVX2 EPYC, 2026-11-27; '
    'first on results/cluster_overhead.md, Xeon, 2026-11-24: 0.1 too): '
    'keep those cells out of the scored set',
    "share of a message's software latency spent as CPU work on the sender",
  ),
  'model_error': Constant(
    0.10,
    'assumed, not fitted: the middle of the 5-15% error published for '
    'predicting a new scale from one node (vTrain, Echo)',
    'relative width added to every band for what the model leaves out',
  ),
  'wire_payload': Constant(
    1448.0 / 1514.0,
    'assumed, not fitted: the header sizes of TCP over IPv4 with timestamps '
    'in 1500-byte Ethernet frames as a token bucket counts them (1448 '
    'payload bytes per 1514; Ethernet on a real wire also has 24 bytes of '
    'preamble and gap: give 1448/1538 for it)',
    "share of --link_mbits (a wire rate) that carries the messages' bytes",
  ),
  'daydream_efficiency': Constant(
    0.85,
    'from the baseline definition (issue 31): size / (0.85 x bandwidth)',
    'share of the link bandwidth the Daydream-style baseline assumes',
  ),
}


# Throughput of all-to-all exchanges over one link per host (switch), as a
# share of a ring's moving the same bytes, by link rate (Mbit/s): TCP flows
# that meet two bottlenecks (the sender's port and the receiver's) fill
# them less well than one flow per port. Each figure is the median ratio of
# the round times of `lab.scripts.measure_exchange --launch
# --topology=switch --num_workers=3` (raw TCP, no TensorFlow; 64-256 kB a
# host at 25 Mbit/s, 256 kB-1 MB at 100, 1-4 MB at 1000; two runs each),
# lab/results/all_to_all_efficiency.md. Unthrottled veths are CPU-bound and
# measured all-to-all faster than a ring: 1.
ALL_TO_ALL_EFFICIENCY = ((25.0, 0.80), (100.0, 0.91), (1000.0, 1.0))
# The same on one link that every host shares (topology `shared`): the
# median over runs of the ratio of the *means* of the rounds (a run of
# steps pays the mean, slow rounds too), 3 hosts, 64-700 kB a host at
# 25 Mbit/s and 256 kB-1 MB at 100, eight and four runs
# (lab/results/all_to_all_efficiency.md, "Again, with the means of the
# rounds"). Most runs are near 1 and some fall to 0.59-0.84: the median
# is what a typical run pays. 1000 Mbit/s was not measured on a shared
# link: 1, as on switch ports.
ALL_TO_ALL_EFFICIENCY_SHARED = ((25.0, 0.94), (100.0, 0.89), (1000.0, 1.0))
ALL_TO_ALL_SOURCE = (
  "measured with raw TCP on this repository's first CPU machine's shaped "
  'links (lab.scripts.measure_exchange --launch, '
  'lab/results/all_to_all_efficiency.md), not on a scored cell; between the '
  'rates: linear in log(rate)'
)


# Flows both ways over one link per host (switch) at once, as a ring's:
# every port carries data out and in, and each flow's acknowledgements
# queue behind the other flow's data. The share of the payload rate such
# a port carries each way: the ideal over the mean round of the ring
# pattern of `lab.scripts.measure_exchange --launch --topology=switch`
# (3 hosts, raw TCP, no TensorFlow; AVX2 EPYC, 2026-11-28; no scored
# cell): 25 Mbit/s 0.96, 0.86 (1 MiB a host), 0.80, 0.93 (512 KiB),
# median 0.90; 100 Mbit/s 0.95, 0.94 (1 MiB). One flow one way reaches the
# payload rate (--measure_link: 23.9 of 25 Mbit/s, 95.7 of 100, 956.5 of
# 1000: 1448 of every 1514 bytes, wire_payload). At 1000 Mbit/s the raw
# test is bound by its own CPU (all-to-all's parallel flows beat its ring),
# so that row is TensorFlow's own: the collective all-reduce of two tasks
# (its two ring steps cross each port both ways) on switch ports against
# the same on one shared link, which has no second way to lose and so
# gives the latency (lab/scripts/measure_link_cpu.py's rows, link_cpu.
# two_way_efficiency): 0.75-0.88 on both CPUs, median 0.84 (at 25 and 100
# Mbit/s the same rows give 0.86-0.92 and 0.96-0.99, as the raw test).
# Above 1000 Mbit/s nothing was measured: a real full-duplex port is
# assumed to lose nothing, as unthrottled loopback.
TWO_WAY_EFFICIENCY = ((25.0, 0.90), (100.0, 0.95), (1000.0, 0.84))
TWO_WAY_SOURCE = (
  "measured with raw TCP on the AVX2 EPYC's shaped switch ports "
  '(lab.scripts.measure_exchange --launch, '
  'lab/notes/predicting_experiments_continued.md section 14); at 1000 '
  "Mbit/s with TensorFlow's collective against a shared link on both CPUs "
  '(measure_link_cpu.py rows, lab/notes/predicting_experiments_3.md '
  'section 19); not on a scored cell; between the rates: linear in log(rate); '
  'above 1000 Mbit/s, unthrottled and shared links: 1'
)


def two_way_efficiency(mbits, topology: str = 'switch') -> float:
  """The share of its payload rate a switch port carries each way while
  flows cross it both ways (TWO_WAY_EFFICIENCY; 1 unthrottled, shared or
  past the table's last rate)."""
  if mbits is None or topology == 'shared':
    return 1.0
  if mbits > TWO_WAY_EFFICIENCY[-1][0]:
    return 1.0  # past the shaped links measured (TWO_WAY_EFFICIENCY)
  return _by_rate(TWO_WAY_EFFICIENCY, mbits)


def all_to_all_efficiency(mbits, topology: str = 'switch') -> float:
  """The all-to-all table of `topology` at `mbits` (None, unthrottled: 1)."""
  if mbits is None:
    return 1.0
  table = (
    ALL_TO_ALL_EFFICIENCY_SHARED
    if topology == 'shared'
    else ALL_TO_ALL_EFFICIENCY
  )
  return _by_rate(table, mbits)


# Flows that start together on one link (a ps task answering every
# worker's read, the pushes into it) do not end together: TCP lets the
# first take more than a fair share. The simulation weighs the k-th flow to
# start on a link q^k (simulate.py); each q is fitted (fit_flow_stagger) to
# the median ends of three workers' reads of one ps task at once, as shares
# of the last one's, over TensorFlow's gRPC: read_stagger.py under
# launch_local_cluster.py, 15 rounds a run, the mean of two runs (AVX2 EPYC,
# 2026-11-27, lab/results/read_stagger_epyc_avx2.txt; no scored cell). Rows:
# Mbit/s, the first and second reads' shares.
FLOW_STAGGER_SHARES = {
  'shared': (
    (25.0, 0.785, 0.911),
    (100.0, 0.788, 0.932),
    (1000.0, 0.775, 0.923),
  ),
  'switch': (
    (25.0, 0.792, 0.880),
    (100.0, 0.793, 0.921),
    (1000.0, 0.746, 0.948),
  ),
}
FLOW_STAGGER_UNTHROTTLED_SHARES = {
  'shared': (0.795, 0.925),
  'switch': (0.810, 0.901),
}
# ... for messages of up to 1 MiB. Reads of 2 MiB and more stagger less on
# a throttled switch port: the first of three ends at 0.83-0.91 of the last,
# the second at 0.93-0.99 (Intel Xeon, 2026-11-28: 2 MiB at 25 Mbit/s, 2, 4
# (twice) and 9 MB at 100, 4 and 9 MB and 32 MiB at 1000; 1 MiB and less
# read as the table, 0.70-0.79 first; lab/results/read_stagger_xeon_amx.txt).
# The mean of those eight runs' shares; a message between 1 and 2 MiB takes
# q linear in log(size) between the table's and this. Shared links and
# unthrottled ports were not measured so: the table for every size.
FLOW_STAGGER_LONG_SHARES = (0.865, 0.965)
FLOW_STAGGER_SHORT_BYTES = 1 << 20
FLOW_STAGGER_LONG_BYTES = 2 << 20
FLOW_STAGGER_LONG_SOURCE = (
  'the same reads of 2 MiB to 32 MiB over throttled switch ports, measured '
  'on an Intel Xeon (read_stagger.py, lab/results/read_stagger_xeon_amx.txt), '
  'not on a scored cell; from 1 to 2 MiB linear in log(size)'
)
FLOW_STAGGER_SOURCE = (
  'the ends of three workers reading one ps task at once over TF gRPC, '
  "measured on this repository's AVX2 EPYC (read_stagger.py, "
  'lab/results/read_stagger_epyc_avx2.txt), not on a scored cell; between the '
  'rates: linear in log(rate)'
)


# The CPU a byte takes on the launcher's throttled links beyond what it
# takes over an unthrottled loopback (the profile's transports measure
# that): the token bucket passes frames one at a time, and each costs the
# kernel and the receiving thread a wake-up. Core-us a byte carried, the
# slope between 64 KiB and the largest message of link_cpu.py's rows under
# launch_local_cluster.py (every core kept busy by spinners), less the same
# slope unthrottled (shared: 0.00102 and 0.00157, switch: 0.00124 and
# 0.00183; the profiles measure about that over loopback); the median of
# two runs (AVX2 EPYC, 2026-11-27, lab/results/link_cpu_epyc_avx2.jsonl; the
# runs within 2-20%, 40% for gRPC on 1000 Mbit/s switch ports). Rows:
# Mbit/s, grpc, collective.
LINK_CPU = {
  'shared': (
    (25.0, 0.03664, 0.03393),
    (100.0, 0.01910, 0.02364),
    (1000.0, 0.00043, 0.00058),
  ),
  'switch': (
    (25.0, 0.03467, 0.03326),
    (100.0, 0.02082, 0.02877),
    (1000.0, 0.00071, 0.00028),
  ),
}
LINK_CPU_SOURCE = (
  'the CPU lost to spinners per byte of gRPC and collective messages over '
  "the launcher's links, less over unthrottled ones, measured on this "
  "repository's AVX2 EPYC (link_cpu.py, lab/results/link_cpu_epyc_avx2.jsonl), "
  'not on a scored cell; between the rates: linear in log(rate), 0 '
  'unthrottled'
)
_LINK_CPU_COLUMN = {'grpc': 1, 'collective': 2}


def link_cpu(mbits, topology: str, transport: str) -> float:
  """Core-us a byte of `transport` takes on a `topology` link of `mbits`
  beyond the loopback's (None, unthrottled: 0)."""
  if mbits is None:
    return 0.0
  column = _LINK_CPU_COLUMN.get(transport, 1)
  return _by_rate([(r[0], r[column]) for r in LINK_CPU[topology]], mbits)


def flow_stagger(mbits, topology: str = 'switch') -> float:
  """q, what each later flow to start on a link weighs against the one
  before it, on `topology` at `mbits` Mbit/s (None: unthrottled)."""
  if mbits is None:
    return fit_flow_stagger(FLOW_STAGGER_UNTHROTTLED_SHARES[topology] + (1.0,))
  rows = [
    (rate, fit_flow_stagger((a, b, 1.0)))
    for rate, a, b in FLOW_STAGGER_SHARES[topology]
  ]
  return _by_rate(rows, mbits)


def long_flow_stagger() -> float:
  """q of messages from FLOW_STAGGER_LONG_BYTES on a throttled switch port."""
  return fit_flow_stagger(FLOW_STAGGER_LONG_SHARES + (1.0,))


def message_stagger(q: float, nbytes: float, mbits, topology: str) -> float:
  """The q of one message of `nbytes` on a link whose table q is `q`:
  the long messages' q on a throttled switch port from
  FLOW_STAGGER_LONG_BYTES, the table's up to FLOW_STAGGER_SHORT_BYTES."""
  if mbits is None or topology != 'switch':
    return q
  if nbytes <= FLOW_STAGGER_SHORT_BYTES:
    return q
  t = math.log(nbytes / FLOW_STAGGER_SHORT_BYTES) / math.log(
    FLOW_STAGGER_LONG_BYTES / FLOW_STAGGER_SHORT_BYTES
  )
  return q + min(1.0, t) * (long_flow_stagger() - q)


def stagger_shares(q: float, flows: int) -> list:
  """When each of `flows` equal flows started together on one link ends,
  as shares of the last one's time, with weights q^k (simulate.py)."""
  graph = simulate.Graph()
  for k in range(flows):
    graph.add(simulate.Job(1.0, {'link': 1.0}, name='flow %d' % k))
  ends = sorted(simulate.run(graph, {'link': 1.0}, {'link': q}))
  return [t / ends[-1] for t in ends]


@functools.lru_cache(maxsize=None)
def fit_flow_stagger(shares: tuple) -> float:
  """The q (0.01 to 1, by 0.005) whose stagger_shares come closest to the
  measured `shares` (each flow's end over the last one's, ascending)."""

  def misfit(q):
    model = stagger_shares(q, len(shares))
    return sum((a - b) ** 2 for a, b in zip(model, shares))

  return min((i / 200.0 for i in range(2, 201)), key=misfit)


def _by_rate(table, mbits) -> float:
  """A ((Mbit/s, value), ...) table at `mbits`: linear in log(rate)
  between its rows, its end rows beyond them."""
  if mbits <= table[0][0]:
    return table[0][1]
  for (r0, e0), (r1, e1) in zip(table, table[1:]):
    if mbits <= r1:
      t = math.log(mbits / r0) / math.log(r1 / r0)
      return e0 + t * (e1 - e0)
  return table[-1][1]


@dataclasses.dataclass(frozen=True)
class Calibration:
  """The constants the model uses, by name."""

  constants: dict = dataclasses.field(default_factory=lambda: dict(_DEFAULTS))

  def value(self, name: str) -> float:
    """The value of constant `name`."""
    return self.constants[name].value

  def message_stagger(self, nbytes, mbits, topology: str) -> float:
    """The q a message of `nbytes` weighs by on a link (message_stagger);
    a calibration's one `flow_stagger` constant for every message."""
    q = self.flow_stagger(mbits, topology)
    if 'flow_stagger' in self.constants:
      return q
    return message_stagger(q, nbytes, mbits, topology)

  def flow_stagger(self, mbits, topology: str) -> float:
    """q of the links of `topology` at `mbits`: the measured table, or the
    calibration's one `flow_stagger` constant where it gives one."""
    if 'flow_stagger' in self.constants:
      return self.value('flow_stagger')
    return flow_stagger(mbits, topology)

  def two_way_efficiency(self, mbits, topology: str) -> float:
    """The share of a switch port each way a phase sending both ways fills
    at `mbits`: the measured table, or the calibration's one
    `two_way_efficiency` (on throttled switch ports) where it gives one."""
    throttled_ports = mbits is not None and topology != 'shared'
    if throttled_ports and 'two_way_efficiency' in self.constants:
      return self.value('two_way_efficiency')
    return two_way_efficiency(mbits, topology)

  def link_cpu(self, mbits, topology: str, transport: str) -> float:
    """Core-us a byte of `transport` takes on the target's links beyond
    the loopback's: the measured table, or the calibration's one
    `link_cpu_us_per_byte` (for every throttled link) where it gives one."""
    if mbits is None:
      return 0.0
    if 'link_cpu_us_per_byte' in self.constants:
      return self.value('link_cpu_us_per_byte')
    return link_cpu(mbits, topology, transport)

  def lines(self) -> list:
    """One printable line per constant: name, value, where it came from."""
    table = '; '.join(
      '%s: %s' % (name, ', '.join('%g at %g Mbit/s' % (e, r) for r, e in rows))
      for name, rows in (
        ('switch', ALL_TO_ALL_EFFICIENCY),
        ('shared', ALL_TO_ALL_EFFICIENCY_SHARED),
      )
    )
    return [
      '%s = %g (%s): %s' % (name, c.value, c.meaning, c.source)
      for name, c in sorted(self.constants.items())
    ] + [
      'all_to_all_efficiency = %s (share of a link an all-to-all phase '
      'fills): %s' % (table, ALL_TO_ALL_SOURCE),
      'two_way_efficiency = %s at 25, 100, 1000 Mbit/s (share of a switch '
      'port each way a phase sending both ways fills): %s'
      % (', '.join('%g' % e for _, e in TWO_WAY_EFFICIENCY), TWO_WAY_SOURCE),
      'flow_stagger = %s (what each later flow to start on a link weighs '
      'against the one before it; 1: fair sharing): %s'
      % (_stagger_text(), FLOW_STAGGER_SOURCE),
      'flow_stagger of long messages = %.3f from %d MiB on a throttled '
      'switch port: %s'
      % (
        long_flow_stagger(),
        FLOW_STAGGER_LONG_BYTES >> 20,
        FLOW_STAGGER_LONG_SOURCE,
      ),
      'link_cpu = %s (core-us a byte takes on a throttled link beyond '
      'loopback; grpc, collective): %s' % (_link_cpu_text(), LINK_CPU_SOURCE),
    ]


def _link_cpu_text() -> str:
  return '; '.join(
    '%s: %s'
    % (
      topology,
      ', '.join('%.4f, %.4f at %g Mbit/s' % (g, c, r) for r, g, c in rows),
    )
    for topology, rows in sorted(LINK_CPU.items())
  )


def _stagger_text() -> str:
  return '; '.join(
    '%s: %s, %.3f unthrottled'
    % (
      topology,
      ', '.join(
        '%.3f at %g Mbit/s' % (flow_stagger(rate, topology), rate)
        for rate, _, _ in rows
      ),
      flow_stagger(None, topology),
    )
    for topology, rows in sorted(FLOW_STAGGER_SHARES.items())
  )


def default_calibration() -> Calibration:
  """The assumed constants (nothing fitted)."""
  return Calibration()


# Constants a calibration file may add (none by default).
_OPTIONAL = {
  'flow_stagger': 'one q for every link in place of the measured '
  'FLOW_STAGGER table (1: links shared fairly)',
  'link_cpu_us_per_byte': 'core-us a byte takes on every throttled link '
  'beyond loopback, in place of the measured LINK_CPU table (0: the '
  "NIC's offloads make a wire byte cost what a loopback byte does)",
  'two_way_efficiency': 'the share of its payload rate a switch port '
  'carries each way while flows cross it both ways, for every rate, in '
  'place of the measured TWO_WAY_EFFICIENCY table (1: no loss)',
}


def _checked(name, entry, path):
  if name not in _DEFAULTS and name not in _OPTIONAL:
    raise CalibrationError(
      '%s: unknown constant %r; known: %s'
      % (path, name, ', '.join(sorted({*_DEFAULTS, *_OPTIONAL})))
    )
  value = entry.get('value') if isinstance(entry, dict) else None
  source = entry.get('fitted_on') if isinstance(entry, dict) else None
  if (
    not isinstance(value, (int, float))
    or isinstance(value, bool)
    or not math.isfinite(value)
    or value < 0
  ):
    raise CalibrationError(
      '%s: %s.value: want a number >= 0, got %r' % (path, name, value)
    )
  if not isinstance(source, str) or not source:
    raise CalibrationError(
      '%s: %s.fitted_on: want the cells it was fitted on' % (path, name)
    )
  if name in ('flow_stagger', 'two_way_efficiency') and not 0 < value <= 1:
    raise CalibrationError(
      '%s: %s.value: want 0 < value <= 1, got %r' % (path, name, value)
    )
  meaning = _DEFAULTS[name].meaning if name in _DEFAULTS else _OPTIONAL[name]
  return Constant(float(value), 'fitted on ' + source, meaning)


def load_calibration(path: str) -> Calibration:
  """The defaults with the constants of the JSON file at `path` replaced."""
  try:
    data = json_input.load_file(path)
  except OSError as e:
    raise CalibrationError(
      '%s: cannot read: %s' % (path, e.strerror or e)
    ) from None
  except json_input.JsonInputError as e:
    raise CalibrationError('%s: not JSON: %s' % (path, e.problem)) from None
  if not isinstance(data, dict):
    raise CalibrationError('%s: want a JSON object of constants' % path)
  constants = dict(_DEFAULTS)
  for name, entry in data.items():
    constants[name] = _checked(name, entry, path)
  return Calibration(constants)
