"""results/schema.json checks REAL lines of every kind; README agrees with it.

One module-scoped set of tiny runs (trivial model, 2 steps, no MFU probe)
writes a train, a forward-only and an eval line in this process, and a
sweep of the real driver writes a sweep-point line and an error line. The
cluster line is a real 2-worker run's, committed under tests/fixtures (a
fresh cluster run is the slow test at the end).
"""

import json
import os

import jsonschema
import pytest

from tests import helpers
from tf_cnn_benchmarks.commands import schema_tables  # noqa: E402
from tf_cnn_benchmarks.reporting import results

SCHEMA_PATH = os.path.join(helpers.ROOT, 'results', 'schema.json')
README_PATH = os.path.join(helpers.ROOT, 'results', 'README.md')
CLUSTER_FIXTURE = os.path.join(
  helpers.ROOT, 'tests', 'fixtures', 'cluster_line.jsonl'
)
TINY = dict(
  model='trivial',
  data_name='cifar10',
  device='cpu',
  batch_size=2,
  num_batches=2,
  num_warmup_batches=1,
  display_every=100,
  peak_tflops_per_device='none',
)


def read_lines(path):
  """The JSON lines of a results file, in order."""
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope='module')
def schema():
  with open(SCHEMA_PATH) as f:
    return json.load(f)


@pytest.fixture(scope='module')
def validator(schema):
  return jsonschema.Draft202012Validator(schema)


def _driver_lines(tmp):
  """train (replicated, xring), forward_only and eval lines of real runs."""
  path = str(tmp / 'driver.jsonl')
  train_dir = str(tmp / 'train')
  helpers.run_in_process(
    **TINY,
    variable_update='replicated',
    num_gpus=2,
    all_reduce_spec='xring',
    train_dir=train_dir,
    result_file=path,
  )
  helpers.run_in_process(
    **TINY,
    variable_update='replicated',
    num_gpus=2,
    forward_only=True,
    result_file=path,
  )
  helpers.run_in_process(
    **TINY, eval=True, train_dir=train_dir, result_file=path
  )
  train, forward_only, evaluated = read_lines(path)
  return {'train': train, 'forward_only': forward_only, 'eval': evaluated}


def _sweep_lines(tmp):
  """A real sweep of two points: one runs, one fails (an unknown model)."""
  proc = helpers.run_script(
    'sweep.py',
    '--name=s',
    '--results_dir=%s' % tmp,
    '--timeout=240',
    '--axis',
    'model=trivial,no_such_model',
    *('--fixed=%s=%s' % item for item in TINY.items() if item[0] != 'model'),
    timeout=300,
  )
  assert proc.returncode == 1, proc.stdout + proc.stderr  # a point failed
  # By status, not order: the sweep writes each point's line as it ends.
  got = {
    line.get('status', 'ok'): line for line in read_lines(str(tmp / 's.jsonl'))
  }
  return {'sweep': got['ok'], 'error': got['error']}


@pytest.fixture(scope='module')
def lines(tmp_path_factory):
  """{kind: one real results line} for every kind of line."""
  tmp = tmp_path_factory.mktemp('schema_runs')
  found = _driver_lines(tmp)
  found.update(_sweep_lines(tmp))
  found['cluster'] = read_lines(CLUSTER_FIXTURE)[0]
  return found


def test_the_schema_is_valid_draft_2020_12(schema):
  assert schema['$schema'] == 'https://json-schema.org/draft/2020-12/schema'
  jsonschema.Draft202012Validator.check_schema(schema)
  assert schema['$defs']['base']['properties']['schema_version']['const'] == (
    results.SCHEMA_VERSION
  )


@pytest.mark.parametrize(
  'kind', ['train', 'forward_only', 'eval', 'sweep', 'error', 'cluster']
)
def test_every_kind_of_real_line_validates(lines, validator, kind):
  line = lines[kind]
  errors = [
    '%s: %s' % (list(e.path), e.message) for e in validator.iter_errors(line)
  ]
  assert errors == []
  assert line['schema_version'] == results.SCHEMA_VERSION


