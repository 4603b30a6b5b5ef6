"""Liveness: peers' ports are probed; a lost task ends this one with one line.

A peer that was reachable (or never came up within the start-up grace) and
refuses connections, while its done flag is unset, is lost: the task prints
one line naming it and exits 1. TensorFlow's own RPCs could otherwise wait
for ever.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from typing import Callable, Optional, Sequence

import tensorflow as tf

from tf_cnn_benchmarks.cluster import spec as spec_lib

# Seconds between liveness probes, failed probes in a row before a peer is
# lost, and how long a peer may take to come up at all.
PROBE_INTERVAL_S = 1.0
PROBES_TO_LOSE = 3
START_GRACE_S = 45.0
# Exit status of a task that lost a peer.
LOST_PEER_STATUS = 1


def reachable(address: str) -> bool:
  """Whether a TCP connection to HOST:PORT succeeds within a second."""
  host, _, port = address.rpartition(':')
  try:
    with socket.create_connection((host.strip('[]'), int(port)), timeout=1.0):
      return True
  except OSError:
    return False


def lost(
  task: tuple,
  address: str,
  why: str = 'stopped answering',
  linger_s: float = 0.0,
) -> None:
  """Prints the one line and ends the process (no clean-up can hang).

  linger_s: keep serving that long first, so that the other tasks notice the
  lost task themselves (and name it) rather than this one going away.
  """
  print(
    'error: lost task %s:%d (%s %s); exiting'
    % (task[0], task[1], address, why),
    file=sys.stderr,
    flush=True,
  )
  time.sleep(linger_s)
  os._exit(LOST_PEER_STATUS)  # pylint: disable=protected-access


# How long the watchdog waits for an answer from the done flags (a session
# run against other tasks): creating that session blocks without a bound
# while one of them never came up.
FLAG_READ_TIMEOUT_S = 5.0


class _Bounded:
  """fn called in a helper thread, waited for at most timeout_s.

  At most one call is outstanding: while one hangs, later calls return their
  default at once instead of piling up threads.
  """

  def __init__(self, fn: Callable, timeout_s: float):
    self._fn = fn
    self._timeout_s = timeout_s
    self._busy = threading.Event()

  def __call__(self, *args, default):
    if self._busy.is_set():
      return default
    self._busy.set()
    box = {}

    def target():
      try:
        box['value'] = self._fn(*args)
      except tf.errors.OpError:
        pass
      finally:
        self._busy.clear()

    thread = threading.Thread(target=target, daemon=True, name='flag-read')
    thread.start()
    thread.join(self._timeout_s)
    return box.get('value', default)


class Watchdog:
  """Probes peers' ports; calls `lost` for one that went away unfinished.

  Its own waits are bounded: the done flags are read through `_Bounded`, so
  a task that never came up is still reported after START_GRACE_S.
  """

  def __init__(
    self,
    cluster: spec_lib.Cluster,
    peers: Sequence[tuple],
    is_done: Callable[[tuple], bool] = lambda task: False,
    linger_s: float = 0.0,
    before_exit: Callable[[tuple], None] = lambda task: None,
    reported_lost: Callable[[], list] = list,
  ):
    self.cluster = cluster
    self.linger_s = linger_s
    self.before_exit = before_exit
    self.reported_lost = reported_lost
    self.peers = list(peers)
    self.is_done = is_done
    self._read_lost = _Bounded(
      lambda: self.reported_lost(), FLAG_READ_TIMEOUT_S
    )
    self._read_done = _Bounded(
      lambda peer: self.is_done(peer), FLAG_READ_TIMEOUT_S
    )
    self._stop = threading.Event()
    self._seen = set()
    self._fails = {p: 0 for p in self.peers}
    self._start = time.monotonic()
    self._thread = threading.Thread(
      target=self._loop, daemon=True, name='cluster-watchdog'
    )

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
      pass  # best effort: exiting matters more
    lost(peer, address, why, linger_s=self.linger_s)

  def check_once(self) -> None:
    """One probe of every peer; calls `lost` for a lost one."""
    for (job, index), peer in self._read_lost(default=[]):
      if peer != self.cluster.me:
        self._lose(
          peer,
          self.cluster.address_of(*peer),
          'reported lost by %s:%d' % (job, index),
        )
    for peer in self.peers:
      address = self.cluster.address_of(*peer)
      if reachable(address):
        self._seen.add(peer)
        self._fails[peer] = 0
        continue
      if peer in self._seen:
        self._fails[peer] += 1
        # Unanswered flags count as not done: the peer's port is gone too.
        if self._fails[peer] >= PROBES_TO_LOSE and not self._read_done(
          peer, default=False
        ):
          self._lose(peer, address)
      elif time.monotonic() - self._start > START_GRACE_S:
        self._lose(peer, address, 'never came up within %ds' % START_GRACE_S)

  def _loop(self) -> None:
    while not self._stop.wait(PROBE_INTERVAL_S):
      self.check_once()


def unreachable_peer(
  cluster: spec_lib.Cluster, tries: int = 3, interval_s: float = 0.5
) -> Optional[tuple]:
  """The first other task whose port refuses every one of `tries` probes."""
  candidates = [t for t in cluster.all_tasks() if t != cluster.me]
  for attempt in range(tries):
    candidates = [
      t for t in candidates if not reachable(cluster.address_of(*t))
    ]
    if not candidates:
      return None
    if attempt + 1 < tries:
      time.sleep(interval_s)
  return candidates[0]


def describe_failure(cluster: spec_lib.Cluster, error: Exception) -> str:
  """One line for a failed RPC or step: the lost task if one is gone."""
  peer = unreachable_peer(cluster)
  name = type(error).__name__
  if peer is not None:
    return 'error: lost task %s:%d (%s stopped answering; %s); exiting' % (
      peer[0],
      peer[1],
      cluster.address_of(*peer),
      name,
    )
  lines = [
    line.strip()
    for line in str(getattr(error, 'message', '') or error).splitlines()
  ]
  useful = [line for line in lines if line and line != 'Graph execution error:']
  # "From /job:ps/...:" only says where; the cause is on the next line.
  head = (
    ' '.join(useful[:2])
    if useful and useful[0].endswith(':')
    else (useful[0] if useful else '')
  )
  return 'error: [%s] %s: %s' % (cluster.task_name, name, head[:300])
