"""Bounded, decoding-safe JSON input: the one reader of JSON handed to us.

Every JSON document a user or another process gives the project (results
lines, scaling profiles, calibrations, TF_CONFIG, the evaluator's
training_done.json, --auto_trials_measured, the peak cache, the measuring
tasks' reports) is parsed here, so that hostile or damaged input is one
error line, never a traceback or a hang:

- size: a document (or a line of a JSON-lines file) over `max_bytes` is
  refused before it is parsed (and a long line is never held whole);
- text: bytes must be UTF-8, and no string may hold an unpaired UTF-16
  surrogate (`"\\ud800"`), which Python accepts but cannot write out again;
- nesting: deeper than `max_depth` arrays and objects is refused before
  json.loads is called (it recurses: 100,000 `[` overflow its stack);
- numbers: strict JSON: `NaN`, `Infinity` and `-Infinity` (which Python's
  json accepts) are refused, and so is a number too large for a float
  (`1e999`, a 400-digit integer), which would otherwise become inf.

The problems are JsonInputError, a ValueError whose message is one line
naming the source (a file, file:line, a flag or a variable). It imports
nothing beyond the standard library.
"""

from __future__ import annotations

import json
import math
import re

# Arrays and objects inside each other: real documents nest under 10 deep.
MAX_DEPTH = 64
# A document (or one line of a JSON-lines file) larger than this is refused.
MAX_BYTES = 64 * 2**20
# Digits of the largest integer a float holds (about 1.8e308).
_MAX_INT_DIGITS = 309
_MAX_FLOAT = 1.7976931348623157e308

# A JSON string, also an unterminated one (so that no match ever fails after
# its opening quote, which keeps the scan linear).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_NOT_BRACKET = re.compile(r'[^\[\]{}]+')
# What may hold a number a float cannot: a run of 300 digits, or an exponent
# of 3 digits. Found in the text with digits, e/E and signs mapped to 0, e
# and + (a bytes.translate and a substring search: fast); the careful parse
# only runs when one is there.
_LONG_DIGITS = b'0' * 300
# A \u escape of a UTF-16 surrogate (paired ones are checked after parsing).
_SURROGATE_ESCAPE = re.compile(r'\\u[dD][89a-fA-F]')


def _number_shapes() -> bytes:
  """The bytes.translate table: digits -> 0, e and E -> e, + and - -> +,
  any other byte -> space."""
  table = bytearray(b' ' * 256)
  for digit in b'0123456789':
    table[digit] = ord('0')
  table[ord('e')] = table[ord('E')] = ord('e')
  table[ord('+')] = table[ord('-')] = ord('+')
  return bytes(table)


_NUMBER_SHAPES = _number_shapes()


class JsonInputError(ValueError):
  """JSON input that cannot be used: one line naming its source.

  Attributes:
    problem: what is wrong, without the source.
    source: the file, file:line, flag or variable it came from (or None).
  """

  def __init__(self, problem: str, source: str | None = None):
    self.problem = problem
    self.source = source
    super().__init__('%s: %s' % (source, problem) if source else problem)


class _Refused(ValueError):
  """Raised from inside json.loads by the number hooks.

  Attributes:
    constant: the refused NaN/Infinity/-Infinity, or None.
  """

  def __init__(self, problem: str, constant: str | None = None):
    super().__init__(problem)
    self.constant = constant


def _no_constant(name: str):
  raise _Refused(
    '%s is not allowed (strict JSON: numbers must be finite)' % name, name
  )


def _finite_float(text: str) -> float:
  value = float(text)
  if not math.isfinite(value):
    raise _Refused('number %s is too large for a float' % text[:40])
  return value


def _bounded_int(text: str) -> int:
  digits = len(text.lstrip('-'))
  if digits > _MAX_INT_DIGITS or abs(int(text)) > _MAX_FLOAT:
    raise _Refused('a %d-digit integer is too large for a float' % digits)
  return int(text)


def _constant_key(text: str, constant: str) -> str:
  """The key whose value (or flat array) holds the refused `constant`, as
  'key: ' (or '' when none is found)."""
  found = re.search(
    r'"((?:[^"\\]|\\.){1,80})"\s*:\s*(?:\[[^\[\]{}"]*)?%s'
    % re.escape(constant),
    text,
  )
  return '%s: ' % found.group(1) if found else ''


def too_deep(text: str, max_depth: int = MAX_DEPTH) -> bool:
  """Whether `text` nests arrays and objects deeper than `max_depth`.

  Brackets inside strings do not count. Linear in the text's length, and
  free for text with no more than `max_depth` opening brackets at all.
  """
  if text.count('[') + text.count('{') <= max_depth:
    return False
  brackets = _NOT_BRACKET.sub('', _STRING.sub('', text))
  depth = 0
  for char in brackets:
    if char in '[{':
      depth += 1
      if depth > max_depth:
        return True
    else:
      depth -= 1
  return False


