"""busy_cores: one spinning process per core while the block runs."""

import os
import time

from tf_cnn_benchmarks.scaling.profile import busy_cores


def _cpu_seconds_of_children() -> float:
  t = os.times()
  return t.children_user + t.children_system


def _children() -> list:
  """Pids of this process's live children (Linux /proc)."""
  me, found = os.getpid(), []
  for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
      with open('/proc/%s/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    except OSError:
      continue
    if int(fields[1]) == me and fields[0] != 'Z':
      found.append(int(pid))
  return found


def test_spinners_take_a_core_each_and_are_gone_after():
  """Two spinners over 1 s of the block use about 2 CPU seconds (waited
  children's times count once they end), and none is left running."""
  before = _cpu_seconds_of_children()
  with busy_cores.busy(2) as count:
    assert count == 2
    assert len(_children()) == 2
    time.sleep(1.0)
  assert not _children()
  used = _cpu_seconds_of_children() - before
  # Each spinner ran for the 0.5 s start and the 1 s block: 3 CPU seconds
  # on an idle host, about half of it on a loaded one of two cores.
  assert used > 0.6, used


def test_core_count_is_this_process_affinity():
  assert busy_cores.core_count() == len(os.sched_getaffinity(0))


def test_spinners_yield_their_pids_and_their_cpu_is_read():
  """The spinners' own CPU seconds grow while they spin (about 1 a second
  each on an idle host; at least a fifth of that on a loaded one)."""
  with busy_cores.spinners(1) as pids:
    assert len(pids) == 1 and pids[0] in _children()
    start = busy_cores.cpu_seconds(pids)
    time.sleep(1.0)
    assert busy_cores.cpu_seconds(pids) - start > 0.2
  assert not _children()
