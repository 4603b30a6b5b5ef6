"""Issue 58, audit 3: the bounded JSON reader and the compiled results schema.

platform/json_input.py is the one reader of JSON handed to the project
(nesting, size, UTF-8, strict numbers); reporting/result_schema.py applies
results/schema.json to every line compare.py, report.py and plot.py read,
compiled to plain checks that must agree with jsonschema. The behaviour of
the scripts and the other readers: tests/test_audit3_readers.py.
"""

import ast
import copy
import json
import pathlib
import random
import subprocess
import sys
import zipfile

import jsonschema
import pytest

from tests import helpers
from tests import test_install
from tf_cnn_benchmarks.platform import json_input
from tf_cnn_benchmarks.reporting import result_schema
from tf_cnn_benchmarks.reporting import results

ROOT = pathlib.Path(helpers.ROOT)
FIXTURES = ROOT / 'tests' / 'fixtures'
# The only modules that may call json.load/json.loads themselves: the
# reader, and the script that renders the project's own schema.
JSON_CALLERS_ALLOWED = {
  'tf_cnn_benchmarks/platform/json_input.py',
  'tf_cnn_benchmarks/commands/schema_tables.py',
}


def _problem(data, **kwargs) -> str:
  with pytest.raises(json_input.JsonInputError) as info:
    json_input.loads(data, 'src', **kwargs)
  assert str(info.value) == 'src: ' + info.value.problem
  return info.value.problem


# ---- nesting, size, text ---------------------------------------------------


def test_nesting_is_bounded_before_parsing():
  assert _problem('[' * 200000) == 'nested deeper than 64 arrays and objects'
  assert _problem('{"a":' * 100000).startswith('nested deeper than 64')
  assert json_input.loads('[' * 64 + ']' * 64) is not None
  assert _problem('[' * 65 + ']' * 65).startswith('nested deeper')
  assert _problem('[[[]]]', max_depth=2).startswith('nested deeper than 2')
  # Brackets inside strings do not nest.
  assert json_input.loads('["%s", "\\"[["]' % ('[' * 1000)) is not None


def test_an_unterminated_string_before_many_brackets_is_refused():
  """The bracket scan reads an unterminated string to the end at once
  (trying each escaped quote as a string's start would take hours)."""
  text = '"' + '\\"' * 200000 + '[' * 100
  assert _problem(text) == (
    'not valid JSON: Unterminated string starting at (column 1)'
  )
  assert _problem('[' * 100 + text).startswith('nested deeper than 64')


def test_bytes_must_be_utf8_and_text_encodable():
  data = bytes(random.Random(1).randrange(128, 256) for _ in range(64))
  assert _problem(data).startswith('not UTF-8 text (byte 0x')
  assert _problem(b'{"a": "\xff"}') == (
    'not UTF-8 text (byte 0xff at offset 7)'
  )
  # os.environ holds undecodable bytes as lone surrogates.
  assert _problem('{"a": "\udcff"}').startswith('not UTF-8 text')
  assert _problem(b'\xef\xbb\xbf{}').startswith('not valid JSON')


@pytest.mark.parametrize(
  'text, said',
  [
    ('{"x": NaN}', 'x: NaN is not allowed'),
    ('{"x": Infinity}', 'x: Infinity is not allowed'),
    ('{"losses": [1.0, -Infinity]}', 'losses: -Infinity is not allowed'),
    ('[1e999]', 'number 1e999 is too large for a float'),
    ('[-1E+400]', 'number -1E+400 is too large for a float'),
    ('[%s]' % ('9' * 400), 'a 400-digit integer is too large for a float'),
    ('[%s.5]' % ('9' * 400), 'is too large for a float'),
    ('[%s]' % ('9' * 5000), 'a 5000-digit integer is too large'),
  ],
  ids=[
    'nan',
    'inf',
    'neg_inf_in_list',
    'exp',
    'neg_exp',
    'int',
    'float',
    'long',
  ],
)
def test_numbers_must_be_finite_floats(text, said):
  assert said in _problem(text)


def test_numbers_a_float_holds_are_read():
  assert json_input.loads('[1.7976931348623157e308, 1e-999, -0.0]') == [
    1.7976931348623157e308,
    0.0,
    -0.0,
  ]
  # Shapes of large numbers inside strings are only text.
  assert json_input.loads('["e100 1e999", "%s"]' % ('7' * 400))[0] == (
    'e100 1e999'
  )
  assert json_input.loads('[%s]' % ('9' * 308)) == [int('9' * 308)]


def test_unpaired_surrogates_are_refused():
  said = 'a string holds an unpaired UTF-16 surrogate'
  assert _problem('["\\ud800"]').startswith(said)
  assert _problem('{"\\udc00": 1}').startswith(said)
  assert json_input.loads('["\\ud83d\\ude00"]') == ['\U0001f600']
  assert json_input.loads('["\\\\ud800"]') == ['\\ud800']


