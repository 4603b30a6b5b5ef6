"""Multi-worker runs: the cluster description, servers, shutdown, liveness.

A cluster has worker tasks (they run training steps), optional ps tasks
(they hold variables) and, for managers whose one graph spans every worker,
one controller (it runs that graph; the workers then only serve). Every task
starts a `tf.distribute.Server`.

Shutdown without manual kills: some tasks are *hosts* of a "done" flag vector
(one flag per client that runs steps). A client sets its flag on every host
when it has finished; a host that only serves exits once every flag is set.
Liveness: a watchdog thread connects to the peers' ports; a peer that was
reachable (or never came up within the start-up grace) and refuses
connections, while its done flag is unset, is lost: the task prints one line
naming it and exits 1. TensorFlow's own RPCs could otherwise wait for ever.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sys
import threading
import time
from typing import Callable, Optional, Sequence

import tensorflow as tf

tf1 = tf.compat.v1

JOBS = ('ps', 'worker', 'controller')
# Seconds between liveness probes, failed probes in a row before a peer is
# lost, and how long a peer may take to come up at all.
PROBE_INTERVAL_S = 1.0
PROBES_TO_LOSE = 3
START_GRACE_S = 45.0
# Values of a done flag.
DONE, LOST = 1, 2
# How long a finishing task waits for the hosts' flags to exist.
FLAG_WAIT_S = 30.0
# How long a host keeps serving after it lost a client.
LINGER_S = 8.0
# Exit status of a task that lost a peer.
LOST_PEER_STATUS = 1


class ClusterError(ValueError):
  """A bad cluster description; the message is one line naming the flag."""


@dataclasses.dataclass(frozen=True)
class Cluster:
  """Who is in the cluster and which task this process is."""
  job_name: str
  task_index: int
  worker_hosts: tuple
  ps_hosts: tuple = ()
  controller_host: Optional[str] = None
  protocol: str = 'grpc'

  @property
  def num_workers(self) -> int:
    return len(self.worker_hosts)

  @property
  def num_ps(self) -> int:
    return len(self.ps_hosts)

  @property
  def task_name(self) -> str:
    """e.g. 'worker:0', as the launcher prefixes lines."""
    return '%s:%d' % (self.job_name, self.task_index)

  def spec_dict(self) -> dict:
    """The ClusterSpec as {job: [host:port, ...]}."""
    spec = {'worker': list(self.worker_hosts)}
    if self.ps_hosts:
      spec['ps'] = list(self.ps_hosts)
    if self.controller_host:
      spec['controller'] = [self.controller_host]
    return spec

  def address_of(self, job: str, index: int) -> str:
    return self.spec_dict()[job][index]

  def all_tasks(self) -> list:
    """(job, index) of every task."""
    return [(job, k) for job, hosts in sorted(self.spec_dict().items())
            for k in range(len(hosts))]


def task_device(job: str, index: int) -> str:
  """Fully qualified device prefix of one task."""
  return '/job:%s/replica:0/task:%d' % (job, index)


# ---- parsing -------------------------------------------------------------

def _hosts(flag: str, text: Optional[str]) -> tuple:
  """'h:p,h:p' -> ('h:p', 'h:p'), validated."""
  if not text:
    return ()
  hosts = tuple(h.strip() for h in text.split(','))
  for host in hosts:
    name, _, port = host.rpartition(':')
    if not name or not port.isdigit() or not 0 < int(port) < 65536:
      raise ClusterError('--%s=%s: each entry must be HOST:PORT with a port '
                         'in 1..65535' % (flag, text))
  if len(set(hosts)) != len(hosts):
    raise ClusterError('--%s=%s: an address appears twice' % (flag, text))
  return hosts


def from_tf_config(text: str) -> dict:
  """Cluster flag values from a TF_CONFIG JSON string."""
  try:
    config = json.loads(text)
    spec = config['cluster']
    task = config['task']
    values = {'job_name': task['type'], 'task_index': int(task['index']),
              'worker_hosts': ','.join(spec.get('worker', [])),
              'ps_hosts': ','.join(spec.get('ps', [])) or None}
    controller = spec.get('controller') or []
    if controller:
      values['controller_host'] = controller[0]
  except (ValueError, KeyError, TypeError, AttributeError) as e:
    raise ClusterError('TF_CONFIG: must be JSON {"cluster": {"worker": '
                       '[...], "ps": [...]}, "task": {"type": ..., "index": '
                       '...}} (%s)' % type(e).__name__) from None
  if values['job_name'] not in JOBS:
    raise ClusterError('TF_CONFIG: task type %r: must be one of %s (this '
                       'harness has no "chief" job: worker 0 is the chief)'
                       % (values['job_name'], ', '.join(JOBS)))
  return values


def resolve(job_name, task_index, worker_hosts, ps_hosts, controller_host,
            protocol, env=None) -> Optional[Cluster]:
  """The Cluster the flags (or, without --job_name, TF_CONFIG) describe.

  Returns None for a local run. Flags win over TF_CONFIG.
  """
  env = os.environ if env is None else env
  if job_name is None and env.get('TF_CONFIG'):
    values = from_tf_config(env['TF_CONFIG'])
    job_name = values['job_name']
    task_index = values['task_index'] if task_index is None else task_index
    worker_hosts = worker_hosts or values['worker_hosts']
    ps_hosts = ps_hosts or values['ps_hosts']
    controller_host = controller_host or values.get('controller_host')
  task_index = 0 if task_index is None else task_index
  if job_name is None:
    for flag, value in (('worker_hosts', worker_hosts), ('ps_hosts', ps_hosts),
                        ('controller_host', controller_host)):
      if value:
        raise ClusterError('--%s: only with --job_name (one of %s)'
                           % (flag, ', '.join(JOBS)))
    return None
  if job_name not in JOBS:
    raise ClusterError('--job_name=%s: must be one of %s'
                       % (job_name, ', '.join(JOBS)))
  workers = _hosts('worker_hosts', worker_hosts)
  if not workers:
    raise ClusterError('--worker_hosts: required with --job_name (HOST:PORT,'
                       '...)')
  ps = _hosts('ps_hosts', ps_hosts)
  controller = _hosts('controller_host', controller_host)
  if len(controller) > 1:
    raise ClusterError('--controller_host=%s: exactly one HOST:PORT'
                       % controller_host)
  if protocol not in ('grpc', 'grpc+verbs', 'grpc+mpi', 'grpc+gdr'):
    raise ClusterError('--server_protocol=%s: must be grpc (or grpc+verbs, '
                       'grpc+mpi, grpc+gdr where built in)' % protocol)
  count = {'worker': len(workers), 'ps': len(ps),
           'controller': len(controller)}[job_name]
  if count == 0:
    raise ClusterError('--job_name=%s: needs --%s' % (
        job_name, 'ps_hosts' if job_name == 'ps' else 'controller_host'))
  if not 0 <= task_index < count:
    raise ClusterError('--task_index=%d: must be in 0..%d for --job_name=%s'
                       % (task_index, count - 1, job_name))
  everyone = workers + ps + controller
  if len(set(everyone)) != len(everyone):
    raise ClusterError('--worker_hosts/--ps_hosts/--controller_host: an '
                       'address is used by two tasks')
  return Cluster(job_name, task_index, workers, ps,
                 controller[0] if controller else None, protocol)


# ---- servers and sessions ----------------------------------------------

def server_config(num_cpu_devices: int = 1) -> tf1.ConfigProto:
  """Config the server creates its devices with (CPU towers: logical CPUs)."""
  config = tf1.ConfigProto(device_count={'CPU': max(1, num_cpu_devices)})
  config.experimental.collective_group_leader = task_device('worker', 0)
  # The server creates the GPU devices: several tasks may share a GPU.
  config.gpu_options.allow_growth = True
  return config


def start_server(cluster: Cluster, num_cpu_devices: int = 1):
  """Starts this task's tf.distribute.Server."""
  return tf.distribute.Server(
      tf.train.ClusterSpec(cluster.spec_dict()), job_name=cluster.job_name,
      task_index=cluster.task_index, protocol=cluster.protocol,
      config=server_config(num_cpu_devices), start=True)


