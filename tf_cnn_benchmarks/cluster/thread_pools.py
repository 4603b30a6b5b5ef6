"""How many threads a task's pools get: the rule of --cluster_threads.

TensorFlow sizes every process's pools for all the cores, so N tasks on one
host run N times as many busy (spinning) threads as cores. With
--cluster_threads=auto the workers on a host split its cores; a ps or
controller that shares the host with workers (it applies updates or only
drives the steps) gets an even share of all the host's tasks. A task alone
on its host keeps TensorFlow's defaults. Tasks share a host when their
addresses name it, or all of them with --tasks_colocated=true (the local
launcher's tasks, each in a network namespace of its own on switch ports,
still share this machine's cores).

The split has a price the cost model knows (scaling/model/cost_model_graph.py):
a worker left with ONE inter-op thread runs its compute to the end before it
starts the receives an all-reduce asks of it, so its transfers no longer overlap
the backward pass.

No TensorFlow here: the cost model asks the same rule for a cluster it only
describes (servers.py applies it to this task's server).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Mapping, Sequence


@dataclasses.dataclass(frozen=True)
class ThreadPools:
  """A task's intra-op and inter-op pool sizes (0: TensorFlow's default)."""

  intra_op: int = 0
  inter_op: int = 0


# Both pools at TensorFlow's defaults.
TF_DEFAULTS = ThreadPools()


def available_cores() -> int:
  """Cores this process may run on (its affinity mask, as TensorFlow counts)."""
  try:
    return max(1, len(os.sched_getaffinity(0)))
  except (AttributeError, OSError):
    return max(1, os.cpu_count() or 1)


def tasks_on_host(spec: Mapping[str, Sequence[str]], host: str) -> dict:
  """{job: how many of its tasks' addresses (in a cluster spec dict) are on
  `host`}; hosts are compared as written."""
  return {
    job: sum(1 for a in addresses if a.rpartition(':')[0] == host)
    for job, addresses in spec.items()
  }


def tasks_sharing_cores(
  spec: Mapping[str, Sequence[str]], host: str, colocated: bool | None = None
) -> dict:
  """{job: how many of its tasks share the cores of `host`}: every task of
  the cluster when `colocated` (--tasks_colocated=true: a local cluster
  whose tasks have addresses of their own, as on the launcher's switch
  ports, still runs on one machine), else the tasks whose address names it
  (tasks_on_host)."""
  if colocated:
    return {job: len(addresses) for job, addresses in spec.items()}
  return tasks_on_host(spec, host)


def host_pools(
  here: Mapping[str, int],
  job_name: str,
  mode: str = 'auto',
  cores: int | None = None,
) -> ThreadPools:
  """The pools of a `job_name` task whose host runs here[job] tasks of each
  job (itself included), before any explicit --num_*_threads.

  mode 'auto': with more than one task on the host, a worker gets
  cores / (workers there), any other task cores / (all tasks there), at
  least 1 each; alone, or mode 'tf_default': TensorFlow's defaults.
  """
  sharing = sum(here.values())
  if mode != 'auto' or sharing <= 1:
    return TF_DEFAULTS
  cores = cores or available_cores()
  split = here.get('worker', 0) if job_name == 'worker' else sharing
  share = max(1, cores // max(1, split))
  return ThreadPools(share, share)


def inter_op_threads(pools: ThreadPools, cores: int | None = None) -> int:
  """The inter-op threads a task with `pools` runs on a host of `cores`
  (pools.inter_op 0 is TensorFlow's default: one per core)."""
  return pools.inter_op or cores or available_cores()