def test_size_is_bounded_and_a_file_is_read_bounded():
  assert _problem(b'[1]' * 5, max_bytes=10) == 'larger than 10 bytes (15 bytes)'
  with pytest.raises(json_input.JsonInputError) as info:
    json_input.load_file('/dev/zero', max_bytes=1024)
  assert str(info.value) == '/dev/zero: larger than 1 KiB (1025 bytes)'
  with pytest.raises(OSError):
    json_input.load_file('/nonexistent/x.json')


def test_syntax_errors_say_where():
  assert _problem('{"a": 1,}') == (
    'not valid JSON: Expecting property name enclosed in double quotes '
    '(column 9)'
  )
  assert _problem('{\n"a": 1,\n}').endswith('(line 3, column 1)')


def test_long_lines_are_skipped_without_being_held(tmp_path):
  path = tmp_path / 'r.jsonl'
  path.write_bytes(b'{"a": 1}\n' + b'x' * 100 + b'\n' + b'[2]\n' + b'y' * 20)
  with open(path, 'rb') as f:
    got = list(json_input.iter_lines(f, max_bytes=20))
  assert got == [(1, b'{"a": 1}\n'), (2, None), (3, b'[2]\n'), (4, b'y' * 20)]


def test_the_reader_imports_nothing_beyond_the_standard_library():
  program = (
    'import sys; from tf_cnn_benchmarks.platform import json_input; '
    'print(sorted(m for m in sys.modules if m.split(".")[0] in '
    '("tensorflow", "numpy", "pandas", "jsonschema")))'
  )
  out = subprocess.run(
    [sys.executable, '-c', program],
    cwd=ROOT,
    capture_output=True,
    text=True,
    check=True,
  ).stdout
  assert out.strip() == '[]'


def _json_load_calls(path: pathlib.Path) -> list:
  """Line numbers of json.load(...) / json.loads(...) calls in a file."""
  tree = ast.parse(path.read_text(), str(path))
  return [
    node.lineno
    for node in ast.walk(tree)
    if isinstance(node, ast.Call)
    and isinstance(node.func, ast.Attribute)
    and node.func.attr in ('load', 'loads')
    and isinstance(node.func.value, ast.Name)
    and node.func.value.id == 'json'
  ]


def test_every_json_reader_goes_through_json_input():
  found = {}
  for top in ('tf_cnn_benchmarks', 'variable_mgr', 'models'):
    for path in sorted((ROOT / top).rglob('*.py')):
      name = path.relative_to(ROOT).as_posix()
      lines = _json_load_calls(path)
      if lines and name not in JSON_CALLERS_ALLOWED:
        found[name] = lines
  assert found == {}


# ---- the results schema, compiled -------------------------------------------


@pytest.fixture(scope='module')
def schema():
  with open(ROOT / 'results' / 'schema.json') as f:
    return json.load(f)


def _real_lines() -> list:
  """Every results line in results/ and tests/fixtures (schema 1 and 2)."""
  found = []
  paths = sorted((ROOT / 'results').rglob('*.jsonl'))
  for path in paths + sorted(FIXTURES.glob('*.jsonl')):
    for line in path.read_text().splitlines():
      try:
        record = json.loads(line)
      except ValueError:
        continue  # malformed.jsonl's broken line
      if isinstance(record, dict) and 'schema_version' in record:
        found.append(record)
  return found


def _mutations(records, count, seed=58):
  """`count` changed copies of each record: one value somewhere (top level
  or nested) replaced by a wrong-looking one."""
  rng = random.Random(seed)
  values = [0, -3, 999, 'x', None, 1.5, True, [], {}, 2.0, -1e9, '', [1, 'a']]
  for record in records:
    yield record
    for _ in range(count):
      changed = copy.deepcopy(record)
      node = changed
      key = rng.choice(list(node))
      while isinstance(node[key], (dict, list)) and node[key]:
        if rng.random() < 0.4:
          break
        node = node[key]
        key = (
          rng.randrange(len(node))
          if isinstance(node, list)
          else (rng.choice(list(node)))
        )
      node[key] = rng.choice(values)
      yield changed


def test_the_compiled_checks_agree_with_jsonschema(schema):
  view = result_schema.reader_schema(schema)
  jsonschema.Draft202012Validator.check_schema(view)
  reference = jsonschema.Draft202012Validator(view)
  compiled = result_schema.compile_schema(view)
  records = _real_lines()
  assert len(records) >= 30
  verdicts = {'valid': 0, 'invalid': 0}
  for record in _mutations(records, 40):
    mine = compiled(record) is None
    assert mine == reference.is_valid(record), (compiled(record), record)
    verdicts['valid' if mine else 'invalid'] += 1
  assert min(verdicts.values()) > 300, verdicts


def test_every_real_line_passes_the_reader_view():
  problems = [result_schema.line_problem(r) for r in _real_lines()]
  assert set(problems) == {None}


