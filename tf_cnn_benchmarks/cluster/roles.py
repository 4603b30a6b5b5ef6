"""Who runs steps (clients), who keeps the done flags, who only serves."""

from __future__ import annotations

import dataclasses
import sys
import time

from tf_cnn_benchmarks.cluster import done_flags
from tf_cnn_benchmarks.cluster import servers
from tf_cnn_benchmarks.cluster import spec as spec_lib
from tf_cnn_benchmarks.cluster import watchdog as watchdog_lib

# How long a flag keeper keeps serving after it lost a client.
LINGER_S = 8.0


@dataclasses.dataclass(frozen=True)
class Roles:
  """The part each task plays in a run.

  clients: (job, index) of the tasks that run steps.
  flag_keepers: (job, index) of the tasks that keep the done flags.
  serve_only: keepers that run no steps and exit when every client is done.
  """

  clients: tuple
  flag_keepers: tuple
  serve_only: tuple


def roles(cluster: spec_lib.Cluster, one_graph: bool) -> Roles:
  """The roles of every task; one_graph: a controller runs the one graph."""
  workers = tuple(('worker', k) for k in range(cluster.num_workers))
  ps = tuple(('ps', k) for k in range(cluster.num_ps))
  if one_graph:
    return Roles((('controller', 0),), workers, workers)
  if ps:
    return Roles(workers, ps, ps)
  # No ps: worker 0 keeps the flags and waits for its peers before exiting,
  # so no peer is left waiting on a transfer from it.
  return Roles(workers, (('worker', 0),), ())


def serve(
  cluster: spec_lib.Cluster,
  one_graph: bool,
  num_cpu_devices: int = 1,
  out=sys.stdout,
  pools: servers.ThreadPools = servers.TF_DEFAULTS,
  runtime_fields=None,
) -> int:
  """Runs a serve-only task until every client is done; returns 0.

  runtime_fields: the GPU options its server creates the devices with.
  """
  r = roles(cluster, one_graph)
  server = servers.start_server(cluster, num_cpu_devices, pools, runtime_fields)
  print(
    '%s serving on %s for %d client(s)'
    % (cluster.task_name, cluster.address_of(*cluster.me), len(r.clients)),
    file=out,
    flush=True,
  )
  flags = done_flags.DoneFlags(
    server.target, [cluster.me], len(r.clients), cluster.me
  )
  wait_for_clients(cluster, r, flags)
  print(
    '%s: all clients done; exiting' % cluster.task_name, file=out, flush=True
  )
  return 0


def wait_for_clients(
  cluster: spec_lib.Cluster, r: Roles, flags: done_flags.DoneFlags
) -> None:
  """Polls this keeper's flags until every client is done; loses dead ones."""

  # Keepers linger after a loss: the clients still stepping must see the
  # lost task go, not this one.
  def record(peer):
    if peer in r.clients:
      flags.mark_lost(r.clients.index(peer))

  watchdog = watchdog_lib.Watchdog(
    cluster,
    [c for c in r.clients if c != cluster.me],
    linger_s=LINGER_S,
    before_exit=record,
  )
  while True:
    done = flags.done_clients()
    if len(done) == len(r.clients):
      return
    watchdog.is_done = lambda peer, done=done: r.clients.index(peer) in done
    watchdog.check_once()
    time.sleep(0.3)