def _decoded(data, max_bytes: int) -> tuple:
  """(text, its UTF-8 bytes) of `data` (bytes or str), checked;
  JsonInputError when too large or not UTF-8."""
  size = len(data)
  if size > max_bytes:
    raise JsonInputError(
      'larger than %s (%d bytes)' % (_size_text(max_bytes), size)
    )
  if isinstance(data, str):
    try:
      return data, data.encode('utf-8')
    except UnicodeEncodeError as e:
      raise JsonInputError(
        'not UTF-8 text (undecodable character at position %d)' % e.start
      ) from None
  data = bytes(data)
  try:
    return data.decode('utf-8'), data
  except UnicodeDecodeError as e:
    raise JsonInputError(
      'not UTF-8 text (byte 0x%02x at offset %d)' % (data[e.start], e.start)
    ) from None


def _size_text(size: int) -> str:
  if size % 2**20 == 0:
    return '%d MiB' % (size // 2**20)
  if size % 2**10 == 0:
    return '%d KiB' % (size // 2**10)
  return '%d bytes' % size


def _may_overflow(raw: bytes) -> bool:
  """Whether raw may hold a number too large for a float: a run of 300
  digits or a 3-digit exponent (also inside a string: then the careful
  parse finds nothing wrong)."""
  shapes = raw.translate(_NUMBER_SHAPES)
  return _LONG_DIGITS in shapes or b'e000' in shapes or b'e+000' in shapes


def _parse(text: str, raw: bytes):
  """json.loads of checked text, strict about numbers."""
  if _may_overflow(raw):
    return json.loads(
      text,
      parse_constant=_no_constant,
      parse_float=_finite_float,
      parse_int=_bounded_int,
    )
  return json.loads(text, parse_constant=_no_constant)


def loads(
  data, source: str | None = None, max_depth=MAX_DEPTH, max_bytes=MAX_BYTES
):
  """The value of the JSON document `data` (bytes: UTF-8; or str).

  Args:
    data: the document.
    source: what to name in an error: a file, file:line, a flag.
    max_depth: nesting of arrays and objects allowed.
    max_bytes: size allowed.

  Returns:
    The parsed value: dicts, lists, str, int, finite float, bool, None.

  Raises:
    JsonInputError: too large, not UTF-8, nested too deep, not JSON (the
      message says where), a non-finite or too large number, or a string
      with an unpaired surrogate.
  """
  try:
    text, raw = _decoded(data, max_bytes)
    if too_deep(text, max_depth):
      raise JsonInputError(
        'nested deeper than %d arrays and objects' % max_depth
      )
    value = _parse(text, raw)
    if _SURROGATE_ESCAPE.search(text):
      _check_surrogates(value)
  except JsonInputError as e:
    raise JsonInputError(e.problem, source) from None
  except json.JSONDecodeError as e:
    raise JsonInputError(_syntax_problem(e), source) from None
  except _Refused as e:
    where = _constant_key(text, e.constant) if e.constant else ''
    raise JsonInputError(where + str(e), source) from None
  except RecursionError:  # a max_depth beyond what the stack holds
    raise JsonInputError('nested too deep to parse', source) from None
  except ValueError as e:  # e.g. an integer over Python's digit limit
    raise JsonInputError('not valid JSON: %s' % e, source) from None
  return value


def _syntax_problem(e: json.JSONDecodeError) -> str:
  """A JSON syntax error in words: where (line and column) and what."""
  if e.lineno == 1:
    return 'not valid JSON: %s (column %d)' % (e.msg, e.colno)
  return 'not valid JSON: %s (line %d, column %d)' % (e.msg, e.lineno, e.colno)


def _check_surrogates(value) -> None:
  """JsonInputError when a string (or key) of `value` holds an unpaired
  surrogate: it cannot be written as UTF-8 (a report, a plot label)."""
  try:
    json.dumps(value, ensure_ascii=False).encode('utf-8')
  except UnicodeEncodeError:
    raise JsonInputError(
      'a string holds an unpaired UTF-16 surrogate (a \\ud800-\\udfff '
      'escape that is not half of a pair)'
    ) from None


def load_file(
  path: str, max_bytes=MAX_BYTES, max_depth=MAX_DEPTH, source: str | None = None
):
  """The value of the JSON file at `path`, read bounded.

  At most max_bytes + 1 bytes are read, so a huge file (or /dev/zero) is
  refused without being held.

  Args:
    path: the file.
    max_bytes: size allowed.
    max_depth: nesting allowed.
    source: what to name in an error (default: path).

  Raises:
    OSError: the file cannot be opened or read.
    JsonInputError: as loads(), naming the file.
  """
  with open(path, 'rb') as f:
    data = f.read(max_bytes + 1)
  return loads(data, path if source is None else source, max_depth, max_bytes)


def iter_lines(stream, max_bytes=MAX_BYTES):
  """(line number from 1, the line's bytes or None) for each line of the
  binary `stream`, newline included; None for a line over max_bytes, which
  is skipped in chunks and never held whole."""
  number = 0
  while True:
    raw = stream.readline(max_bytes + 1)
    if not raw:
      return
    number += 1
    if len(raw) <= max_bytes or raw.endswith(b'\n'):
      yield number, raw
      continue
    while raw and not raw.endswith(b'\n'):  # the rest of the long line
      raw = stream.readline(2**20)
    yield number, None
