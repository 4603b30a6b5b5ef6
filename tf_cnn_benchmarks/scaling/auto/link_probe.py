"""The link between a cluster's hosts, measured by its tasks before they start.

--variable_update=auto in a cluster whose tasks are on different hosts, with
no --link_mbits, predicts for the link the tasks really have. Before any
TensorFlow server starts, every task meets the chief worker (worker 0) on
the chief's own cluster address (its port is free until the chief's server
binds it):

  peer -> chief   HELLO <job> <index>
  chief <-> one peer on another host: PING/PONG round trips, then rounds of
                  DATA <n> + n bytes, answered GOT <bytes> <seconds> (the
                  peer times the bytes after the first tenth: TCP's slow
                  start and a token bucket's first burst sit there)
  chief -> peers  RESULT <json>   (the same figures for every task)

so every task predicts from the same figures and makes the same choice.
Rounds grow 4x from 256 KiB until one lasts ROUND_SECONDS (a 25 Mbit/s link
stops at 4 MiB, 25 Gbit/s at 256 MiB or more); the rate is the median of
ROUNDS rounds of that size. The one-way latency is half the link's round
trip less half a loopback round trip measured the same way on the chief
(what the Python ends add, which the profile's own transport figures
already hold).

Raw TCP, one stream, chief to one peer: the figure is the bandwidth of that
pair's path, taken for every host's link (what --link_mbits says), and
--link_topology still says whether hosts share it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import statistics
import threading
import time

from tf_cnn_benchmarks.platform import json_input

# How long a task waits for the others (they may start minutes apart).
TIMEOUT_SECONDS = 300.0
FIRST_ROUND_BYTES = 256 << 10
MAX_ROUND_BYTES = 1 << 30
ROUND_SECONDS = 0.5
ROUNDS = 3
PINGS = 20
WARMUP_PINGS = 3
STEADY_SKIP = 0.1
CHUNK = 1 << 16


class ProbeError(RuntimeError):
  """The measurement could not be made; one line naming what failed."""


@dataclasses.dataclass(frozen=True)
class LinkFigures:
  """The measured link: Mbit/s, one-way latency (us) and who measured it."""

  payload_mbits: float  # what one TCP stream carried
  mbits: float  # the rate on the wire that carries it (--link_mbits's sense)
  one_way_latency_us: float
  round_trip_us: float
  loopback_round_trip_us: float
  between: tuple  # ('worker:0', 'ps:0')

  def record(self) -> dict:
    """The results line's `prediction.link` (results/schema.json)."""
    return {
      'measured': True,
      'mbits': self.mbits,
      'payload_mbits': self.payload_mbits,
      'one_way_latency_us': self.one_way_latency_us,
      'between': list(self.between),
    }

  def text(self) -> str:
    """One console line."""
    return (
      '--variable_update=auto: link measured between %s and %s: %g Mbit/s '
      'of payload (%g on the wire), %g us one way (--link_mbits=R skips '
      'the measurement)'
      % (
        self.between + (self.payload_mbits, self.mbits, self.one_way_latency_us)
      )
    )


def _host_port(address: str) -> tuple:
  host, _, port = address.rpartition(':')
  return host.strip('[]'), int(port)


def _send_line(sock, text: str) -> None:
  sock.sendall((text + '\n').encode())


def _read_line(reader) -> str:
  line = reader.readline()
  if not line:
    raise ConnectionError('the other end closed the connection')
  return line.decode().strip()


def _read_exact(reader, count: int) -> None:
  """Reads and drops `count` bytes."""
  left = count
  while left:
    got = reader.read(min(CHUNK, left))
    if not got:
      raise ConnectionError('the other end closed mid-stream')
    left -= len(got)


