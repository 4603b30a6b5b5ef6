"""Throttled networks for the local launcher: tc token buckets, veths, a bridge.

The launcher runs in its own user and network namespace (`unshare -rn`), where
it is root: it may change its loopback, make bridges and veth pairs, start
processes in further network namespaces (`unshare -n`) and enter them
(`nsenter --net=`). Nothing here touches the machine's own network.

Two shapes of the network between the tasks (--topology):

- shared: every task in the launcher's namespace, talking over loopback, with
  one token bucket (tc tbf) on loopback: one link that all flows, in both
  directions, share, like a hub.
- switch: each task in its own namespace, its `eth0` one end of a veth pair
  whose other end is a port of a bridge in the launcher's namespace; a token
  bucket on both ends (each direction of each task's link): a switch port per
  host, full duplex.
"""

import math
import os
import shutil
import subprocess
import time

from tf_cnn_benchmarks.commands import lifetime

# Frames the shaped links carry, as on Ethernet. Loopback's own MTU (64 KiB)
# makes every TCP segment 64 KiB, and a token bucket whose burst is smaller
# than one packet drops it: the rate collapses. With a 1500-byte MTU a bucket
# of a few packets holds, and the two topologies carry the same frames.
LINK_MTU = 1500
# The bridge and the tasks' addresses: private, and only inside the private
# namespaces.
BRIDGE = 'br31'
SUBNET = '10.31.0.%d'
SUBNET_BITS = 24
MAX_HOSTS = 250
# The token bucket's queue, in time at the link's rate: long enough that TCP
# keeps the link busy, short enough that a ping waits little behind a bulk
# transfer.
QUEUE_S = 0.02
# ... and at least this many bytes: at slow rates 20 ms is a few dozen
# frames, and the burst of one step's messages of a small model (an
# all-reduce's chunks, all sent at once) overflowed it: trivial, 3 workers,
# collective over 25 Mbit/s switch ports dropped 3-6% of its packets (tc -s)
# and ran at 829 images/sec; with 256 KiB of queue 910-912.
MIN_QUEUE_BYTES = 256 * 1024
# The largest segment the stack hands a qdisc (GSO), and the burst from which
# the bucket holds one whole (see tbf_sizes).
GSO_BYTES = 65536
GSO_FROM_BYTES = 32 * 1024
# The rates tbf_argv can give tc, in Mbit/s: tc's smallest rate is 1 byte/s;
# above the largest the queue of QUEUE_S at the rate (tbf_sizes' limit) no
# longer fits tc's 32-bit byte count ("illegal value for limit").
MIN_MBITS = 8e-6
MAX_MBITS = math.floor((2**32 - 1) / QUEUE_S * 8 / 1e6)


class ShapingError(Exception):
  """A namespace or tc step failed; the text says which and why."""


def run(argv) -> None:
  """Runs one ip/tc/nsenter command; raises ShapingError if it fails."""
  try:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
  except (OSError, subprocess.SubprocessError) as e:
    raise ShapingError('%s: %s' % (' '.join(argv), e)) from None
  if done.returncode:
    lines = (done.stderr or done.stdout or '').strip().splitlines()
    raise ShapingError(
      '`%s` failed: %s'
      % (' '.join(argv), lines[-1] if lines else 'exit %d' % done.returncode)
    )


def tbf_sizes(mbits: float, mtu: int = LINK_MTU):
  """(burst bytes, limit bytes) of a token bucket at `mbits` Mbit/s.

  The burst holds a few frames and about a millisecond at the rate (the
  kernel refills the bucket on timer ticks: a burst below rate x tick caps the
  rate below what was asked), and no more: a full bucket lets that many bytes
  through at once, which a short message after a pause would not get on a
  real link. The stack hands the qdisc segments of up to 64 KiB (GSO); a
  bucket smaller than one is cut into frames by tbf, which from a few hundred
  Mbit/s on costs rate (measured: 500 Mbit/s asked, 380-450 carried with a
  40-62 KB burst, 476 with 70 KB), so from GSO_FROM_BYTES of burst on the
  burst holds a whole segment. The queue holds QUEUE_S at the rate, and at
  least MIN_QUEUE_BYTES.
  """
  bytes_per_s = mbits * 1e6 / 8
  burst = max(4 * (mtu + 100), int(bytes_per_s * 0.001))
  if burst >= GSO_FROM_BYTES:
    burst = max(burst, GSO_BYTES + 4 * (mtu + 100))
  limit = max(2 * burst, int(bytes_per_s * QUEUE_S), MIN_QUEUE_BYTES)
  return burst, limit


