"""results/schema.json as the readers of results apply it, compiled once.

The schema is the writers' contract: a version-2 line has every key of its
kind and no other. Readers (compare.py, report.py, plot.py) also read older
lines (schema_version 1, lines from before a key was added), so they apply
the schema's reader view (reader_schema):

- every key a line has must be what the schema says it is (type, range,
  allowed values), at any depth;
- schema_version must be one of KNOWN_SCHEMA_VERSIONS;
- keys may be missing (`required` is dropped, except inside an `if`, where
  it chooses the kind of line) and unknown keys are ignored
  (`additionalProperties: false` and `unevaluatedProperties` are dropped).

The keys a table needs are the reader's own business (result_rows.py).

The view is compiled into plain Python checks (compile_schema) the first
time a line is checked, once per process: a line costs tens of
microseconds. The compiler knows the keywords the schema uses and refuses
any other, so a schema edit it would not apply fails loudly. jsonschema is a
test dependency only; tests/test_audit3_readers.py checks that the compiled
checks agree with it.
"""

from __future__ import annotations

import copy
import os

from tf_cnn_benchmarks.platform import json_input

# The schema versions a reader accepts: 1 (before `env` grew and
# `all_reduce_spec` became the flag) and 2 (results.SCHEMA_VERSION).
KNOWN_SCHEMA_VERSIONS = (1, 2)

# Where the schema is: in a checkout, results/schema.json beside the
# package; in an installed wheel, the tf_cnn_benchmarks_results directory
# (pyproject.toml's package data).
_ROOT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
SCHEMA_PATHS = (
  os.path.join(_ROOT, 'results', 'schema.json'),
  os.path.join(_ROOT, 'tf_cnn_benchmarks_results', 'schema.json'),
)

# Keywords that only annotate: the compiled checks ignore them.
_ANNOTATIONS = frozenset(
  ('$schema', '$id', '$defs', '$comment', 'title', 'description', 'default')
)
# Keywords the reader view drops (see the module docstring).
_DROPPED = ('required', 'unevaluatedProperties')

# JSON Schema type -> the types json.loads makes of such values (exactly
# these: a bool is no number here, as in JSON).
_PY_TYPES = {
  'object': (dict,),
  'array': (list,),
  'string': (str,),
  'boolean': (bool,),
  'null': (type(None),),
  'number': (int, float),
  'integer': (int,),
}

_cached_check = None


class SchemaError(ValueError):
  """The schema cannot be found, read or compiled (one line)."""


def _is_number(value) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def load_schema() -> dict:
  """The JSON of results/schema.json (SchemaError when it is missing)."""
  for path in SCHEMA_PATHS:
    if os.path.exists(path):
      try:
        return json_input.load_file(path)
      except (OSError, ValueError) as e:
        raise SchemaError(
          '%s: cannot read the schema: %s' % (path, e)
        ) from None
  raise SchemaError('the results schema is missing: %s' % SCHEMA_PATHS[0])


def reader_schema(schema: dict) -> dict:
  """The reader view of the results schema (see the module docstring): a
  JSON schema of its own, which jsonschema can apply too."""
  view = _lenient(copy.deepcopy(schema))
  versions = {'type': 'integer', 'enum': list(KNOWN_SCHEMA_VERSIONS)}
  for name in ('base', 'error_line'):
    view['$defs'][name]['properties']['schema_version'] = dict(versions)
  return view


def _lenient(node):
  """node with `required` (outside `if`), `unevaluatedProperties` and
  `additionalProperties: false` dropped, at every depth."""
  if isinstance(node, list):
    return [_lenient(item) for item in node]
  if not isinstance(node, dict):
    return node
  out = {}
  for key, value in node.items():
    if key in _DROPPED or (key == 'additionalProperties' and value is False):
      continue
    if key == 'if':
      out[key] = value  # `required` there picks the kind of line
    elif key in ('properties', '$defs'):
      out[key] = {name: _lenient(sub) for name, sub in value.items()}
    else:
      out[key] = _lenient(value)
  return out


def line_problem(record) -> str | None:
  """Why `record` breaks the reader view of the schema, as 'key.key[i]:
  what', or None. The view is compiled on the first call.

  Raises:
    SchemaError: the schema is missing or cannot be compiled.
  """
  found = compiled()(record)
  if found is None:
    return None
  path, message = found
  return '%s: %s' % (path_text(path), message) if path else message


def compiled():
  """The compiled reader view of results/schema.json: value -> None or
  (path, message). Compiled on the first call, then cached.

  Raises:
    SchemaError: the schema is missing or cannot be compiled.
  """
  global _cached_check
  if _cached_check is None:
    _cached_check = compile_schema(reader_schema(load_schema()))
  return _cached_check


