"""models/declared.py: its checks, and docs/models.md's table made from it.

Fast and without TensorFlow: the declaration is read as --list_models reads
it (by path, without the `models` package) and nothing is built, except in
the slow test that counts every model again.
"""

import os

import pytest

from tf_cnn_benchmarks.commands import model_doc_table
from tf_cnn_benchmarks.reporting import model_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC_PATH = os.path.join(ROOT, 'docs', 'models.md')


declared = model_table.declared()


@pytest.fixture(name='doc')
def _doc():
  with open(DOC_PATH, encoding='utf-8') as f:
    return f.read()


def _no_build(name, data_name):
  raise AssertionError('built %s (%s)' % (name, data_name))


def _table_rows(doc):
  """{(name, dataset): cells} of the doc's marked table."""
  table = model_table.DOC_TABLE_RE.search(doc).group('table')
  return model_table.recorded_rows(table)


def _cells(line):
  return [cell.strip() for cell in line.strip()[1:-1].split('|')]


def _line(cells):
  return '| %s |' % ' | '.join(cells)


def _row_line(doc, d):
  """The doc's table line of declaration `d`."""
  start = '| %s | %s |' % (d.name, d.dataset)
  return next(line for line in doc.splitlines() if line.startswith(start))


# Two declared models whose rows the tests below spoil (any two will do).
_FIRST, _SECOND = sorted(declared.DECLARATIONS, key=lambda d: d[:2])[:2]


# --------------------------------------------------------------------------
# docs/models.md


def test_doc_table_lists_exactly_the_declared_models(doc):
  rows = _table_rows(doc)
  assert sorted(rows) == declared.declared_models()
  for d in declared.DECLARATIONS:
    size, batch = rows[d.name, d.dataset][2:4]
    assert (int(size), int(batch)) == (d.image_size, d.default_batch_size), d
  assert model_table.doc_table_problems(doc) == []
  # Laid out as the generator writes it (the order of --list_models).
  assert model_table.render_doc(doc, _no_build) == doc


def test_doc_table_problems_name_missing_undeclared_and_wrong_rows(doc):
  line = _row_line(doc, _FIRST)
  stale = doc.replace(line + '\n', '')
  assert model_table.doc_table_problems(stale) == [
    '%s (%s): declared, but no row' % _FIRST[:2]
  ]
  extra = _line(['%s_x' % _FIRST.name] + _cells(line)[1:])
  stale = doc.replace(line, line + '\n' + extra)
  assert model_table.doc_table_problems(stale) == [
    '%s_x (%s): a row, but not declared' % _FIRST[:2]
  ]
  cells = _cells(line)
  cells[3] = str(_FIRST.default_batch_size + 1)
  stale = doc.replace(line, _line(cells))
  assert model_table.doc_table_problems(stale) == [
    '%s (%s): image size, batch %d, %d; declared %d, %d'
    % (
      *_FIRST[:2],
      _FIRST.image_size,
      _FIRST.default_batch_size + 1,
      _FIRST.image_size,
      _FIRST.default_batch_size,
    )
  ]
  assert model_table.doc_table_problems('no table') == [
    'no <!-- model-table: ... --> marker'
  ]


def test_generator_measures_only_models_without_counts(doc):
  first, second = _row_line(doc, _FIRST), _row_line(doc, _SECOND)
  wrong_batch = _cells(second)
  wrong_batch[3] = '1'
  undeclared = '| gone | cifar10 | 1 | 1 | 1 | 0 |'
  stale = doc.replace(first + '\n', '')
  stale = stale.replace(second, _line(wrong_batch) + '\n' + undeclared)
  params, gflops = _cells(first)[4:6]
  built = []

  def fake_measure(name, data_name):
    built.append((name, data_name))
    return int(params.replace(',', '')), float(gflops)

  assert model_table.render_doc(stale, fake_measure) == doc
  assert built == [_FIRST[:2]]
  # --measure counts a recorded model again.
  built.clear()
  fresh = model_table.render_doc(doc, fake_measure, {_SECOND[:2]})
  assert built == [_SECOND[:2]]
  assert _line(_cells(second)[:4] + [params, gflops]) in fresh.splitlines()


def test_script_check_and_rewrite(doc, tmp_path, capsys):
  path = tmp_path / 'models.md'
  line = _row_line(doc, _FIRST)
  cells = _cells(line)
  cells[3] = '0'
  path.write_text(doc.replace(line, _line(cells)))
  assert model_doc_table.main(['--check', '--doc', str(path)]) == 1
  err = capsys.readouterr().err
  assert '%s (%s): image size, batch' % _FIRST[:2] in err
  # A wrong batch needs no build: the declared one replaces it.
  assert model_doc_table.main(['--doc', str(path)]) == 0
  assert path.read_text() == doc
  assert model_doc_table.main(['--check', '--doc', str(path)]) == 0
  assert model_doc_table.main(['--measure=nosuch', '--doc', str(path)]) == 2


@pytest.mark.slow
@pytest.mark.parametrize(
  'name,data_name', model_table.declared().declared_models()
)
def test_doc_counts_are_the_built_models(doc, name, data_name):
  params, gflops = model_table.measure(name, data_name)
  recorded = _table_rows(doc)[name, data_name][4:6]
  assert recorded == ['{:,}'.format(params), '%.3f' % gflops]


# --------------------------------------------------------------------------
# The declaration's own checks


def test_declarations_are_unique_and_sorted_for_list_models():
  keys = [(d.name, d.dataset) for d in declared.DECLARATIONS]
  assert len(set(keys)) == len(keys)
  assert declared.declared_models() == sorted(keys)
  assert set(declared.by_key()) == set(keys)


def test_traits_are_known_words():
  for d in declared.DECLARATIONS:
    assert d.traits <= set(declared.TRAITS)
    for trait in declared.TRAITS:
      assert d.has(trait) == (trait in d.traits)
  with pytest.raises(KeyError, match='unknown trait'):
    _FIRST.has('fast')


@pytest.mark.parametrize(
  'rows,message',
  [
    ([('m', 'cifar10', 32, 8, 0.1)], 'before any Family header'),
    (
      [declared.Family('f', 'C'), ('m', 'mnist', 28, 8, 0.1)],
      'dataset must be one of',
    ),
    (
      [declared.Family('f', 'C', ('depth',)), ('m', 'cifar10', 32, 8, 0.1)],
      '0 option values',
    ),
    (
      [declared.Family('f', 'C'), ('m', 'cifar10', 32, 8, 0.1, (), 'quick')],
      'unknown traits',
    ),
    (
      [declared.Family('f', 'C'), ('m', 'cifar10', 32, 8, 0.1)] * 2,
      'declared twice',
    ),
  ],
)
def test_bad_rows_are_refused(rows, message):
  with pytest.raises(ValueError, match=message):
    declared._declarations(rows)


def test_a_row_names_its_options():
  d = declared.by_key()['resnet20_v2', 'cifar10']
  assert (d.family, d.constructor) == ('resnet_cifar', 'CifarResNet')
  assert dict(d.options) == {'depth': 20, 'version': 'v2'}
