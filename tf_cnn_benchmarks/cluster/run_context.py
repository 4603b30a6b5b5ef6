"""The driver's view of where it runs: in-process, or as a cluster client.

Both contexts answer the same questions (session target, whether this
process writes the results line, what to add to the session config, what to
do when the run is over), so the driver never asks whether it is in a
cluster. A context is made before the graph is built; `start()` brings up
what the session needs (a cluster client's server, done flags, watchdog).
"""

from __future__ import annotations

from typing import Optional, Protocol

from tf_cnn_benchmarks.cluster import done_flags
from tf_cnn_benchmarks.cluster import fingerprint
from tf_cnn_benchmarks.cluster import roles as roles_lib
from tf_cnn_benchmarks.cluster import servers
from tf_cnn_benchmarks.cluster import spec as spec_lib
from tf_cnn_benchmarks.cluster import verdicts as verdicts_lib
from tf_cnn_benchmarks.cluster import watchdog as watchdog_lib
from variable_mgr import traits as traits_lib

# The tasks that write a cluster run's results line.
_CHIEFS = (('worker', 0), ('controller', 0))


class RunContext(Protocol):
  """What the driver needs of the place it runs in."""

  target: str  # session target ('' in-process)
  is_chief: bool  # writes checkpoints and summaries; inits shared
  reports_results: bool  # whether this process writes the results line
  describe: Optional[str]  # the header's "Cluster:" line, if any

  def start(self) -> None: ...
  def configure(self, config, *, reaches_workers: bool = False): ...
  def finish(self) -> None: ...
  def verdicts(self) -> Optional[verdicts_lib.Verdicts]: ...


class LocalRun:
  """A run without a cluster: in-process session, nothing to coordinate."""

  def __init__(self, reports_results: bool = True):
    self.target = ''
    self.is_chief = True
    self.reports_results = reports_results
    self.describe = None

  def start(self) -> None:
    pass

  def configure(self, config, *, reaches_workers: bool = False):
    del reaches_workers  # no other worker
    return config

  def finish(self) -> None:
    pass

  def verdicts(self) -> None:
    """No other worker to tell when an evaluation stops training."""
    return None