def measure_between_tasks(
  cluster, payload_share: float = 1.0, timeout: float = TIMEOUT_SECONDS
) -> LinkFigures:
  """The link figures, the same on every task of `cluster` (its
  cluster/spec.py Cluster): the chief measures, every other task gets the
  chief's figures. Call before this task's TensorFlow server starts.
  payload_share: the share of the wire's rate a TCP stream carries (the
  cost model's wire_payload); `mbits` is the payload rate over it.

  Raises:
    ProbeError: a task did not come in `timeout` seconds, or the chief's
      port is taken.
  """
  deadline = time.monotonic() + timeout
  chief = ('worker', 0)
  if cluster.me not in cluster.all_tasks():
    raise ProbeError(
      "measuring the link: %s takes no part (only the cluster spec's "
      'tasks do); give it --link_mbits=R, the figure the workers printed'
      % cluster.task_name
    )
  try:
    if cluster.me == chief:
      peers = [t for t in cluster.all_tasks() if t != chief]
      return _as_chief(cluster, peers, deadline, payload_share)
    return _as_peer(cluster, cluster.address_of(*chief), deadline)
  except (OSError, ValueError) as e:  # a peer died, timed out, or garbled
    raise ProbeError(
      'measuring the link with worker 0: %s; give --link_mbits=R to skip '
      'the measurement' % _why(e)
    ) from None


def _why(error: Exception) -> str:
  """A short reason: the OS's words, the message, or the error's kind."""
  if getattr(error, 'errno', None):
    return os.strerror(error.errno)
  return str(error) or type(error).__name__


def _probe_peer(cluster, joined: dict) -> tuple:
  """The peer to measure with: the first on another host than the chief,
  workers before ps tasks before a controller (the first of all when every
  task shares the chief's host)."""
  chief_host = _host_port(cluster.address_of('worker', 0))[0]
  order = {'worker': 0, 'ps': 1}
  tasks = sorted(joined, key=lambda t: (order.get(t[0], 2), t))
  for task in tasks:
    if _host_port(cluster.address_of(*task))[0] != chief_host:
      return task
  return tasks[0]


def _as_chief(cluster, peers, deadline, payload_share) -> LinkFigures:
  """Listens on the chief's port, measures, tells every peer."""
  port = _host_port(cluster.address_of('worker', 0))[1]
  try:
    listener = _listen(port)
  except OSError as e:
    raise ProbeError(
      'measuring the link: cannot listen on port %d of worker 0 (%s)'
      % (port, _why(e))
    ) from None
  joined = {}
  try:
    with listener:
      _accept_all(listener, peers, joined, deadline)
      figures = _measure(cluster, joined, payload_share)
      result = 'RESULT ' + json.dumps(dataclasses.asdict(figures))
      for sock, _ in joined.values():
        _send_line(sock, result)
      for _, reader in joined.values():
        reader.read()  # the peer closes first: TIME_WAIT stays on its side
  finally:
    for sock, reader in joined.values():
      reader.close()
      sock.close()
  return figures


def _listen(port: int):
  if socket.has_dualstack_ipv6():
    return socket.create_server(
      ('', port), family=socket.AF_INET6, dualstack_ipv6=True
    )
  return socket.create_server(('', port))


def _accept_all(listener, peers: list, joined: dict, deadline: float) -> None:
  """Accepts every peer's HELLO into joined {(job, index): (sock, reader)}."""
  while len(joined) < len(peers):
    left = deadline - time.monotonic()
    if left <= 0:
      missing = sorted(set(peers) - set(joined))
      raise ProbeError(
        'measuring the link: %s did not join worker 0 in time; give '
        '--link_mbits=R to skip the measurement'
        % ', '.join('%s:%d' % t for t in missing)
      )
    listener.settimeout(left)
    try:
      sock, _ = listener.accept()
    except TimeoutError:
      continue
    sock.settimeout(max(1.0, deadline - time.monotonic()))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reader = sock.makefile('rb')
    words = _read_line(reader).split()
    task = (words[1], int(words[2])) if len(words) == 3 else None
    if words[:1] != ['HELLO'] or task not in peers or task in joined:
      reader.close()
      sock.close()  # not one of ours (a port scanner, a stale task)
      continue
    joined[task] = (sock, reader)


def _measure(cluster, joined: dict, payload_share: float) -> LinkFigures:
  """Round trips and the stream rate, chief to the probe peer."""
  task = _probe_peer(cluster, joined)
  sock, reader = joined[task]
  link_rtt = _round_trip_us(sock, reader)
  loopback_rtt = _loopback_round_trip_us()
  mbits = _stream_mbits(sock, reader)
  return LinkFigures(
    payload_mbits=float('%.4g' % mbits),
    mbits=float('%.4g' % (mbits / payload_share)),
    one_way_latency_us=round(max(0.0, (link_rtt - loopback_rtt) / 2), 1),
    round_trip_us=round(link_rtt, 1),
    loopback_round_trip_us=round(loopback_rtt, 1),
    between=('worker:0', '%s:%d' % task),
  )


