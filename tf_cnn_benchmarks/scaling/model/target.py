"""The cluster a prediction is for: hosts, devices, ps tasks and links.

A Target describes the cluster to predict, not the host that was profiled:
how many worker hosts, devices per worker, ps tasks, the link between hosts
(bandwidth, latency, one shared link or a switch port per host), the link
between the devices of one host, and whether every task shares the cores of
the profiled host (`colocated`, as on one machine running a local cluster).
`check_target` refuses a bad value with one line naming the field.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

TOPOLOGIES = ('shared', 'switch')


class TargetError(ValueError):
  """A target field with a value the model cannot use (one line)."""


@dataclasses.dataclass(frozen=True)
class Target:
  """One cluster shape and its links.

  num_workers: worker hosts (one worker task per host).
  devices_per_worker: towers per worker (GPUs, or logical CPU devices).
  num_ps: ps tasks (each on its own host unless colocated).
  link_mbits: bandwidth of a host's link in Mbit/s; None: unthrottled, the
    profile's own (loopback) transport rate.
  link_latency_us: one-way wire latency added to every message between
    hosts (the transport's software latency comes from the profile).
  topology: 'shared' (every host on one link, like a hub: one resource) or
    'switch' (each host its own port, each direction its own resource).
  intra_bytes_per_us / intra_latency_us: the link between the devices of
    one host; None: the profile's local_copy transport.
  colocated: every task (workers and ps) runs on the profiled host's cores,
    so their compute and communication share those cores.
  cores_per_host: cores of each host; None: the profiled host's.
  worker_inter_op_threads: the inter-op threads of each worker's server
    (--num_inter_threads, or --cluster_threads=auto's share when workers
    share a host: cluster/thread_pools.py); None: TensorFlow's default, one
    per core. With one, a worker on CPU towers runs its compute to the end
    before it starts the transfers its all-reduce asks of it.
  """

  num_workers: int = 1
  devices_per_worker: int = 1
  num_ps: int = 0
  link_mbits: Optional[float] = None
  link_latency_us: float = 0.0
  topology: str = 'switch'
  intra_bytes_per_us: Optional[float] = None
  intra_latency_us: Optional[float] = None
  colocated: bool = False
  cores_per_host: Optional[int] = None
  worker_inter_op_threads: Optional[int] = None

  @property
  def num_devices(self) -> int:
    """Every tower of every worker."""
    return self.num_workers * self.devices_per_worker

  def shape_text(self) -> str:
    """'2x1 +1ps 100Mbit/s switch' for tables."""
    link = (
      'loopback' if self.link_mbits is None else '%gMbit/s' % (self.link_mbits)
    )
    return (
      '%dx%d +%dps %s %s%s'
      % (
        self.num_workers,
        self.devices_per_worker,
        self.num_ps,
        link,
        self.topology,
        ' colocated' if self.colocated else '',
      )
      + self._threads_text()
    )

  def _threads_text(self) -> str:
    n = self.worker_inter_op_threads
    if n is None:
      return ''
    return ' %d inter-op thread%s' % (n, '' if n == 1 else 's')

  def as_dict(self) -> dict:
    """The fields, for a JSON line."""
    return dataclasses.asdict(self)


def number_text(value) -> str:
  """A number as it reads on a command line: -5 for -5.0, 1e+300, nan."""
  text = repr(value)
  return text[:-2] if isinstance(value, float) and text.endswith('.0') else text


def _positive_int(name, value, minimum):
  if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
    raise TargetError('%s=%r: want an integer >= %d' % (name, value, minimum))


def _number(name, value, *, positive, optional):
  if value is None and optional:
    return
  ok = (
    isinstance(value, (int, float))
    and not isinstance(value, bool)
    and math.isfinite(value)
    and (value > 0 if positive else value >= 0)
  )
  if not ok:
    raise TargetError(
      '%s=%s: want a number %s 0%s'
      % (
        name,
        number_text(value),
        '>' if positive else '>=',
        ' or none' if optional else '',
      )
    )


def check_target(target: Target) -> Target:
  """Returns `target` if every field is usable, else raises TargetError."""
  _positive_int('num_workers', target.num_workers, 1)
  _positive_int('devices_per_worker', target.devices_per_worker, 1)
  _positive_int('num_ps', target.num_ps, 0)
  _number('link_mbits', target.link_mbits, positive=True, optional=True)
  _number(
    'link_latency_us', target.link_latency_us, positive=False, optional=False
  )
  _number(
    'intra_bytes_per_us',
    target.intra_bytes_per_us,
    positive=True,
    optional=True,
  )
  _number(
    'intra_latency_us', target.intra_latency_us, positive=False, optional=True
  )
  if target.topology not in TOPOLOGIES:
    raise TargetError(
      'topology=%r: one of %s' % (target.topology, ', '.join(TOPOLOGIES))
    )
  if not isinstance(target.colocated, bool):
    raise TargetError('colocated=%r: want true or false' % target.colocated)
  if target.cores_per_host is not None:
    _positive_int('cores_per_host', target.cores_per_host, 1)
  if target.worker_inter_op_threads is not None:
    _positive_int('worker_inter_op_threads', target.worker_inter_op_threads, 1)
  return target


def make_target(**fields) -> Target:
  """A checked Target from keyword fields (unknown names: TargetError)."""
  known = {f.name for f in dataclasses.fields(Target)}
  unknown = sorted(set(fields) - known)
  if unknown:
    raise TargetError(
      'unknown target field %s; known: %s'
      % (unknown[0], ', '.join(sorted(known)))
    )
  return check_target(Target(**fields))