def path_text(path) -> str:
  """('env', 'num_cores') -> 'env.num_cores'; list indexes as [i]."""
  text = ''
  for part in path:
    if isinstance(part, int):
      text += '[%d]' % part
    else:
      text += ('.' if text else '') + str(part)
  return text


def compile_schema(schema: dict):
  """A function value -> None or (path, message) applying `schema`.

  path is a tuple of the keys (and list indexes) down to the bad value.

  Raises:
    SchemaError: the schema uses a keyword the compiler does not know, or
      a $ref that is not a local JSON pointer.
  """
  root = _Compiler(schema).compile(schema)

  def check(value):
    found = root(value)
    if found is None:
      return None
    path, template, args = found
    return path, template % tuple(_shown(a) for a in args)

  return check


def _json_equal(a, b) -> bool:
  """JSON equality: true is not 1, and 1 is 1.0."""
  if isinstance(a, bool) or isinstance(b, bool):
    return type(a) is type(b) and a == b
  if isinstance(a, list) and isinstance(b, list):
    return len(a) == len(b) and all(map(_json_equal, a, b))
  if isinstance(a, dict) and isinstance(b, dict):
    return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
  if _is_number(a) and _is_number(b):
    return a == b
  return type(a) is type(b) and a == b


def _shown(value) -> str:
  """A short repr of a value for an error message."""
  text = repr(value)
  return text if len(text) <= 60 else text[:57] + '...'


class _Compiler:
  """Turns schema nodes into check functions; $refs compile once each."""

  def __init__(self, root: dict):
    self._root = root
    self._refs = {}

  def compile(self, node):
    """The check of one schema node."""
    if node is True or node == {}:
      return _always_valid
    if node is False:
      return lambda value: ((), 'no value is allowed here', ())
    unknown = set(node) - _ANNOTATIONS - set(_KEYWORDS) - {'then', 'else'}
    if unknown:
      raise SchemaError('schema keyword(s) not supported: %s' % sorted(unknown))
    checks = [
      _KEYWORDS[key](self, node[key], node)
      for key in _KEYWORDS
      if key in node and key not in ('then', 'else')
    ]
    checks = [c for c in checks if c is not None]
    if not checks:
      return _always_valid
    if len(checks) == 1:
      return checks[0]

    def check_all(value):
      for check in checks:
        found = check(value)
        if found is not None:
          return found
      return None

    return check_all

  def ref(self, pointer: str):
    """The check of a local $ref ('#/$defs/name/...'), compiled once."""
    if pointer in self._refs:
      return self._refs[pointer]
    if not pointer.startswith('#/'):
      raise SchemaError(
        'schema $ref %r: only local refs are supported' % pointer
      )
    slot = []
    self._refs[pointer] = lambda value: slot[0](value)  # for cycles
    target = self._root
    for part in pointer[2:].split('/'):
      target = target[part.replace('~1', '/').replace('~0', '~')]
    slot.append(self.compile(target))
    self._refs[pointer] = slot[0]
    return slot[0]


def _always_valid(value):
  return None


def _type_check(compiler, types, node):
  names = [types] if isinstance(types, str) else list(types)
  exact = _exact_types(names)
  integral = 'integer' in names and 'number' not in names
  template = '%%s is not of type %s' % ' or '.join(names)

  def check(value):
    if type(value) in exact:
      return None
    if integral and type(value) is float and value.is_integer():
      return None  # JSON Schema: 2.0 is an integer
    return (), template, (value,)

  return check


def _exact_types(names) -> frozenset:
  """The Python types json.loads gives for the JSON Schema type names."""
  found = set()
  for name in names:
    found.update(_PY_TYPES[name])
  return frozenset(found)


def _const_check(compiler, const, node):
  template = '%%s is not %s' % _shown(const)

  def check(value):
    if _json_equal(value, const):
      return None
    return (), template, (value,)

  return check


def _enum_check(compiler, allowed, node):
  template = '%%s is not one of %s' % _shown(allowed)
  # Text and null compare as Python does: a set lookup, the usual case.
  plain = frozenset(a for a in allowed if a is None or type(a) is str)

  def check(value):
    if (value is None or type(value) is str) and value in plain:
      return None
    if any(_json_equal(value, a) for a in allowed):
      return None
    return (), template, (value,)

  return check


def _bound_check(compare, words):
  def make(compiler, bound, node):
    template = '%%s is %s %s' % (words, _shown(bound))

    def check(value):
      if type(value) not in (int, float) or compare(value, bound):
        return None  # a bool is no number (type, not isinstance)
      return (), template, (value,)

    return check

  return make