def _round_trip_us(sock, reader) -> float:
  """Median round trip of a PING line, us (after a few unmeasured)."""
  times = []
  for k in range(WARMUP_PINGS + PINGS):
    start = time.perf_counter()
    _send_line(sock, 'PING')
    if _read_line(reader) != 'PONG':
      raise ProbeError('measuring the link: a peer answered out of turn')
    if k >= WARMUP_PINGS:
      times.append((time.perf_counter() - start) * 1e6)
  return statistics.median(times)


def _loopback_round_trip_us() -> float:
  """The same round trip to a thread of this process over loopback."""
  listener = socket.create_server(('127.0.0.1', 0))
  echo = threading.Thread(target=_echo_once, args=(listener,), daemon=True)
  echo.start()
  with listener, socket.create_connection(listener.getsockname()) as sock:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with sock.makefile('rb') as reader:
      rtt = _round_trip_us(sock, reader)
  echo.join(timeout=5)
  return rtt


def _echo_once(listener) -> None:
  """Answers PING with PONG on one connection until it closes."""
  sock, _ = listener.accept()
  sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
  with sock, sock.makefile('rb') as reader:
    for line in reader:
      if line.strip() == b'PING':
        _send_line(sock, 'PONG')


def _stream_mbits(sock, reader) -> float:
  """Median rate of ROUNDS streams of the first size lasting ROUND_SECONDS."""
  size = FIRST_ROUND_BYTES
  while True:
    seconds, mbits = _stream_round(sock, reader, size)
    if seconds >= ROUND_SECONDS or size >= MAX_ROUND_BYTES:
      break
    size *= 4
  rates = [mbits] + [
    _stream_round(sock, reader, size)[1] for _ in range(ROUNDS - 1)
  ]
  return statistics.median(rates)


def _stream_round(sock, reader, size: int) -> tuple:
  """(seconds the round took at the chief, the peer's steady Mbit/s)."""
  block = memoryview(bytes(CHUNK))
  start = time.perf_counter()
  _send_line(sock, 'DATA %d' % size)
  left = size
  while left:
    left -= sock.send(block[: min(CHUNK, left)])
  words = _read_line(reader).split()
  seconds = time.perf_counter() - start
  if len(words) != 3 or words[0] != 'GOT' or float(words[2]) <= 0:
    raise ProbeError('measuring the link: a peer answered out of turn')
  return seconds, float(words[1]) * 8 / float(words[2]) / 1e6


def _as_peer(cluster, chief_address: str, deadline: float) -> LinkFigures:
  """Joins the chief, answers its measurement, returns its figures."""
  sock = _connect(chief_address, deadline)
  with sock, sock.makefile('rb') as reader:
    _send_line(sock, 'HELLO %s %d' % cluster.me)
    while True:
      sock.settimeout(max(1.0, deadline - time.monotonic()))
      words = _read_line(reader).split(None, 1)
      if words == ['PING']:
        _send_line(sock, 'PONG')
      elif words[0] == 'DATA':
        _send_line(sock, 'GOT %d %.9f' % _timed_receive(reader, int(words[1])))
      elif words[0] == 'RESULT':
        try:
          values = json_input.loads(words[1], "worker 0's RESULT")
        except json_input.JsonInputError as e:
          raise ProbeError('measuring the link: %s' % e) from None
        values['between'] = tuple(values['between'])
        return LinkFigures(**values)
      else:
        raise ProbeError('measuring the link: worker 0 sent %r' % words[0])


def _timed_receive(reader, size: int) -> tuple:
  """(bytes after the first tenth, the seconds they took to arrive)."""
  skip = int(size * STEADY_SKIP)
  _read_exact(reader, skip)
  start = time.perf_counter()
  _read_exact(reader, size - skip)
  return size - skip, time.perf_counter() - start


def _connect(address: str, deadline: float):
  """A connection to the chief, retried until it listens or the deadline."""
  host, port = _host_port(address)
  while True:
    try:
      sock = socket.create_connection((host, port), timeout=5)
      sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
      return sock
    except OSError as e:
      if time.monotonic() > deadline:
        raise ProbeError(
          'measuring the link: cannot reach worker 0 at %s (%s); give '
          '--link_mbits=R to skip the measurement' % (address, _why(e))
        ) from None
      time.sleep(0.2)
