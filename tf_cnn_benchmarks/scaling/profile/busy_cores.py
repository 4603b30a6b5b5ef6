"""Keep every core of this host busy while something is measured.

Tasks that share one host's cores (a local cluster's colocated workers)
hand each other RPCs while the other tasks compute: a worker's RunGraph or
RecvTensor then waits for a core. `busy()` reproduces that load without any
model: one spinning process per core this process may run on, at the same
priority as the measurement, started before the block and killed after it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

# A spinner's whole program: a loop that never sleeps (one core's worth).
_SPIN = 'while True:\n  pass\n'
# Seconds the spinners get to start before the block runs (Python's start).
_START_S = 0.5


def die_with_parent() -> None:
  """Popen preexec_fn: the kernel kills the child when this process ends
  (Linux prctl PR_SET_PDEATHSIG; elsewhere nothing)."""
  try:
    ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)
  except (OSError, AttributeError):
    pass


def core_count() -> int:
  """Cores this process may run on (its affinity, else the CPU count)."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # not Linux
    return os.cpu_count() or 1


@contextlib.contextmanager
def spinners(count: int | None = None):
  """Runs the block with `count` (default: every core) spinning processes;
  yields their pids."""
  count = core_count() if count is None else count
  procs = [
    subprocess.Popen(
      [sys.executable, '-c', _SPIN],
      stdin=subprocess.DEVNULL,
      stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL,
      preexec_fn=die_with_parent,
    )
    for _ in range(count)
  ]
  try:
    time.sleep(_START_S)
    yield [p.pid for p in procs]
  finally:
    for proc in procs:
      proc.kill()
    for proc in procs:
      proc.wait()


@contextlib.contextmanager
def busy(count: int | None = None):
  """Runs the block with `count` (default: every core) spinning processes;
  yields their count."""
  with spinners(count) as pids:
    yield len(pids)


def cpu_seconds(pids) -> float:
  """The CPU seconds (user + system) the processes `pids` used so far, from
  /proc/<pid>/stat (Linux; OSError elsewhere or for a process gone)."""
  total, tick = 0.0, os.sysconf('SC_CLK_TCK')
  for pid in pids:
    with open('/proc/%d/stat' % pid, encoding='ascii') as f:
      # The command name (in parentheses) may hold spaces: split after it.
      fields = f.read().rsplit(')', 1)[1].split()
    total += (int(fields[11]) + int(fields[12])) / tick
  return total
