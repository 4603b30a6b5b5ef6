"""The model tables: --list_models, --list_models_with_stats, docs/models.md.

--list_models prints the declared names at once: it reads
models/declared.py on its own, without importing the `models` package
(whose families import TensorFlow). --list_models_with_stats builds each
model to count its parameters and FLOPs, printing each row as soon as its
model is built. docs/models.md's table is the declared rows with the counts
recorded there (scripts/model_doc_table.py rewrites it, building only the
models it has no counts for); `doc_table_problems` says, without building
anything, where the doc and the declaration disagree.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from typing import Callable, Collection, Dict, List, Optional, Tuple

from tf_cnn_benchmarks.config import datasets

STATS_HEADER = (
  '| model | dataset | image size | default batch | parameters | '
  'GFLOPs/image (fwd) |',
  '|---|---|---|---|---|---|',
)
# docs/models.md's generated table sits between these two lines.
DOC_TABLE_RE = re.compile(
  r'(<!-- model-table:[^\n]*-->\n)(?P<table>.*?)(<!-- /model-table -->)',
  re.DOTALL,
)

Key = Tuple[str, str]  # (name, dataset)


@functools.lru_cache(maxsize=None)
def declared():
  """models/declared.py, loaded without the `models` package's imports."""
  package = importlib.util.find_spec('models')
  path = os.path.join(package.submodule_search_locations[0], 'declared.py')
  spec = importlib.util.spec_from_file_location('_models_declared', path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def name_lines():
  """'name dataset' lines of every declared model, as a markdown table."""
  yield '| model | dataset |'
  yield '|---|---|'
  for name, data_name in declared().declared_models():
    yield '| %s | %s |' % (name, data_name)


def measure(name: str, data_name: str) -> Tuple[int, float]:
  """(parameters, forward GFLOPs per image) of one model, from one build."""
  # Imported here: `models` imports TensorFlow, which --list_models and the
  # doc table's check never need.
  import models  # pylint: disable=g-import-not-at-top

  model = models.create_model(name, data_name)
  num_classes = datasets.get(data_name).num_classes
  params, flops = models.model_stats(model, num_classes)
  return params, flops / 1e9


def rows():
  """(name, dataset, image size, batch, parameters, fwd GFLOPs) per model."""
  # Imported here, as in `measure`: TensorFlow only when counting.
  import models  # pylint: disable=g-import-not-at-top

  for name, data_name in models.list_models():
    model = models.create_model(name, data_name)
    params, gflops = measure(name, data_name)
    yield (
      name,
      data_name,
      model.image_size,
      model.default_batch_size,
      params,
      gflops,
    )


def _row(name, data_name, size, batch, params_text, gflops_text) -> str:
  return '| %s | %s | %d | %d | %s | %s |' % (
    name,
    data_name,
    size,
    batch,
    params_text,
    gflops_text,
  )


def _counts_text(params: int, gflops: float) -> Tuple[str, str]:
  return '{:,}'.format(params), '%.3f' % gflops


def stats_lines():
  """A markdown table of every registered model, one row per built model."""
  yield from STATS_HEADER
  for name, data_name, size, batch, count, gflops in rows():
    yield _row(name, data_name, size, batch, *_counts_text(count, gflops))


def render() -> str:
  """The whole --list_models_with_stats table as one string."""
  return '\n'.join(stats_lines())


def recorded_rows(table: str) -> Dict[Key, List[str]]:
  """{(name, dataset): the row's cells} of a table in the stats layout."""
  cells = [
    [cell.strip() for cell in line.strip()[1:-1].split('|')]
    for line in table.splitlines()[len(STATS_HEADER) :]
    if line.strip()
  ]
  return {(row[0], row[1]): row for row in cells}


def doc_table(
  recorded: Dict[Key, List[str]],
  measure_fn: Optional[Callable[[str, str], Tuple[int, float]]] = measure,
  remeasure: Collection[Key] = (),
) -> str:
  """The docs' table: one row per declared model, in --list_models order.

  Image size and batch are the declared ones; the counts are `recorded`'s,
  or `measure_fn`'s for a model without a recorded row or in `remeasure`.

  Raises:
    KeyError: a model needs measuring and `measure_fn` is None.
  """
  lines = list(STATS_HEADER)
  for d in sorted(declared().DECLARATIONS, key=lambda d: (d.name, d.dataset)):
    key = (d.name, d.dataset)
    if key in recorded and key not in remeasure:
      counts = recorded[key][4:6]
    elif measure_fn is None:
      raise KeyError('%s (%s) has no recorded counts' % key)
    else:
      counts = _counts_text(*measure_fn(*key))
    lines.append(
      _row(d.name, d.dataset, d.image_size, d.default_batch_size, *counts)
    )
  return '\n'.join(lines) + '\n'


def render_doc(doc: str, measure_fn=measure, remeasure=()) -> str:
  """`doc` with its marked model table regenerated (see `doc_table`).

  Raises:
    ValueError: `doc` has no marked table.
  """
  match = DOC_TABLE_RE.search(doc)
  if match is None:
    raise ValueError('no <!-- model-table: ... --> marker')
  table = doc_table(recorded_rows(match.group('table')), measure_fn, remeasure)
  return doc[: match.start('table')] + table + doc[match.end('table') :]


def doc_table_problems(doc: str) -> List[str]:
  """Where `doc`'s model table and the declaration disagree, one line each.

  Builds nothing: a declared model without a row, a row of an undeclared
  model, a row whose image size or batch is not the declared one, or a table
  not laid out as `doc_table` writes it. [] when the table is the generated
  one.
  """
  match = DOC_TABLE_RE.search(doc)
  if match is None:
    return ['no <!-- model-table: ... --> marker']
  recorded = recorded_rows(match.group('table'))
  problems = []
  for d in declared().DECLARATIONS:
    row = recorded.get((d.name, d.dataset))
    wanted = [str(d.image_size), str(d.default_batch_size)]
    if row is None:
      problems.append('%s (%s): declared, but no row' % (d.name, d.dataset))
    elif row[2:4] != wanted:
      problems.append(
        '%s (%s): image size, batch %s; declared %s'
        % (d.name, d.dataset, ', '.join(row[2:4]), ', '.join(wanted))
      )
  for name, data_name in sorted(set(recorded) - set(declared().by_key())):
    problems.append('%s (%s): a row, but not declared' % (name, data_name))
  if not problems and render_doc(doc, None) != doc:
    problems.append('the table is not laid out as doc_table writes it')
  return problems
