"""What a variable manager can do and needs: one frozen value per manager.

The driver, the flag checks and the cluster roles read these instead of asking
which manager they have. The README's mode tables map onto the fields one to
one.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Traits:
  """Capabilities and needs of one manager class.

  runs_local: runs in one process, without cluster flags.
  runs_in_cluster: runs as a task of a cluster (given ClusterDevices).
  needs_ps: keeps variables on ps tasks (needs --ps_hosts).
  one_graph: one controller builds one graph spanning every worker's devices;
    the workers only serve it (needs --controller_host).
  cross_worker_ops: a worker's graph has ops on other workers (collectives),
    so its session cannot be filtered down to itself and the ps tasks.
  all_reduce: reduces gradients with an --all_reduce_spec (and the batch
    all-reduce flags).
  collective_spec: takes --all_reduce_spec=collective[#N] only (the classic
    spelling of its collective reduction; #N = ring subdivisions).
  """

  runs_local: bool = True
  runs_in_cluster: bool = False
  needs_ps: bool = False
  one_graph: bool = False
  cross_worker_ops: bool = False
  all_reduce: bool = False
  collective_spec: bool = False


def workers_in_lockstep(traits: Traits, cross_replica_sync: bool) -> bool:
  """Whether every step of a worker waits for the other workers.

  True when the graph itself reaches other workers (collectives), or when the
  ps-held variables are updated once per step from every worker's gradients.
  """
  return traits.cross_worker_ops or (traits.needs_ps and cross_replica_sync)