class ClientRun:
  """A task that runs steps: its server, done flags and watchdog.

  reports_results: None for the default (only the chief writes the results
  line); True/False to decide it for this task (tests: every task reports).
  """

  def __init__(
    self,
    cluster: spec_lib.Cluster,
    traits: traits_lib.Traits,
    num_cpu_devices: int,
    *,
    cross_replica_sync: bool = True,
    reports_results: Optional[bool] = None,
    run_flags: tuple = (),
    pools: servers.ThreadPools = servers.TF_DEFAULTS,
    runtime_fields: Optional[dict] = None,
  ):
    self.cluster = cluster
    self.pools = pools
    # The GPU options reach the devices only through the server's config.
    self.runtime_fields = dict(runtime_fields or {})
    self.run_flags = run_flags
    self.traits = traits
    self.num_cpu_devices = num_cpu_devices
    self.roles = roles_lib.roles(cluster, traits.one_graph)
    self.is_chief = cluster.me in _CHIEFS
    self.reports_results = (
      self.is_chief if reports_results is None else reports_results
    )
    self.lockstep = traits_lib.workers_in_lockstep(traits, cross_replica_sync)
    self.target = None
    self._server = None
    self.flags = None
    self.watchdog = None

  @property
  def describe(self) -> str:
    """The header's "Cluster:" line."""
    return '%d worker(s), %d ps, %s; this task: %s%s' % (
      self.cluster.num_workers,
      self.cluster.num_ps,
      'controller' if self.cluster.controller_host else 'no controller',
      self.cluster.task_name,
      ' (chief)' if self.is_chief else '',
    )

  def start(self) -> None:
    """Starts the server, the done flags and the watchdog."""
    me = self.cluster.me
    self._server = servers.start_server(
      self.cluster, self.num_cpu_devices, self.pools, self.runtime_fields
    )
    self.target = self._server.target
    own = me if me in self.roles.flag_keepers else None
    self.flags = done_flags.DoneFlags(
      self.target, self.roles.flag_keepers, len(self.roles.clients), own
    )
    self.watchdog = watchdog_lib.Watchdog(
      self.cluster,
      self._peers_to_watch(),
      is_done=self._finished,
      reported_lost=self._reported_lost,
    ).start()
    fingerprint.check(
      self.target,
      self.roles.flag_keepers[0],
      self.roles.clients,
      me,
      self.run_flags,
      leaving=self.watchdog.stop,
    )

  def _peers_to_watch(self) -> list:
    me = self.cluster.me
    peers = [k for k in self.roles.flag_keepers if k != me]
    if self.lockstep:
      peers += [c for c in self.roles.clients if c != me and c not in peers]
    return peers

  def _finished(self, peer) -> bool:
    """A peer that finished (flag set) is not lost when it goes away."""
    return peer in self.roles.clients and self.flags.is_done(
      self.roles.clients.index(peer)
    )

  def _reported_lost(self) -> list:
    """Keepers mark a client they lost; reading that names the lost task
    where this task's own probe has not seen it go yet."""
    return [
      (keeper, self.roles.clients[i]) for keeper, i in self.flags.lost_clients()
    ]

  def configure(self, config, *, reaches_workers: bool = False):
    """Adds what a cluster session needs to a session config.

    reaches_workers: the graph has ops on the other workers besides its
    manager's (the chief's checkpoint of every worker's own state).
    """
    config.experimental.collective_group_leader = spec_lib.task_device(
      'worker', 0
    )
    if not (self.traits.cross_worker_ops or self.traits.one_graph):
      own = '/job:%s/task:%d' % self.cluster.me
      config.device_filters.extend(
        ['/job:ps', '/job:worker' if reaches_workers else own]
      )
    return config

  def verdicts(self) -> Optional[verdicts_lib.Verdicts]:
    """The chief's stop/continue verdicts (None with one client)."""
    if len(self.roles.clients) < 2:
      return None
    chief = self.roles.clients[0]
    return verdicts_lib.Verdicts(
      self.target,
      self.roles.flag_keepers[0],
      chief,
      self.cluster.address_of(*chief),
    )

  def finish(self) -> None:
    """Marks this client done everywhere; a keeper waits for the others."""
    self.watchdog.stop()
    self.flags.mark_done(self.roles.clients.index(self.cluster.me))
    if self.cluster.me in self.roles.flag_keepers:
      roles_lib.wait_for_clients(self.cluster, self.roles, self.flags)


def make(
  cluster: Optional[spec_lib.Cluster],
  traits: traits_lib.Traits,
  num_cpu_devices: int,
  *,
  cross_replica_sync: bool = True,
  reports_results: Optional[bool] = None,
  run_flags: tuple = (),
  cluster_threads: str = 'auto',
  explicit_threads: tuple = (0, 0),
  tasks_colocated: Optional[bool] = None,
  runtime_fields: Optional[dict] = None,
) -> RunContext:
  """The context of a run: LocalRun without a cluster, else a ClientRun.

  run_flags: ((flag, value), ...) every client must share (see fingerprint).
  cluster_threads, explicit_threads, tasks_colocated: --cluster_threads,
  the (intra, inter) thread counts given (0: unset) and --tasks_colocated,
  which size the server's pools (see servers.thread_pools).
  runtime_fields: the GPU options the task's server creates its devices
  with (gpu_runtime.config_fields).
  """
  if cluster is None:
    return LocalRun(True if reports_results is None else reports_results)
  return ClientRun(
    cluster,
    traits,
    num_cpu_devices,
    cross_replica_sync=cross_replica_sync,
    reports_results=reports_results,
    run_flags=run_flags,
    pools=servers.thread_pools(
      cluster,
      cluster_threads,
      explicit=servers.ThreadPools(*explicit_threads),
      colocated=tasks_colocated,
    ),
    runtime_fields=runtime_fields,
  )
