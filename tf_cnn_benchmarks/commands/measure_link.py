#!/usr/bin/env python3
"""One end of a link measurement between two tasks of the local launcher.

  launch_local_cluster.py --measure_link [--link_mbits=R] [--topology=T]

starts two of these where two tasks of a cluster would run: `--serve=A:P` on
the second task's host, `--send=A:P` on the first's. The sender first
bounces a small message off the server (--pings times, after a few unmeasured
ones: the round-trip time), then sends --megabytes in one TCP stream. The
server times the stream as it arrives and answers with its figures; the
sender prints one JSON line:

  {"megabytes": 4.0, "mbits": 49.6, "steady_mbits": 49.9,
   "rtt_ms_median": 0.21, "rtt_ms_p90": 0.3, "ping_bytes": 64}

`mbits` is the whole stream over its whole time (first to last byte at the
server); `steady_mbits` leaves out the first tenth of the bytes, where TCP's
slow start and the token bucket's initial burst sit.
"""

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time

from tf_cnn_benchmarks.commands import lifetime
from tf_cnn_benchmarks.platform import checkout
from tf_cnn_benchmarks.platform import json_input

MODULE = 'tf_cnn_benchmarks.commands.measure_link'

CHUNK = 1 << 16
WARMUP_PINGS = 5
STEADY_SKIP = 0.1  # fraction of the stream before the steady rate's clock
# How long the sender waits for the server to come up, and then for each
# answer of it: a link that carries nothing for this long is not measured.
WAIT_S = 30.0


def _address(text):
  host, _, port = text.rpartition(':')
  return host, int(port)


def _recv_exactly(conn, n):
  data = b''
  while len(data) < n:
    piece = conn.recv(n - len(data))
    if not piece:
      raise ConnectionError('peer closed')
    data += piece
  return data


def _read_line(conn):
  """One line, read a byte at a time: nothing after it is consumed."""
  line = b''
  while not line.endswith(b'\n'):
    line += _recv_exactly(conn, 1)
  return line


def _receive_stream(conn, total):
  """(whole-stream seconds, steady seconds, steady bytes) of `total` bytes."""
  skip = int(total * STEADY_SKIP)
  got, first, steady_start = 0, None, None
  buf = bytearray(CHUNK)
  while got < total:
    n = conn.recv_into(buf, min(CHUNK, total - got))
    if not n:
      raise ConnectionError('peer closed mid-stream')
    now = time.perf_counter()
    if first is None:
      first = now
    got += n
    if steady_start is None and got >= skip:
      steady_start, steady_from = now, got
  end = time.perf_counter()
  return end - first, end - steady_start, total - steady_from


def serve(address):
  """Answers one sender: echoes its pings, times its stream."""
  with socket.create_server(address) as server:
    conn, _ = server.accept()
  with conn:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pings, size, total = json_input.loads(_read_line(conn), 'the sender')
    for _ in range(pings):
      conn.sendall(_recv_exactly(conn, size))
    whole_s, steady_s, steady_bytes = _receive_stream(conn, total)
    conn.sendall(
      (json.dumps([whole_s, steady_s, steady_bytes]) + '\n').encode()
    )


def _connect(address, wait_s):
  deadline = time.monotonic() + wait_s
  while True:
    try:
      return socket.create_connection(address, timeout=wait_s)
    except OSError:
      if time.monotonic() > deadline:
        raise
      time.sleep(0.05)


def send(address, megabytes, pings, ping_bytes, wait_s=WAIT_S):
  """Measures the link to a server; returns the figures as a dict.

  Raises:
    OSError: the server could not be reached, or nothing came back from it
      for `wait_s` seconds (TimeoutError: a link too slow to measure).
  """
  total = int(megabytes * 1e6)
  with _connect(address, wait_s) as conn:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    count = pings + WARMUP_PINGS
    conn.sendall((json.dumps([count, ping_bytes, total]) + '\n').encode())
    message, rtts = b'x' * ping_bytes, []
    for _ in range(count):
      start = time.perf_counter()
      conn.sendall(message)
      _recv_exactly(conn, ping_bytes)
      rtts.append(time.perf_counter() - start)
    rtts = sorted(rtts[WARMUP_PINGS:])
    block = b'\0' * CHUNK
    sent = 0
    while sent < total:
      sent += conn.send(block[: min(CHUNK, total - sent)])
    reply = _read_line(conn)
  whole_s, steady_s, steady_bytes = json_input.loads(reply, 'the server')
  return {
    'megabytes': megabytes,
    'mbits': round(total * 8 / whole_s / 1e6, 2),
    'steady_mbits': round(steady_bytes * 8 / steady_s / 1e6, 2),
    'rtt_ms_median': round(statistics.median(rtts) * 1e3, 4),
    'rtt_ms_p90': round(rtts[int(0.9 * (len(rtts) - 1))] * 1e3, 4),
    'ping_bytes': ping_bytes,
  }