# ---- done flags ----------------------------------------------------------

def _flags_variable(host_job: str, host_index: int, num_clients: int):
  """The done flags that (host_job, host_index) keeps; one per client."""
  with tf.device(task_device(host_job, host_index) + '/device:CPU:0'):
    return tf1.Variable(tf.zeros([num_clients], tf.int32), trainable=False,
                        collections=[], use_resource=True,
                        name='cluster_done_%s_%d' % (host_job, host_index))


class DoneFlags:
  """Graph and session on this task's server for the done flags."""

  def __init__(self, target: str, hosts: Sequence, num_clients: int,
               own: Optional[tuple]):
    self.graph = tf.Graph()
    self.hosts = list(hosts)
    with self.graph.as_default():
      self.flags = {h: _flags_variable(h[0], h[1], num_clients) for h in hosts}
      self.client = tf1.placeholder(tf.int32, [])
      self.set_ops = {h: v.scatter_update(tf.IndexedSlices(
          tf.fill([1], DONE), tf.reshape(self.client, [1])))
                      for h, v in self.flags.items()}
      self.lost_ops = {h: v.scatter_update(tf.IndexedSlices(
          tf.fill([1], LOST), tf.reshape(self.client, [1])))
                       for h, v in self.flags.items() if h == own}
      # The raw op: the wrapped one warns when a host's op goes unused.
      self.ready = {h: tf.raw_ops.VarIsInitializedOp(resource=v.handle)
                    for h, v in self.flags.items()}
      self.init = ({own: self.flags[own].initializer}
                   if own in self.flags else {})
      self.read = {h: v.read_value() for h, v in self.flags.items()}
    devices = ['/job:%s/task:%d' % h for h in hosts]
    config = tf1.ConfigProto(device_filters=devices)
    config.operation_timeout_in_ms = 20000
    self.session = tf1.Session(target, graph=self.graph, config=config)
    self.own = own
    if own in self.init:
      self.session.run(self.init[own])

  def done_clients(self) -> set:
    """Clients whose flag is set on this task's own flags."""
    return {i for i, f in enumerate(self.session.run(self.read[self.own]))
            if f == DONE}

  def mark_lost(self, client: int) -> None:
    """Records on this host that `client` was lost (other clients read it)."""
    self.session.run(self.lost_ops[self.own], {self.client: client})

  def _values(self, include_own: bool):
    """host -> its flag values, for the hosts that answer."""
    values = {}
    for host in self.hosts:
      if host == self.own and not include_own:
        continue
      try:
        values[host] = self.session.run(
            self.read[host], options=tf1.RunOptions(timeout_in_ms=2000))
      except tf.errors.OpError:
        continue   # the host itself may be gone: the probes see that
    return values

  def lost_clients(self) -> list:
    """(host, client index) of the clients another host marked lost."""
    return [(host, i) for host, flags in self._values(False).items()
            for i, f in enumerate(flags) if f == LOST]

  def is_done(self, client: int) -> bool:
    """Whether some host has `client` marked done."""
    return any(flags[client] == DONE
               for flags in self._values(True).values())

  def mark_done(self, client: int) -> None:
    """Sets `client`'s flag on every host (waits for each to exist)."""
    for host in self.hosts:
      deadline = time.monotonic() + FLAG_WAIT_S
      while not self.session.run(self.ready[host]):
        if time.monotonic() > deadline:
          raise tf.errors.DeadlineExceededError(
              None, None, 'done flags of %s:%d never appeared' % host)
        time.sleep(0.2)
      self.session.run(self.set_ops[host], {self.client: client})


