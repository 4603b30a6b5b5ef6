"""Ctrl-C noted, whatever TensorFlow makes of it.

Python's SIGINT handler raises KeyboardInterrupt in the main thread, at the
next bytecode. When that is inside TensorFlow's C++ code called back into
Python (its nest utilities while a graph is built), TensorFlow turns the
KeyboardInterrupt into an exception of its own, a bare TypeError: Ctrl-C
at that moment was a 97-line traceback with exit status 1 instead of
`interrupted`, 130. `noted` records the signal, so that the entry point
can tell an interrupt by whatever exception reaches it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import signal
import threading


@dataclasses.dataclass
class CtrlC:
  """Whether SIGINT arrived while `noted` was active."""

  interrupted: bool = False


@contextlib.contextmanager
def noted():
  """Within: SIGINT raises KeyboardInterrupt, as Python's handler does, and
  sets the yielded CtrlC's `interrupted`. Where SIGINT is not Python's
  default (ignored, or a caller's own handler), or off the main thread, it
  is left alone."""
  state = CtrlC()
  default = signal.getsignal(signal.SIGINT) is signal.default_int_handler
  if not default or threading.current_thread() is not threading.main_thread():
    yield state
    return

  def on_sigint(signum, frame):
    del signum, frame
    state.interrupted = True
    raise KeyboardInterrupt

  signal.signal(signal.SIGINT, on_sigint)
  try:
    yield state
  finally:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def quiet_tensorflow_logger() -> None:
  """Drops TensorFlow's Python log lines from here on: after an interrupt,
  objects of the half-built graph log 'Object was never used' as they go."""
  logging.getLogger('tensorflow').setLevel(logging.CRITICAL)