def _items_bound_check(compare, words):
  def make(compiler, bound, node):
    template = 'has %%s items, %s %d' % (words, bound)

    def check(value):
      if not isinstance(value, list) or compare(len(value), bound):
        return None
      return (), template, (len(value),)

    return check

  return make


def _properties_check(compiler, properties, node):
  checks = {name: compiler.compile(sub) for name, sub in properties.items()}

  def check(value):
    if not isinstance(value, dict):
      return None
    for name, sub in checks.items():
      if name in value:
        found = sub(value[name])
        if found is not None:
          return ((name,) + found[0],) + found[1:]
    return None

  return check


def _additional_check(compiler, additional, node):
  if additional is True:
    return None
  sub = compiler.compile(additional)
  named = set(node.get('properties', ()))

  def check(value):
    if not isinstance(value, dict):
      return None
    for name, item in value.items():
      if name not in named:
        found = sub(item)
        if found is not None:
          return ((name,) + found[0],) + found[1:]
    return None

  return check


def _items_check(compiler, items, node):
  sub = compiler.compile(items)
  fast = _fast_items(items)

  def check(value):
    if not isinstance(value, list) or (fast is not None and fast(value)):
      return None  # the usual case, a list of numbers: no call per item
    for index, item in enumerate(value):
      found = sub(item)
      if found is not None:
        return ((index,) + found[0],) + found[1:]
    return None

  return check


def _fast_items(items):
  """values -> whether all are valid, for an items schema of a type (not
  integer alone) and numeric bounds; else None. A False sends the caller
  to the item-by-item checks, which say what is wrong."""
  if not isinstance(items, dict) or 'type' not in items:
    return None
  if set(items) - _ANNOTATIONS - set(_BOUNDS) - {'type'}:
    return None
  names = [items['type']] if isinstance(items['type'], str) else items['type']
  if 'integer' in names and 'number' not in names:
    return None
  exact = _exact_types(names)
  bounds = [(_BOUNDS[k], items[k]) for k in _BOUNDS if k in items]
  if bounds and exact - {int, float, type(None)}:
    return None  # min() of mixed kinds: leave it to the item checks

  nullable = type(None) in exact

  def valid(values):
    if not set(map(type, values)) <= exact:
      return False
    if not bounds:
      return True
    numbers = [v for v in values if v is not None] if nullable else values
    if not numbers:
      return True
    low, high = min(numbers), max(numbers)
    return all(test(low, high, bound) for test, bound in bounds)

  return valid


# Numeric bounds: keyword -> (smallest, largest, bound) -> all within.
_BOUNDS = {
  'minimum': lambda low, high, b: low >= b,
  'exclusiveMinimum': lambda low, high, b: low > b,
  'maximum': lambda low, high, b: high <= b,
}


def _required_check(compiler, names, node):
  def check(value):
    if not isinstance(value, dict):
      return None
    for name in names:
      if name not in value:
        return (), 'the key %s is missing', (name,)
    return None

  return check


def _all_of_check(compiler, subs, node):
  checks = [compiler.compile(sub) for sub in subs]

  def check(value):
    for sub in checks:
      found = sub(value)
      if found is not None:
        return found
    return None

  return check


def _any_of_check(compiler, subs, node):
  checks = [compiler.compile(sub) for sub in subs]

  def check(value):
    if any(sub(value) is None for sub in checks):
      return None
    return (), '%s matches none of the allowed forms', (value,)

  return check


def _if_check(compiler, condition, node):
  test = compiler.compile(condition)
  then = compiler.compile(node.get('then', True))
  otherwise = compiler.compile(node.get('else', True))

  def check(value):
    return (then if test(value) is None else otherwise)(value)

  return check


def _ref_check(compiler, pointer, node):
  return compiler.ref(pointer)


# keyword -> maker(compiler, keyword value, whole node) -> check or None.
_KEYWORDS = {
  'type': _type_check,
  'const': _const_check,
  'enum': _enum_check,
  'minimum': _bound_check(lambda v, b: v >= b, 'below the minimum'),
  'exclusiveMinimum': _bound_check(lambda v, b: v > b, 'not above'),
  'maximum': _bound_check(lambda v, b: v <= b, 'above the maximum'),
  'minItems': _items_bound_check(lambda n, b: n >= b, 'under'),
  'maxItems': _items_bound_check(lambda n, b: n <= b, 'over'),
  'properties': _properties_check,
  'additionalProperties': _additional_check,
  'items': _items_check,
  'required': _required_check,
  'allOf': _all_of_check,
  'anyOf': _any_of_check,
  'if': _if_check,
  '$ref': _ref_check,
}
