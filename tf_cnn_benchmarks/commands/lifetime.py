"""Child processes that cannot outlive the process that started them.

A script killed with SIGKILL cannot clean up, and a child in its own session
(the sweep's points, so that a timeout can stop a whole process group) would
keep running and writing results. Linux's parent-death signal ties the
child's life to its parent: the kernel sends it when the parent dies.
"""

import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1
_PR_GET_PDEATHSIG = 2
try:
  _LIBC = ctypes.CDLL(None, use_errno=True)
  _PRCTL = _LIBC.prctl
except (OSError, AttributeError):  # not Linux: nothing ties the lives
  _PRCTL = None


def parent_death_signal() -> int:
  """The signal this process gets when its parent dies (0: none)."""
  if _PRCTL is None:
    return 0
  value = ctypes.c_int(0)
  _PRCTL(_PR_GET_PDEATHSIG, ctypes.byref(value), 0, 0, 0)
  return value.value


def die_with(parent_pid: int, sig: int = signal.SIGKILL) -> None:
  """This process gets `sig` when its parent dies; now if it died already."""
  if _PRCTL is None:
    return
  _PRCTL(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
  if os.getppid() != parent_pid:  # the parent died before prctl
    os.kill(os.getpid(), sig)


def die_with_parent_preexec():
  """A Popen preexec_fn: the child is killed when this process dies.

  Start children from the main thread with no other thread running where
  possible (preexec_fn runs between fork and exec).
  """
  parent = os.getpid()
  return lambda: die_with(parent)
