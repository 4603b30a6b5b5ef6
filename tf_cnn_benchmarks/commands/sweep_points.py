"""Running one point of a sweep: its process, its log and its outcome.

Part of scripts/sweep.py (behaviour: its docstring).
"""

import os
import re
import shlex
import signal
import subprocess
import time

from tf_cnn_benchmarks.commands import lifetime
from tf_cnn_benchmarks.commands import results_io as rio
from tf_cnn_benchmarks.platform import checkout

InputError = rio.InputError

REPO_ROOT = checkout.ROOT
# An unindented 'pkg.module.SomeError: message' line of a traceback.
EXCEPTION_LINE_RE = re.compile(
  r'^([A-Za-z_]\w*\.)*[A-Za-z_]\w*(Error|Exception|Exit|Interrupt)\b:'
)
# Error messages in results lines are cut to this length.
MAX_ERROR_CHARS = 500
# How often a running point's progress is looked at (seconds).
TICK_SECONDS = 0.5


class Terminated(Exception):
  """Raised by the SIGTERM handler so the running point gets cleaned up."""


def on_sigterm(signum, frame):
  raise Terminated()


def _kill_group(proc):
  """Stop a point's whole process group (the launcher starts several)."""
  for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, None)):
    try:
      os.killpg(proc.pid, sig)
    except ProcessLookupError:
      pass
    try:
      proc.wait(timeout=grace)
      return
    except subprocess.TimeoutExpired:
      continue


def run_process(command, log_path, timeout, env, on_tick=None):
  """Run command with output to log_path; returns (returncode or None, secs).

  None means it ran past timeout and was killed. The child gets its own
  process group so a timeout or interrupt stops all of its descendants.
  on_tick(elapsed seconds), when given, is called about every TICK_SECONDS
  while the child runs (the live progress display).
  """
  start = time.monotonic()
  with open(log_path, 'w') as log:
    log.write('$ %s\n' % shlex.join(command))
    log.flush()
    proc = subprocess.Popen(
      command,
      stdin=subprocess.DEVNULL,
      stdout=log,
      stderr=subprocess.STDOUT,
      env=env,
      start_new_session=True,
      # Killed with the sweep (even by SIGKILL): an orphan would keep
      # running and write the point's results after the rerun did.
      preexec_fn=lifetime.die_with_parent_preexec(),
    )
    try:
      returncode = _wait(proc, start, timeout, on_tick)
    except BaseException:
      _kill_group(proc)
      raise
  return returncode, time.monotonic() - start


def _wait(proc, start, timeout, on_tick):
  """The child's exit status; None after killing it at the timeout."""
  while True:
    elapsed = time.monotonic() - start
    wait_for = TICK_SECONDS
    if timeout is not None:
      wait_for = max(0.0, min(wait_for, timeout - elapsed))
    try:
      return proc.wait(timeout=wait_for)
    except subprocess.TimeoutExpired:
      pass
    elapsed = time.monotonic() - start
    if timeout is not None and elapsed >= timeout:
      _kill_group(proc)
      return None
    if on_tick is not None:
      on_tick(elapsed)


def log_error_line(log_path):
  """The line of a failed point's log that best says why it failed.

  That is the last Python exception line ('ValueError: bad flag') whose
  message is not just a header ending in ':' (TensorFlow re-raises a specific
  error as 'InvalidArgumentError: Graph execution error:' followed by a stack
  dump, so the last line of the log is a stack frame). Without such a line,
  the last exception line, else the last non-empty line. Our '$ command'
  header is skipped. Returns None for an empty log.
  """
  try:
    with open(log_path, errors='replace') as f:
      lines = [
        line.strip() for line in f.read().splitlines()[1:] if line.strip()
      ]
  except OSError:
    return None
  exceptions = [line for line in lines if EXCEPTION_LINE_RE.match(line)]
  specific = [line for line in exceptions if not line.endswith(':')]
  for candidates in (specific, exceptions, lines):
    if candidates:
      return shorten(candidates[-1], MAX_ERROR_CHARS)
  return None


def read_point_results(path):
  """Result lines a point wrote: (records, problem or None)."""
  if not os.path.exists(path):
    return [], None
  try:
    return [record for _, record in rio.read_jsonl(path, hint=None)], None
  except InputError as e:
    return [], 'benchmark wrote a bad result line: %s' % e


def point_outcome(returncode, timeout, records, problem, log_path):
  """Decide ok/error for a finished point; returns an error message or None."""
  if returncode is None:
    return 'timeout after %gs' % timeout
  if returncode != 0:
    return log_error_line(log_path) or 'exit status %d' % returncode
  if problem:
    return problem
  if not records:
    return 'exited 0 but wrote no result line'
  for record in records:
    if record.get('status', 'ok') != 'ok':
      message = str(
        record.get('error') or 'result status %r' % record.get('status')
      )
      return (message.strip().splitlines() or [''])[0]
  return None


def error_record(point, message, returncode, tag):
  """The line recorded for a point that failed or timed out."""
  return {
    'schema_version': 2,  # results.SCHEMA_VERSION (test_results_schema checks)
    'status': 'error',
    'error': message,
    'utc_time': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
    'returncode': returncode,
    'params': dict(point.flags),
    'sweep': tag,
  }


# Points run with the package's root on PYTHONPATH: -m finds it anywhere.
child_env = checkout.child_env


def shorten(text, limit=120):
  """Cut long error messages for the one-line progress output."""
  return text if len(text) <= limit else text[: limit - 3] + '...'