def default_megabytes(mbits):
  """A transfer of about two seconds at `mbits` (None: unthrottled)."""
  if mbits is None:
    return 1000.0
  return max(4.0, min(500.0, mbits * 2 / 8))


def between_tasks(args, switch, port=None):
  """The launcher's --measure_link: one measurement between two task places.

  The two ends run where worker:0 and worker:1 would: on loopback of this
  namespace (shared topology), or on two hosts of `switch`. Prints the
  figures (one JSON line, then one line for people); returns the status.
  """
  places, port = _places(switch, port)
  megabytes = args.measure_megabytes or default_megabytes(args.link_mbits)
  end = checkout.module_argv(MODULE, python=args.python)
  target = '%s:%d' % (places[1][0], port)
  server = subprocess.Popen(
    places[1][1] + end + ['--serve=' + target],
    preexec_fn=lifetime.die_with_parent_preexec(),
    env=checkout.child_env(),
  )
  try:
    sender = subprocess.run(
      places[0][1] + end + ['--send=' + target, '--megabytes=%g' % megabytes],
      env=checkout.child_env(),
      capture_output=True,
      text=True,
      timeout=args.timeout,
    )
  except subprocess.TimeoutExpired:
    return _failed(
      'no figures within --timeout=%g s (%g MB at %s)'
      % (args.timeout, megabytes, _asked(args, '--link_mbits=%g')),
      status=124,  # as a cluster's run past --timeout
    )
  finally:
    if server.poll() is None:
      server.kill()
    server.wait()
  if sender.returncode:
    # Its own one line (or, from a crash, the exception's line: the last).
    said = sender.stderr.strip().splitlines()
    return _failed(said[-1] if said else 'exit %d' % sender.returncode)
  figures = json_input.loads(
    sender.stdout.strip().splitlines()[-1], "the sender's figures"
  )
  figures.update(topology=args.topology, asked_mbits=args.link_mbits)
  print('launcher: measure_link: %s' % json.dumps(figures, sort_keys=True))
  print(
    'launcher: %s link, asked %s: measured %.4g Mbit/s (steady %.4g), '
    'round trip of %d B %.3f ms (median)'
    % (
      args.topology,
      _asked(args, '%g Mbit/s'),
      figures['mbits'],
      figures['steady_mbits'],
      figures['ping_bytes'],
      figures['rtt_ms_median'],
    ),
    flush=True,
  )
  return 0


def _places(switch, port) -> tuple:
  """([(address, command prefix)] of the two ends, the server's port)."""
  if switch:
    places = [(switch.add_host(), switch.prefix(i)) for i in range(2)]
  else:
    places = [('127.0.0.1', []), ('127.0.0.1', [])]
  if port is None:
    with socket.create_server(('127.0.0.1', 0)) as probe:
      port = probe.getsockname()[1]
  return places, port


def _asked(args, form) -> str:
  """The asked rate in `form`, or 'unthrottled'."""
  return 'unthrottled' if args.link_mbits is None else form % args.link_mbits


def _failed(why, status=1) -> int:
  """Prints the launcher's one error line; returns `status`."""
  print('error: --measure_link: %s' % why, file=sys.stderr, flush=True)
  return status


def main(argv=None):
  """Entry point of one end; returns the exit status."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  role = parser.add_mutually_exclusive_group(required=True)
  role.add_argument('--serve', metavar='ADDRESS:PORT')
  role.add_argument('--send', metavar='ADDRESS:PORT')
  parser.add_argument('--megabytes', type=float, default=4.0)
  parser.add_argument('--pings', type=int, default=50)
  parser.add_argument('--ping_bytes', type=int, default=64)
  parser.add_argument('--wait_s', type=float, default=WAIT_S)
  args = parser.parse_args(argv)
  if args.serve:
    serve(_address(args.serve))
    return 0
  try:
    figures = send(
      _address(args.send),
      args.megabytes,
      args.pings,
      args.ping_bytes,
      args.wait_s,
    )
  except TimeoutError:
    # The launcher prints this line after 'error: --measure_link: '.
    print(
      'nothing came back from %s for %g s: the link carries too little '
      'to be measured in that time' % (args.send, args.wait_s),
      file=sys.stderr,
    )
    return 1
  except OSError as e:
    print('%s: %s' % (args.send, e.strerror or e), file=sys.stderr)
    return 1
  print(json.dumps(figures), flush=True)
  return 0


if __name__ == '__main__':
  sys.exit(main())