# ---- liveness --------------------------------------------------------------

def _reachable(address: str) -> bool:
  host, _, port = address.rpartition(':')
  try:
    with socket.create_connection((host.strip('[]'), int(port)), timeout=1.0):
      return True
  except OSError:
    return False


def lost(task: tuple, address: str, why: str = 'stopped answering',
         linger_s: float = 0.0) -> None:
  """Prints the one line and ends the process (no clean-up can hang).

  linger_s: keep serving that long first, so that the other tasks notice the
  lost task themselves (and name it) rather than this one going away.
  """
  print('error: lost task %s:%d (%s %s); exiting' % (task[0], task[1], address,
                                                    why),
        file=sys.stderr, flush=True)
  time.sleep(linger_s)
  os._exit(LOST_PEER_STATUS)  # pylint: disable=protected-access


class Watchdog:
  """Probes peers' ports; calls `lost` for one that went away unfinished."""

  def __init__(self, cluster: Cluster, peers: Sequence[tuple],
               is_done: Callable[[tuple], bool] = lambda task: False,
               linger_s: float = 0.0,
               before_exit: Callable[[tuple], None] = lambda task: None,
               reported_lost: Callable[[], list] = list):
    self.cluster = cluster
    self.linger_s = linger_s
    self.before_exit = before_exit
    self.reported_lost = reported_lost
    self.peers = list(peers)
    self.is_done = is_done
    self._stop = threading.Event()
    self._seen = set()
    self._fails = {p: 0 for p in self.peers}
    self._start = time.monotonic()
    self._thread = threading.Thread(target=self._loop, daemon=True,
                                    name='cluster-watchdog')

  def start(self) -> 'Watchdog':
    self._thread.start()
    return self

  def stop(self) -> None:
    self._stop.set()

  def _lose(self, peer, address, why='stopped answering'):
    if self._stop.is_set():
      return
    try:
      self.before_exit(peer)
    except tf.errors.OpError:
      pass   # best effort: exiting matters more
    lost(peer, address, why, linger_s=self.linger_s)

  def check_once(self) -> None:
    """One probe of every peer; calls `lost` for a lost one."""
    for (job, index), peer in self.reported_lost():
      if peer != (self.cluster.job_name, self.cluster.task_index):
        self._lose(peer, self.cluster.address_of(*peer),
                   'reported lost by %s:%d' % (job, index))
    for peer in self.peers:
      address = self.cluster.address_of(*peer)
      if _reachable(address):
        self._seen.add(peer)
        self._fails[peer] = 0
        continue
      if peer in self._seen:
        self._fails[peer] += 1
        if self._fails[peer] >= PROBES_TO_LOSE and not self.is_done(peer):
          self._lose(peer, address)
      elif time.monotonic() - self._start > START_GRACE_S:
        self._lose(peer, address, 'never came up within %ds' % START_GRACE_S)

  def _loop(self) -> None:
    while not self._stop.wait(PROBE_INTERVAL_S):
      self.check_once()


