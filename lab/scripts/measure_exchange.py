#!/usr/bin/env python3
"""Rounds of TCP exchanges among the local launcher's task places.

  python -m lab.scripts.measure_exchange --launch [--num_workers=3]
      [--link_mbits=R] [--topology=shared|switch] [--exchange_kilobytes=KB]

enters the local launcher's private, shaped network (its network flags mean
what they mean there), starts one of these per host, placed as the tasks of
a cluster would be, and times two patterns of the same bytes: a ring (each
host sends B bytes to the next) and all-to-all (each host sends B/(N-1) to
every other host). Each round every host sends its messages at once; a
receiver answers every whole message with one byte, so a round ends for a
host when its messages were all received and it received all of its own.
Rounds are --gap_ms apart, like the steps of a training job (a flow starts
from an idle connection).

On one link per host (switch) both patterns load every port equally, yet
TCP flows that meet at two bottlenecks (the sender's port and the
receiver's) fill them less than one flow per port does. The ratio of the
round times, ring / all-to-all, is the cost model's all_to_all_efficiency
(tf_cnn_benchmarks/scaling/model/cost_model_calibration.py). The launcher prints
one JSON line:

  {"hosts": 3, "bytes_per_host": 131072, "ring_ms": 46.9,
   "all_to_all_ms": 63.0, "ideal_ms": 46.5, "efficiency": 0.744, ...}

A third pattern, fan_out, is what a ps task does when every worker reads its
variables: host 0 sends B bytes to each other host at once, and times on its own
clock when each receiver acknowledged. Flows that share a link fairly end
together; TCP's do not (lab/notes/predicting_experiments.md). The line adds
"fan_out_ms" (each flow's median end, ascending) and "fan_out_shares" (those
ends over the last one's).
"""

import argparse
import json
import socket
import statistics
import subprocess
import sys
import threading
import time

from lab.probes import read_stagger
from tf_cnn_benchmarks.commands import launch_local_cluster as launcher
from tf_cnn_benchmarks.commands import lifetime
from tf_cnn_benchmarks.commands import measure_link
from tf_cnn_benchmarks.platform import checkout
from tf_cnn_benchmarks.platform import json_input
from tf_cnn_benchmarks.scaling.model import cost_model_calibration

MODULE = 'lab.scripts.measure_exchange'

PORT = 7310
DEFAULT_KILOBYTES = 256
PATTERNS = ('ring', 'all_to_all')
# Host 0 sends B bytes to every other host at once (a ps task answering
# every worker's read): when each flow ends, on host 0's clock.
FAN_OUT = 'fan_out'
ACK = b'a'