@pytest.mark.parametrize(
  'change, said',
  [
    ({'schema_version': 999}, 'schema_version: 999 is not one of [1, 2]'),
    ({'schema_version': 'x'}, "schema_version: 'x' is not of type integer"),
    ({'num_devices': 0}, 'num_devices: 0 is below the minimum 1'),
    ({'num_devices': -3}, 'num_devices: -3 is below the minimum 1'),
    ({'images_per_sec': 0.0}, 'images_per_sec: 0.0 is not above 0'),
    ({'batch_size_per_device': 0}, 'batch_size_per_device: 0 is below'),
    ({'status': 'weird'}, "status: 'weird' is not 'ok'"),
    ({'losses': [1.0, 'x']}, "losses[1]: 'x' is not of type number or null"),
    ({'env': {'num_cores': 0}}, 'env.num_cores: 0 is below the minimum 1'),
    ({'task': {'job_name': 'chief'}}, "task.job_name: 'chief' is not one of"),
  ],
  ids=lambda v: str(v)[:40],
)
def test_the_reader_view_names_the_key(change, said):
  line = json.loads((FIXTURES / 'cluster_line.jsonl').read_text())
  line.update(change)
  assert result_schema.line_problem(line).startswith(said)


def test_the_known_versions_end_at_the_writers():
  assert result_schema.KNOWN_SCHEMA_VERSIONS[-1] == results.SCHEMA_VERSION


def test_the_compiler_refuses_what_it_cannot_apply():
  with pytest.raises(result_schema.SchemaError, match='not supported'):
    result_schema.compile_schema({'type': 'string', 'pattern': '^a'})
  with pytest.raises(result_schema.SchemaError, match='only local'):
    result_schema.compile_schema({'$ref': 'https://x/y.json'})
  # The writers' schema itself needs unevaluatedProperties: readers use
  # the reader view.
  with pytest.raises(result_schema.SchemaError, match='unevaluated'):
    result_schema.compile_schema(result_schema.load_schema())


def test_the_writers_schema_forbids_impossible_figures(schema):
  validator = jsonschema.Draft202012Validator(schema)
  line = json.loads((FIXTURES / 'cluster_line.jsonl').read_text())
  assert validator.is_valid(line)
  for change in (
    {'num_devices': 0},
    {'num_workers': -3},
    {'batch_size_per_device': 0},
    {'global_batch_size': 0},
    {'images_per_sec': 0},
    {'images_per_sec': -1.5},
    {'images_per_sec_per_device': 0.0},
    {'images_per_sec_per_worker': -2.0},
    {'num_steps': -1},
    {'mfu': -0.1},
    {'step_times_ms': [1.0, -2.0]},
    {'schema_version': 999},
  ):
    assert not validator.is_valid(dict(line, **change)), change


def test_the_benchmark_lines_are_real_schema_2_lines(schema, tmp_path):
  path = tmp_path / 'bench.jsonl'
  proc = helpers.run_script(
    'bench_readers.py', '--lines=40', '--file=%s' % path, '--scripts=compare'
  )
  assert proc.returncode == 0, proc.stderr
  validator = jsonschema.Draft202012Validator(schema)
  lines = [json.loads(ln) for ln in path.read_text().splitlines()]
  assert len(lines) == 40
  for line in lines:
    assert [e.message for e in validator.iter_errors(line)] == []


# ---- the installed wheel ---------------------------------------------------


def test_the_wheel_holds_the_schema_and_installed_readers_use_it(tmp_path):
  wheel = test_install.build_wheel(tmp_path / 'build')
  with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    z.extractall(tmp_path / 'site')
  shipped = {n for n in names if n.startswith('tf_cnn_benchmarks_results/')}
  # The schema, and the predictor's data (published tables, gradient lists).
  assert 'tf_cnn_benchmarks_results/schema.json' in shipped
  others = shipped - {'tf_cnn_benchmarks_results/schema.json'}
  assert others and all(
    n.split('/')[1] in ('published', 'gradients') for n in others
  )
  bad = tmp_path / 'bad.jsonl'
  line = json.loads((FIXTURES / 'scaling.jsonl').read_text().splitlines()[0])
  bad.write_text(
    json.dumps(line) + '\n' + json.dumps(dict(line, num_devices=0))
  )
  program = (
    'import sys; sys.argv = ["compare", %r]; '
    'from tf_cnn_benchmarks.commands import console; '
    'sys.exit(console.compare())' % str(bad)
  )
  proc = subprocess.run(
    [sys.executable, '-c', program],
    cwd=tmp_path,
    env=helpers.quiet_env(PYTHONPATH=str(tmp_path / 'site')),
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert proc.returncode == 2, proc.stderr[-600:]
  assert proc.stderr == (
    'compare.py: error: %s:2: num_devices: 0 is below the minimum 1 '
    '(use --skip_bad to skip such lines)\n' % bad
  )