def unreachable_peer(cluster: Cluster, tries: int = 3,
                     interval_s: float = 0.5) -> Optional[tuple]:
  """The first other task whose port refuses every one of `tries` probes."""
  me = (cluster.job_name, cluster.task_index)
  candidates = [t for t in cluster.all_tasks() if t != me]
  for attempt in range(tries):
    candidates = [t for t in candidates
                  if not _reachable(cluster.address_of(*t))]
    if not candidates:
      return None
    if attempt + 1 < tries:
      time.sleep(interval_s)
  return candidates[0]


def describe_failure(cluster: Cluster, error: Exception) -> str:
  """One line for a failed RPC or step: the lost task if one is gone."""
  peer = unreachable_peer(cluster)
  name = type(error).__name__
  if peer is not None:
    return 'error: lost task %s:%d (%s stopped answering; %s); exiting' % (
        peer[0], peer[1], cluster.address_of(*peer), name)
  lines = [l.strip() for l in str(getattr(error, 'message', '') or
                                  error).splitlines()]
  useful = [l for l in lines if l and l != 'Graph execution error:']
  # "From /job:ps/...:" only says where; the cause is on the next line.
  head = ' '.join(useful[:2]) if useful and useful[0].endswith(':') else (
      useful[0] if useful else '')
  return 'error: [%s] %s: %s' % (cluster.task_name, name, head[:300])


# ---- roles ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Roles:
  """Who runs steps (clients), who keeps done flags (hosts), who serves."""
  clients: tuple        # (job, index) of the tasks that run steps
  hosts: tuple          # (job, index) of the tasks keeping done flags
  serve_only: tuple     # hosts that run no steps and exit when all are done


def roles(cluster: Cluster, needs_controller: bool) -> Roles:
  """The roles of every task for a manager."""
  workers = tuple(('worker', k) for k in range(cluster.num_workers))
  ps = tuple(('ps', k) for k in range(cluster.num_ps))
  if needs_controller:
    return Roles((('controller', 0),), workers, workers)
  if ps:
    return Roles(workers, ps, ps)
  # No ps: worker 0 keeps the flags and waits for its peers before exiting,
  # so no peer is left waiting on a transfer from it.
  return Roles(workers, (('worker', 0),), ())


def serve(cluster: Cluster, needs_controller: bool, num_cpu_devices: int = 1,
          out=sys.stdout) -> int:
  """Runs a serve-only task until every client is done; returns 0."""
  r = roles(cluster, needs_controller)
  me = (cluster.job_name, cluster.task_index)
  server = start_server(cluster, num_cpu_devices)
  print('%s serving on %s for %d client(s)' % (
      cluster.task_name, cluster.address_of(*me), len(r.clients)),
        file=out, flush=True)
  flags = DoneFlags(server.target, [me], len(r.clients), me)
  wait_for_clients(cluster, r, flags)
  print('%s: all clients done; exiting' % cluster.task_name, file=out,
        flush=True)
  return 0