def destinations(pattern, me, n, nbytes):
  """{host: bytes} that host `me` sends in one round of `pattern`."""
  if pattern == 'ring':
    return {(me + 1) % n: nbytes}
  return {j: nbytes // (n - 1) for j in range(n) if j != me}


def sources(pattern, me, n, nbytes):
  """{host: bytes} that host `me` receives in one round of `pattern`."""
  if pattern == 'ring':
    return {(me - 1) % n: nbytes}
  return {j: nbytes // (n - 1) for j in range(n) if j != me}


def _connect_from(address, source, wait_s=30.0):
  """A connection to `address` from `source` (loopback hosts differ only
  by their source address)."""
  deadline = time.monotonic() + wait_s
  while True:
    try:
      conn = socket.create_connection(address, wait_s, (source, 0))
      conn.settimeout(None)
      return conn
    except OSError:
      if time.monotonic() > deadline:
        raise
      time.sleep(0.05)


def _connect_all(me, addresses):
  """(socket to each other host, socket from each other host)."""
  server = socket.create_server((addresses[me], PORT))
  incoming = {}

  def accept():
    for _ in range(len(addresses) - 1):
      conn, peer = server.accept()
      incoming[addresses.index(peer[0])] = conn

  acceptor = threading.Thread(target=accept)
  acceptor.start()
  outgoing = {}
  for j, address in enumerate(addresses):
    if j != me:
      outgoing[j] = _connect_from((address, PORT), addresses[me])
  acceptor.join()
  server.close()
  for conn in list(outgoing.values()) + list(incoming.values()):
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
  return outgoing, incoming


def _one_round(sends, receives):
  """Sends and receives one round's messages at once; returns seconds."""

  def send(conn, nbytes):
    conn.sendall(b'\0' * nbytes)
    measure_link._recv_exactly(conn, 1)

  def receive(conn, nbytes):
    measure_link._recv_exactly(conn, nbytes)
    conn.sendall(ACK)

  threads = [threading.Thread(target=send, args=p) for p in sends]
  threads += [threading.Thread(target=receive, args=p) for p in receives]
  start = time.perf_counter()
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  return time.perf_counter() - start


def _fan_out_round(sends):
  """Host 0's messages sent at once: the seconds until each one's receiver
  acknowledged it, ascending."""
  ends, lock = [], threading.Lock()

  def send(conn, nbytes):
    conn.sendall(b'\0' * nbytes)
    measure_link._recv_exactly(conn, 1)
    with lock:
      ends.append(time.perf_counter() - start)

  threads = [threading.Thread(target=send, args=p) for p in sends]
  start = time.perf_counter()
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  return sorted(ends)


def fan_out_rounds(me, outgoing, incoming, nbytes, rounds, gap_s):
  """The fan_out rounds: host 0's per-flow end times (ms, ascending) per
  round; [] on the other hosts, which receive and acknowledge."""
  times = []
  for _ in range(rounds):
    if me == 0:
      time.sleep(gap_s)
      ends = _fan_out_round([(c, nbytes) for c in outgoing.values()])
      times.append([round(t * 1e3, 3) for t in ends])
    else:
      measure_link._recv_exactly(incoming[0], nbytes)
      incoming[0].sendall(ACK)
  return times


def peer(me, addresses, nbytes, rounds, gap_s):
  """One host: every pattern's round times (ms), as a dict."""
  outgoing, incoming = _connect_all(me, addresses)
  n, times = len(addresses), {}
  for pattern in PATTERNS:
    sends = [
      (outgoing[j], b) for j, b in destinations(pattern, me, n, nbytes).items()
    ]
    receives = [
      (incoming[j], b) for j, b in sources(pattern, me, n, nbytes).items()
    ]
    times[pattern] = []
    for _ in range(rounds):
      time.sleep(gap_s)
      times[pattern].append(round(_one_round(sends, receives) * 1e3, 3))
  times[FAN_OUT] = fan_out_rounds(me, outgoing, incoming, nbytes, rounds, gap_s)
  return times


def _wire_payload() -> float:
  """The share of a shaped link's rate that carries TCP payload: the cost
  model's wire_payload (one place for that rule)."""
  return cost_model_calibration.default_calibration().value('wire_payload')


def summarise(per_host, nbytes, mbits, topology='switch'):
  """The launcher's figures from every host's round times. ideal_ms: a
  round's bytes at the rate of the link they share (shared: every host's
  bytes cross one link; switch: each host's own)."""
  n = len(per_host)
  out = {'hosts': n, 'bytes_per_host': nbytes}
  for pattern in PATTERNS:
    # A round lasts as long as its slowest host.
    rounds = [max(r) for r in zip(*[h[pattern] for h in per_host])]
    out[pattern + '_ms'] = round(statistics.median(rounds), 3)
    # A stream of rounds (a training run) pays their mean, slow ones too.
    out[pattern + '_mean_ms'] = round(statistics.fmean(rounds), 3)
  if mbits:
    crossing = nbytes * (n if topology == 'shared' else 1)
    wire_payload = _wire_payload()
    out['ideal_ms'] = round(
      crossing * 8 / (mbits * 1e6 * wire_payload) * 1e3, 3
    )
  out['efficiency'] = round(out['ring_ms'] / out['all_to_all_ms'], 3)
  out['mean_efficiency'] = round(
    out['ring_mean_ms'] / out['all_to_all_mean_ms'], 3
  )
  fan_out = per_host[0].get(FAN_OUT)
  if fan_out:
    out.update(fan_out_figures(fan_out))
  return out


def fan_out_figures(rounds) -> dict:
  """Host 0's fan_out rounds: each flow's median end (ms, the first to end
  first) and those ends as shares of the last one's (all 1: the flows
  shared the link fairly and ended together)."""
  ends, shares = read_stagger.finisher_medians(rounds)
  return {'fan_out_ms': ends, 'fan_out_shares': shares}


def among_tasks(args, switch):
  """The launcher's --measure_exchange; prints the figures, returns 0/1."""
  n = args.num_workers or 3
  if switch:
    addresses = [switch.add_host() for _ in range(n)]
    prefixes = [switch.prefix(i) for i in range(n)]
  else:
    addresses = ['127.0.0.%d' % (i + 1) for i in range(n)]
    prefixes = [[] for _ in range(n)]
  nbytes = int((args.exchange_kilobytes or DEFAULT_KILOBYTES) * 1024)
  argv = checkout.module_argv(
    MODULE, '--addresses=' + ','.join(addresses), python=args.python
  )
  argv += ['--bytes=%d' % nbytes]
  procs = [
    subprocess.Popen(
      prefixes[i] + argv + ['--me=%d' % i],
      stdout=subprocess.PIPE,
      text=True,
      preexec_fn=lifetime.die_with_parent_preexec(),
      env=checkout.child_env(),
    )
    for i in range(n)
  ]
  outs = [p.communicate(timeout=args.timeout)[0] for p in procs]
  if any(p.returncode for p in procs):
    print('error: measure_exchange: a host failed', file=sys.stderr)
    return 1
  per_host = [
    json_input.loads(o.strip().splitlines()[-1], 'host %d' % i)
    for i, o in enumerate(outs)
  ]
  figures = summarise(per_host, nbytes, args.link_mbits, args.topology)
  figures.update(topology=args.topology, asked_mbits=args.link_mbits)
  print('launcher: measure_exchange: %s' % json.dumps(figures, sort_keys=True))
  print(
    'launcher: %d hosts, %s link: ring %.1f ms, all-to-all %.1f ms a round '
    '(%d bytes a host): all-to-all efficiency %.3f (of the means %.3f)'
    % (
      n,
      args.topology,
      figures['ring_ms'],
      figures['all_to_all_ms'],
      nbytes,
      figures['efficiency'],
      figures['mean_efficiency'],
    ),
    flush=True,
  )
  if 'fan_out_ms' in figures:
    print(
      'launcher: fan-out from one host to %d at once: the flows ended at '
      '%s ms (shares of the last: %s)'
      % (
        n - 1,
        ', '.join('%.1f' % t for t in figures['fan_out_ms']),
        ', '.join('%.2f' % f for f in figures['fan_out_shares']),
      ),
      flush=True,
    )
  return 0


def launch(argv):
  """--launch: the launcher's private, shaped network and one host process
  per --num_workers; prints the figures. Returns the exit status."""
  parser = launcher.build_parser()
  parser.add_argument(
    '--exchange_kilobytes',
    default=None,
    help='bytes each host sends a round, in kB (default: 256)',
  )
  args = parser.parse_args(argv)
  launcher.check_link_flags(args)
  launcher.number_at_least(
    args, 'exchange_kilobytes', 0, True, 'a number of kilobytes > 0'
  )
  return launcher.run_in_network(
    args, ['--launch', *argv], among_tasks, module=MODULE
  )


def main(argv=None):
  """One host's end (prints its round times as one JSON line), or with
  --launch the whole measurement."""
  argv = sys.argv[1:] if argv is None else argv
  if argv[:1] == ['--launch']:
    return launch(argv[1:])
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--me', type=int, required=True)
  parser.add_argument('--addresses', required=True)
  parser.add_argument('--bytes', type=int, default=DEFAULT_KILOBYTES * 1024)
  parser.add_argument('--rounds', type=int, default=15)
  parser.add_argument('--gap_ms', type=float, default=20.0)
  args = parser.parse_args(argv)
  addresses = args.addresses.split(',')
  times = peer(args.me, addresses, args.bytes, args.rounds, args.gap_ms / 1e3)
  print(json.dumps(times), flush=True)
  return 0


if __name__ == '__main__':
  sys.exit(main())
