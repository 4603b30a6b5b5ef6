"""Where this process's graph puts its towers, local run or cluster task."""

from __future__ import annotations

import dataclasses
from typing import Optional

from tf_cnn_benchmarks.cluster import spec as spec_lib
from tf_cnn_benchmarks.platform import devices as devices_lib
from variable_mgr import base as manager_base
from variable_mgr import traits as traits_lib


@dataclasses.dataclass(frozen=True)
class Layout:
  """The towers of this process's graph and how they fit in one step.

  tower_devices: the devices of this graph's towers.
  first_tower_index: global index of this graph's first tower (worker w's
    tower t is global tower w * towers_per_worker + t).
  num_graphs: how many graphs like this one run each step: one per worker,
    or 1 when a controller's graph spans every worker.
  manager_cluster: what the variable manager needs to know of the cluster
    (None for a local run).
  """

  tower_devices: tuple
  first_tower_index: int
  num_graphs: int
  manager_cluster: Optional[manager_base.ClusterDevices]

  @property
  def num_step_towers(self) -> int:
    """Towers in one step of the whole run (every graph's)."""
    return len(self.tower_devices) * self.num_graphs


def layout(
  cluster: Optional[spec_lib.Cluster],
  traits: traits_lib.Traits,
  device_kind: str,
  towers_per_worker: int,
  cross_replica_sync: bool = True,
  pack_transfers: bool = True,
) -> Layout:
  """Tower devices and global indices of this process's graph."""
  local = devices_lib.tower_devices(device_kind, towers_per_worker)
  if cluster is None:
    return Layout(local, 0, 1, None)
  workers = tuple(
    spec_lib.task_device('worker', w) for w in range(cluster.num_workers)
  )
  ps = tuple(
    spec_lib.task_device('ps', k) + '/device:CPU:0'
    for k in range(cluster.num_ps)
  )
  kind = device_kind.upper()
  if traits.one_graph:
    towers = tuple(
      '%s/device:%s:%d' % (w, kind, i)
      for w in workers
      for i in range(towers_per_worker)
    )
    return Layout(
      towers, 0, 1, manager_base.ClusterDevices(ps, workers, 0, True)
    )
  me = cluster.task_index
  towers = tuple(
    '%s/device:%s:%d' % (workers[me], kind, i) for i in range(towers_per_worker)
  )
  return Layout(
    towers,
    me * towers_per_worker,
    cluster.num_workers,
    manager_base.ClusterDevices(
      ps,
      workers,
      me,
      me == 0,
      cross_replica_sync=cross_replica_sync,
      pack_transfers=pack_transfers,
    ),
  )