def test_the_lines_are_the_kinds_they_claim(lines):
  assert [lines[k]['mode'] for k in ('train', 'forward_only', 'eval')] == [
    'train',
    'forward_only',
    'eval',
  ]
  assert lines['sweep']['sweep']['point'] == {'model': 'trivial'}
  error = lines['error']
  assert error['status'] == 'error' and error['returncode'] == 2
  assert 'no_such_model' in error['error']
  assert error['sweep']['point'] == {'model': 'no_such_model'}
  cluster = lines['cluster']
  assert cluster['num_workers'] == 2 and cluster['task']['task_index'] == 0
  assert len(cluster['worker_losses']) == len(cluster['losses'])


def test_all_reduce_spec_is_the_flag_and_the_prose_has_its_own_key(lines):
  train, forward_only = lines['train'], lines['forward_only']
  assert train['all_reduce_spec'] == train['params']['all_reduce_spec']
  assert train['all_reduce_spec'] == 'xring'
  assert 'xring' in train['all_reduce_spec_description']
  # Without the flag: null, and the classic default in words.
  assert forward_only['all_reduce_spec'] is None
  assert forward_only['all_reduce_spec_description'] == (
    'copy to the CPU (classic default)'
  )


def test_a_line_with_an_unknown_or_missing_key_is_refused(lines, validator):
  for kind in ('train', 'eval', 'cluster', 'error'):
    drifted = dict(lines[kind], some_new_key=1)
    assert not validator.is_valid(drifted), kind
  missing = {k: v for k, v in lines['train'].items() if k != 'loss_scale'}
  assert not validator.is_valid(missing)
  # An eval line holds no training keys, a local line no cluster keys.
  assert not validator.is_valid(dict(lines['eval'], start_step=0))
  assert not validator.is_valid(dict(lines['train'], worker_losses=[1.0]))
  # Version 1 lines (all_reduce_spec held the prose) are not version 2.
  assert not validator.is_valid(dict(lines['train'], schema_version=1))


def test_the_new_keys_of_the_contract_are_optional_and_typed(lines, validator):
  spread = dict(
    lines['sweep'],
    step_times_ms=[1.5, 2.25],
    step_time_ms=dict(
      lines['sweep']['step_time_ms'], stderr=0.1, ci95_low=1, ci95_high=3, n=2
    ),
    images_per_sec_spread=dict(stderr=1.0, ci95_low=2, ci95_high=3, jitter=0),
    sweep=dict(lines['sweep']['sweep'], repeat=0),
  )
  assert validator.is_valid(spread)
  assert not validator.is_valid(dict(spread, step_times_ms='1.5'))
  cluster = dict(
    lines['cluster'], worker_top_1_accuracies=[0.5], worker_top_5_accuracies=[1]
  )
  assert validator.is_valid(cluster)
  assert not validator.is_valid(dict(cluster, worker_top_1_accuracies=0.5))


def test_the_readme_tables_are_the_schemas(schema):
  with open(README_PATH) as f:
    readme = f.read()
  assert schema_tables.render(readme, schema) == readme
  tables = schema_tables.TABLE_RE.findall(readme)
  # Every group of keys has its table.
  shown = {name for t in tables for name in t[1].split()}
  assert shown == set(schema['$defs']) - {'result_line'}
  for key in ('sweep', 'returncode', 'loss_scale', 'skipped_steps'):
    assert '| `%s` |' % key in readme


def test_schema_tables_check_says_when_the_readme_is_stale(tmp_path, schema):
  with open(README_PATH) as f:
    readme = f.read()
  stale = readme.replace('| `loss_scale` | float or null |', '| `x` | int |')
  assert stale != readme
  assert schema_tables.render(stale, schema) == readme


@pytest.mark.slow
def test_a_fresh_cluster_line_validates(tmp_path, validator):
  """The fixture's recipe: a real 2-worker parameter_server run."""
  path = tmp_path / 'cluster.jsonl'
  flags = ['--%s=%s' % item for item in TINY.items()]
  proc = helpers.run_python(
    [
      helpers.LAUNCHER,
      '--num_workers=2',
      '--timeout=250',
      '--',
      *flags,
      '--variable_update=parameter_server',
      '--print_training_accuracy',
      '--result_file=%s' % path,
    ],
    env=helpers.task_env(),
    timeout=300,
  )
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
  (line,) = read_lines(str(path))
  assert line['task'] == {'job_name': 'worker', 'task_index': 0}
  assert list(validator.iter_errors(line)) == []
