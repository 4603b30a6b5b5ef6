"""Output paths checked before the graph is built, and the final write.

A run used to train to the end and only then find that --result_file was a
directory or under a regular file, or that --train_dir was /dev/null: a
traceback, and the result lost. `check` looks at every output path first
(one line naming the flag); `write_results` turns a write that still fails
at the end (a full disk) into one line, leaving the lines already in the
file as they were (each line is appended whole, see result_lines).
"""

from __future__ import annotations

import os
import stat
import tempfile

from tf_cnn_benchmarks.reporting import result_lines

# The file --benchmark_log_dir gets, one results line per run or evaluation.
BENCHMARK_LOG_NAME = 'benchmark_run.log'

# Paths a results line may be written to although they are no regular file.
_STREAMS = ('/dev/stdout', '/dev/stderr', '/proc/self/fd/1', '/proc/self/fd/2')


class OutputError(ValueError):
  """An output path that cannot be written; the message is one line."""


class OutputWriteError(RuntimeError):
  """A checkpoint, summary or trace whose write failed during the run.

  A full disk or a directory gone unwritable after the up-front check: the
  message is one line naming the file; the exit status is 1 (the run
  failed), not 2. `result` is the run's result when the failure came after
  the timed steps (the final checkpoint): its results line is still written.
  """

  def __init__(self, message: str, result=None):
    super().__init__(message)
    self.result = result


def write_failure(what: str, path: str, error: Exception) -> OutputWriteError:
  """The one-line OutputWriteError of writing `what` at `path`."""
  return OutputWriteError(
    'writing the %s %s failed: %s' % (what, path, _reason(error))
  )


def _reason(error: Exception) -> str:
  """Why a write failed, in a few words (the OS's text where there is one).

  A TensorFlow error from a session holds 'Graph execution error:', the op's
  traceback and, on some line, 'FILE; No space left on device' (its file
  system's report): that last part is the reason.
  """
  if getattr(error, 'strerror', None):
    return error.strerror
  text = str(getattr(error, 'message', None) or error)
  lines = [line.strip() for line in text.splitlines() if line.strip()]
  for line in lines:
    if '; ' in line and not line.startswith('['):
      return line.rsplit('; ', 1)[1]
  return lines[0] if lines else type(error).__name__


def _nearest_existing(path: str) -> str:
  """`path` or the nearest ancestor of it that exists."""
  path = os.path.abspath(path)
  while not os.path.lexists(path):
    parent = os.path.dirname(path)
    if parent == path:
      break
    path = parent
  return path


def _check_creatable(flag: str, path: str, what: str) -> None:
  """The missing `path` can be created (its directories included)."""
  base = _nearest_existing(os.path.dirname(os.path.abspath(path)))
  if not os.path.isdir(base):
    raise OutputError(
      '--%s=%s: %s is not a directory; cannot create the %s under it'
      % (flag, path, base, what)
    )
  if not can_create_files_in(base):
    raise OutputError(
      '--%s=%s: cannot create files in %s (no write permission)'
      % (flag, path, base)
    )


def can_create_files_in(directory: str) -> bool:
  """Whether a file can be created in `directory`: tried, not asked.

  os.access answers yes to root for directories no one can create files
  in (/proc, /proc/self/task, ...): a probe file is created and removed.
  """
  try:
    fd, probe = tempfile.mkstemp(prefix='.tf_cnn_probe-', dir=directory)
  except OSError:
    return False
  os.close(fd)
  os.remove(probe)
  return True


def check_file(flag: str, path: str | None, creates_dirs: bool = True) -> None:
  """An output file (results, trace, graph) can be written at `path`.

  creates_dirs: the writer makes the missing directories above the file;
  False: they must exist. Raises OutputError, one line naming --`flag`.
  """
  if path is None:
    return
  if path.endswith(os.sep) or os.path.isdir(path):
    raise OutputError('--%s=%s: a directory; give a file path' % (flag, path))
  if not os.path.lexists(path):
    parent = os.path.dirname(os.path.abspath(path))
    if not creates_dirs and not os.path.lexists(parent):
      raise OutputError('--%s=%s: no such directory %s' % (flag, path, parent))
    _check_creatable(flag, path, 'file')
    return
  mode = os.stat(path).st_mode
  if not stat.S_ISREG(mode) and os.path.realpath(path) not in map(
    os.path.realpath, _STREAMS
  ):
    raise OutputError(
      '--%s=%s: not a regular file (a device or socket cannot hold '
      'the output)' % (flag, path)
    )
  if not os.access(path, os.W_OK):
    raise OutputError('--%s=%s: not writable' % (flag, path))


def check_dir(flag: str, path: str | None, writes: bool) -> None:
  """A directory of outputs (checkpoints, summaries) at `path`."""
  if path is None:
    return
  if os.path.exists(path):
    if not os.path.isdir(path):
      raise OutputError('--%s=%s: exists and is not a directory' % (flag, path))
    if writes and not can_create_files_in(path):
      raise OutputError('--%s=%s: not writable' % (flag, path))
  elif writes:
    _check_creatable(flag, path, 'directory')


def check(p) -> None:
  """Every output path of Params `p`; raises OutputError for a bad one."""
  check_file('result_file', p.result_file)
  check_file('trace_file', p.trace_file)
  check_file('graph_file', p.graph_file)
  check_file('placement_file', p.placement_file)
  check_dir('train_dir', p.train_dir, writes=not p.eval)
  check_file('tfprof_file', p.tfprof_file)
  if p.partitioned_graph_file_prefix:  # files PREFIX<device>[.ext]
    check_dir(
      'partitioned_graph_file_prefix',
      os.path.dirname(p.partitioned_graph_file_prefix) or '.',
      writes=True,
    )
  check_dir('benchmark_log_dir', p.benchmark_log_dir, writes=True)
  check_dir('tensorboard_profile_dir', p.tensorboard_profile_dir, writes=True)
  check_file('ml_perf_log_file', p.ml_perf_log_file)


def write_results(path: str, records) -> None:
  """Appends results lines; a failed write is one OutputError line."""
  try:
    result_lines.append_json_lines(path, records)
  except OSError as e:
    raise OutputError(
      '--result_file=%s: writing the result failed (%s); lines already in '
      'the file are kept' % (path, e.strerror or e)
    ) from None


def write_benchmark_log(p, records) -> str | None:
  """Appends `records` (results lines) to --benchmark_log_dir's log file.

  Returns the file written, or None without --benchmark_log_dir.
  """
  if not p.benchmark_log_dir:
    return None
  path = os.path.join(p.benchmark_log_dir, BENCHMARK_LOG_NAME)
  try:
    result_lines.append_json_lines(path, records)
  except OSError as e:
    raise OutputError(
      '--benchmark_log_dir=%s: writing %s failed (%s)'
      % (p.benchmark_log_dir, BENCHMARK_LOG_NAME, e.strerror or e)
    ) from None
  return path