def wait_for_clients(cluster: Cluster, r: Roles, flags: DoneFlags) -> None:
  """Polls this host's flags until every client is done; loses dead ones."""
  # Hosts linger after a loss: the clients still stepping must see the lost
  # task go, not this one.
  def record(peer):
    if peer in r.clients:
      flags.mark_lost(r.clients.index(peer))
  watchdog = Watchdog(cluster, [c for c in r.clients if c != (
      cluster.job_name, cluster.task_index)], linger_s=LINGER_S,
                      before_exit=record)
  while True:
    done = flags.done_clients()
    if len(done) == len(r.clients):
      return
    watchdog.is_done = lambda peer: r.clients.index(peer) in done
    watchdog.check_once()
    time.sleep(0.3)


# ---- a client's view (used by the driver) ----------------------------------

@dataclasses.dataclass(frozen=True)
class Layout:
  """Where this process's graph puts its towers."""
  tower_devices: tuple
  first_tower_index: int        # global index of this graph's first tower
  workers_outside_graph: int    # how many graphs like this one run a step
  manager_cluster: object       # variable_mgr.base.ClusterDevices or None


def layout(cluster: Optional[Cluster], manager_cls, device_kind: str,
           num_towers: int, cross_replica_sync: bool = True) -> Layout:
  """Tower devices and global indices of this process's graph."""
  from variable_mgr import base  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks import devices  # pylint: disable=g-import-not-at-top
  local = devices.tower_devices(device_kind, num_towers)
  if cluster is None:
    return Layout(local, 0, 1, None)
  workers = tuple(task_device('worker', w) for w in range(cluster.num_workers))
  ps = tuple(task_device('ps', k) + '/device:CPU:0'
             for k in range(cluster.num_ps))
  kind = device_kind.upper()
  if manager_cls.needs_controller:
    devices = tuple('%s/device:%s:%d' % (w, kind, i) for w in workers
                    for i in range(num_towers))
    info = base.ClusterDevices(ps, workers, 0, True)
    return Layout(devices, 0, 1, info)
  me = cluster.task_index
  devices = tuple('%s/device:%s:%d' % (workers[me], kind, i)
                  for i in range(num_towers))
  return Layout(devices, me * num_towers, cluster.num_workers,
                base.ClusterDevices(ps, workers, me, me == 0,
                                    cross_replica_sync=cross_replica_sync))


class LocalRun:
  """A run without a cluster: in-process session, nothing to coordinate."""
  target = ''
  reports_results = True
  describe = None

  def configure(self, config):
    return config

  def finish(self) -> None:
    pass


class ClientRun:
  """A task that runs steps: its server, done flags and watchdog."""

  def __init__(self, cluster: Cluster, manager, num_cpu_devices: int):
    self.cluster = cluster
    self.manager = manager
    self.roles = roles(cluster, manager.needs_controller)
    self.me = (cluster.job_name, cluster.task_index)
    self.server = start_server(cluster, num_cpu_devices)
    self.target = self.server.target
    self.reports_results = self.me in (('worker', 0), ('controller', 0))
    own = self.me if self.me in self.roles.hosts else None
    self.flags = DoneFlags(self.target, self.roles.hosts,
                           len(self.roles.clients), own)
    peers = [h for h in self.roles.hosts if h != self.me]
    if manager.workers_in_lockstep:
      peers += [c for c in self.roles.clients
                if c != self.me and c not in peers]
    # Hosts mark a client they lost; reading that names the lost task even
    # where this task's own probe has not seen it go yet.
    # A peer that finished (flag set) is not lost when it goes away.
    self.watchdog = Watchdog(
        cluster, peers,
        is_done=lambda peer: (peer in self.roles.clients and
                              self.flags.is_done(
                                  self.roles.clients.index(peer))),
        reported_lost=lambda: [
            (host, self.roles.clients[i])
            for host, i in self.flags.lost_clients()]).start()

  @property
  def describe(self) -> str:
    """The header's "Cluster:" line."""
    return '%d worker(s), %d ps, %s; this task: %s%s' % (
        self.cluster.num_workers, self.cluster.num_ps,
        'controller' if self.cluster.controller_host else 'no controller',
        self.cluster.task_name,
        ' (chief)' if self.reports_results else '')

  def configure(self, config):
    """Adds what a cluster session needs to a session config."""
    config.experimental.collective_group_leader = task_device('worker', 0)
    if not (self.manager.talks_to_other_workers or
            self.manager.needs_controller):
      config.device_filters.extend(
          ['/job:ps', '/job:%s/task:%d' % self.me])
    return config

  def finish(self) -> None:
    """Marks this client done everywhere; a host waits for the others."""
    self.watchdog.stop()
    self.flags.mark_done(self.roles.clients.index(self.me))
    if self.me in self.roles.hosts:
      wait_for_clients(self.cluster, self.roles, self.flags)
