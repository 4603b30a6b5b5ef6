"""Keeps TensorFlow's import-time C++ chatter off stderr.

TensorFlow's C++ logging writes lines ("Could not find cuda drivers",
"failed call to cuInit", ...) straight to file descriptor 2 before its log
level is configurable, so a bad flag would not get the one clean line on
stderr that users (and scripts) rely on. We capture fd 2 while TensorFlow
loads and probes its devices, and replay the capture only if that fails.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile


@contextlib.contextmanager
def captured_stderr_fd():
  """Redirects fd 2 to a temporary file; replays it if the body raises."""
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as capture:
    os.dup2(capture.fileno(), 2)
    try:
      yield
    except BaseException:
      sys.stderr.flush()
      os.dup2(saved, 2)
      capture.seek(0)
      os.write(2, capture.read())
      raise
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)


def load_tensorflow():
  """Imports TensorFlow (graph mode, quiet Python logger) and probes devices."""
  with captured_stderr_fd():
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    tf.get_logger().setLevel('ERROR')
    tf.compat.v1.disable_eager_execution()
    tf.config.list_physical_devices('GPU')
  return tf