def tbf_argv(dev: str, mbits: float, mtu: int = LINK_MTU):
  """The `tc` command that puts a token bucket of `mbits` on `dev`."""
  burst, limit = tbf_sizes(mbits, mtu)
  return [
    'tc',
    'qdisc',
    'replace',
    'dev',
    dev,
    'root',
    'tbf',
    'rate',
    '%dbit' % round(mbits * 1e6),
    'burst',
    '%d' % burst,
    'limit',
    '%d' % limit,
  ]


def in_netns(pid, argv):
  """`argv` run in the network namespace of process `pid` (None: here)."""
  if pid is None:
    return list(argv)
  return ['nsenter', '--net=/proc/%d/ns/net' % pid, '--'] + list(argv)


def missing_tools():
  """The first of unshare/nsenter/ip/tc not on PATH, or None."""
  for tool in ('unshare', 'nsenter', 'ip', 'tc'):
    if not shutil.which(tool):
      return tool
  return None


def shaping_works(mbits: float) -> str:
  """'' if a token bucket can be set in a new namespace here, else why not."""
  tool = missing_tools()
  if tool:
    return '%s is not installed' % tool
  script = 'ip link set lo up && %s' % ' '.join(tbf_argv('lo', mbits))
  try:
    done = subprocess.run(
      ['unshare', '-rn', 'sh', '-c', script],
      capture_output=True,
      text=True,
      timeout=20,
    )
  except (OSError, subprocess.SubprocessError) as e:
    return str(e)
  if done.returncode:
    lines = (done.stderr or '').strip().splitlines()
    return 'unshare -rn + tc tbf failed (%s)' % (
      lines[-1] if lines else 'exit %d' % done.returncode
    )
  return ''


def shape_loopback(mbits: float) -> None:
  """The shared topology: one token bucket on this namespace's loopback."""
  run(['ip', 'link', 'set', 'lo', 'mtu', str(LINK_MTU)])
  run(tbf_argv('lo', mbits))


def _start_holder():
  """A process alone in a new network namespace, holding it open."""
  holder = subprocess.Popen(
    ['unshare', '-n', '--', 'sleep', 'infinity'],
    stdin=subprocess.DEVNULL,
    preexec_fn=lifetime.die_with_parent_preexec(),
  )
  ours = os.readlink('/proc/self/ns/net')
  deadline = time.monotonic() + 10
  while time.monotonic() < deadline:
    try:
      if os.readlink('/proc/%d/ns/net' % holder.pid) != ours:
        return holder
    except OSError:
      pass
    if holder.poll() is not None:
      break
    time.sleep(0.01)
  holder.kill()
  holder.wait()
  raise ShapingError('unshare -n: no new network namespace for a task')


class SwitchNetwork:
  """Hosts in their own namespaces, each on a port of one bridge.

  Use as a context manager, or call close(): the hosts' namespaces live as
  long as their holder processes.
  """

  def __init__(self, mbits=None):
    self.mbits = mbits
    self.holders = []  # one per host, in order
    run(['ip', 'link', 'add', BRIDGE, 'type', 'bridge'])
    run(['ip', 'link', 'set', BRIDGE, 'up'])

  def add_host(self) -> str:
    """A new host on the switch; returns its address."""
    index = len(self.holders)
    if index >= MAX_HOSTS:
      raise ShapingError('more than %d hosts on one switch' % MAX_HOSTS)
    holder = _start_holder()
    self.holders.append(holder)
    port, address = 'p%d' % index, SUBNET % (index + 1)
    run(
      ['ip', 'link', 'add', port, 'type', 'veth', 'peer', 'name', 'eth0']
      + ['netns', str(holder.pid)]
    )
    run(['ip', 'link', 'set', port, 'mtu', str(LINK_MTU), 'master', BRIDGE])
    run(['ip', 'link', 'set', port, 'up'])
    inside = [
      ['ip', 'link', 'set', 'lo', 'up'],
      ['ip', 'link', 'set', 'eth0', 'mtu', str(LINK_MTU), 'up'],
      ['ip', 'addr', 'add', '%s/%d' % (address, SUBNET_BITS), 'dev', 'eth0'],
    ]
    for argv in inside:
      run(in_netns(holder.pid, argv))
    if self.mbits:
      run(tbf_argv(port, self.mbits))  # into the host
      run(in_netns(holder.pid, tbf_argv('eth0', self.mbits)))  # out of it
    return address

  def host(self, index: int) -> str:
    """The address of host `index`, adding hosts up to it: the clusters
    of one launch (auto's trials, then the run) reuse the same hosts."""
    while len(self.holders) <= index:
      self.add_host()
    return SUBNET % (index + 1)

  def prefix(self, index: int):
    """The argv prefix that runs a command on host `index`."""
    return in_netns(self.holders[index].pid, [])

  def close(self) -> None:
    """Ends the hosts' namespaces (the veths go with them)."""
    for holder in self.holders:
      if holder.poll() is None:
        holder.kill()
      holder.wait()
    self.holders = []

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()
