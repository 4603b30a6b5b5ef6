"""Results files: the one atomic append of JSON lines, and the strict reader.

A results file holds one JSON object per line (schema in results/README.md).
The driver and every script (sweep.py, compare.py, plot.py) write and read
such files through this module only. It imports no TensorFlow (importing the
tf_cnn_benchmarks package only sets two environment defaults), so scripts can
use it cheaply.

Lines written here are strict JSON: a number that is not finite (a diverged
loss: NaN, Infinity, -Infinity) is written as null. Lines are read strict
too (platform/json_input.py): NaN or Infinity in a line makes it malformed.
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import sys

from tf_cnn_benchmarks.platform import json_input


class ResultsFileError(ValueError):
  """A results file that cannot be read, or holds a malformed line.

  The message is one line, naming the file (and line number, if any).
  """


def finite_or_null(value):
  """`value` with every non-finite float, at any depth, replaced by None.

  Dicts, lists and tuples are copied (tuples become lists, as JSON has them);
  other values are returned as they are.

  Args:
    value: a JSON-serialisable value.

  Returns:
    The same value with NaN and +/-Infinity as None.
  """
  if isinstance(value, float):
    return value if math.isfinite(value) else None
  if isinstance(value, dict):
    return {k: finite_or_null(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [finite_or_null(v) for v in value]
  return value


def to_json_line(record: dict) -> str:
  """One results line for `record`: strict JSON, sorted keys, final newline.

  Args:
    record: the JSON object of one line.

  Returns:
    The line, non-finite numbers written as null.
  """
  return (
    json.dumps(finite_or_null(record), sort_keys=True, allow_nan=False) + '\n'
  )


def append_json_lines(path: str, records) -> None:
  """Appends `records` to `path` as JSON lines, all in one atomic write.

  The whole text goes out in a single os.write on an O_APPEND descriptor, so
  concurrent appenders and a killed writer never leave a torn line, and
  several records (one sweep point's lines) are written entirely or not at
  all. If the file does not end in a newline (someone else's torn write, a
  file edited by hand), a newline goes first so that no two records share a
  line. The newline check and the write happen under an exclusive flock of
  the file, so appenders that use this function agree on its last byte. A
  write that fails or is short (a full disk) is rolled back: the file is cut
  to its length before the write, so no torn line is left. The file and its
  directory are created when missing.

  Args:
    path: the results file.
    records: JSON objects (dicts), one line each; non-finite numbers are
      written as null.

  Raises:
    OSError: the file cannot be opened, or the write failed or was short
      (the file is left as it was).
    ValueError: a record is not JSON-serialisable (nothing is written).
  """
  text = ''.join(to_json_line(record) for record in records)
  if not text:
    return
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  # O_RDWR only so that pread can look at the last byte; writes still append.
  fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
      pass  # no locks here (some network file systems): the write is atomic
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b'\n':
      text = '\n' + text
    _write_whole_or_nothing(fd, path, text.encode('utf-8'), size)
  finally:
    os.close(fd)  # also releases the lock


def _write_whole_or_nothing(fd: int, path: str, data: bytes, size: int):
  """Writes `data` at the end of fd; on failure the file is `size` long again.

  A full disk can take part of the text (a short write) or fail the write:
  either way the partial line is cut off, so readers (compare.py, the
  sweep's resume) never meet a torn line. The caller holds the flock.
  """
  try:
    written = os.write(fd, data)
  except OSError:
    _roll_back(fd, size)
    raise
  if written != len(data):
    _roll_back(fd, size)
    raise OSError(
      errno.ENOSPC,
      'short write (%d of %d bytes; the file is left as it was)'
      % (written, len(data)),
      path,
    )


def _roll_back(fd: int, size: int) -> None:
  """Cuts fd back to `size` bytes (best effort: the disk may refuse too)."""
  try:
    os.ftruncate(fd, size)
  except OSError:
    pass


def append_json_line(path: str, record: dict) -> None:
  """Appends `record` to `path` as one JSON line (see append_json_lines)."""
  append_json_lines(path, [record])


def _warn(message: str) -> None:
  sys.stderr.write('warning: %s\n' % message)


def read_json_lines(
  path: str,
  skip_bad: bool = False,
  validate=None,
  hint: str | None = None,
  warn=None,
) -> list:
  """Reads a JSON-lines file into a list of (line_number, record) pairs.

  list(iter_json_lines(...)): see there. For large files iterate instead.

  Returns:
    [(line_number, record)] in file order, line numbers from 1.

  Raises:
    ResultsFileError: the file is missing or unreadable, or (without
      skip_bad) a line is malformed.
  """
  return list(iter_json_lines(path, skip_bad, validate, hint, warn))


def iter_json_lines(
  path: str,
  skip_bad: bool = False,
  validate=None,
  hint: str | None = None,
  warn=None,
  max_line_bytes: int = json_input.MAX_BYTES,
):
  """Yields (line_number, record) for each line of a JSON-lines file.

  The file is read a line at a time (a line over max_line_bytes is never
  held whole), so memory does not grow with the file. Blank lines are
  ignored. A line that is not a JSON object (json_input.loads: strict JSON,
  bounded nesting, UTF-8), or that validate(record) rejects by returning an
  error string, is malformed: it raises ResultsFileError naming path:line
  (followed by hint, if any), or with skip_bad it is reported through warn
  and skipped.

  Args:
    path: the results file.
    skip_bad: skip malformed lines (with a warning) instead of raising.
    validate: optional record -> error string or None.
    hint: what to do about a malformed line, added to the error in brackets.
    warn: message -> None for skipped lines; by default a 'warning:' line on
      stderr.
    max_line_bytes: longest line read.

  Raises:
    ResultsFileError: the file is missing or unreadable, or (without
      skip_bad) a line is malformed.
  """
  warn = warn or _warn
  with _open_results(path) as f:
    for number, raw in _lines(path, f, max_line_bytes):
      if raw is not None and not raw.strip():
        continue
      record, problem = _parse_line(raw, max_line_bytes)
      if problem is None and validate is not None:
        problem = validate(record)
      if problem is None:
        yield number, record
      elif skip_bad:
        warn('%s:%d: skipped: %s' % (path, number, problem))
      else:
        raise ResultsFileError(
          '%s:%d: %s%s'
          % (path, number, problem, ' (%s)' % hint if hint else '')
        )


def _open_results(path: str):
  """The results file, opened for binary reading (ResultsFileError if not)."""
  try:
    return open(path, 'rb')
  except FileNotFoundError:
    raise ResultsFileError('%s: no such results file' % path) from None
  except OSError as e:
    raise ResultsFileError(
      '%s: cannot read: %s' % (path, e.strerror or e)
    ) from None


def _lines(path: str, f, max_line_bytes: int):
  """json_input.iter_lines of f, a read error as ResultsFileError."""
  lines = json_input.iter_lines(f, max_line_bytes)
  while True:
    try:
      item = next(lines)
    except StopIteration:
      return
    except OSError as e:
      raise ResultsFileError(
        '%s: cannot read: %s' % (path, e.strerror or e)
      ) from None
    yield item


def _parse_line(raw, max_line_bytes: int):
  """(record, None) for a JSON-object line, else (None, problem)."""
  if raw is None:
    return None, 'line longer than %d bytes' % max_line_bytes
  try:
    record = json_input.loads(raw.rstrip(b'\r\n'), max_bytes=max_line_bytes)
  except json_input.JsonInputError as e:
    return None, e.problem
  if not isinstance(record, dict):
    return None, 'not a JSON object'
  return record, None
