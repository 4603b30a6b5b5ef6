"""The model lists of `--list_models` and `--list_models_with_stats`.

--list_models prints the registry's declared names at once: it reads
models/registry.py on its own, without importing the `models` package
(whose family modules import TensorFlow). --list_models_with_stats builds
each model to count its parameters and FLOPs, printing each row as soon as
its model is built.
"""

from __future__ import annotations

import importlib.util
import os

from tf_cnn_benchmarks.config import datasets


def _registry():
  """models/registry.py, loaded without the `models` package's imports."""
  package = importlib.util.find_spec('models')
  path = os.path.join(package.submodule_search_locations[0], 'registry.py')
  spec = importlib.util.spec_from_file_location('_models_registry_names', path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def name_lines():
  """'name dataset' lines of every declared model, as a markdown table."""
  yield '| model | dataset |'
  yield '|---|---|'
  for name, data_name in _registry().declared_models():
    yield '| %s | %s |' % (name, data_name)


def rows():
  """(name, dataset, image size, batch, parameters, fwd GFLOPs) per model."""
  # TensorFlow (models) only for --list_models_with_stats: --list_models
  # answers without it.
  import models  # pylint: disable=g-import-not-at-top

  for name, data_name in models.list_models():
    model = models.create_model(name, data_name)
    num_classes = datasets.get(data_name).num_classes
    params, flops = models.model_stats(model, num_classes)  # one build
    yield (
      name,
      data_name,
      model.image_size,
      model.default_batch_size,
      params,
      flops / 1e9,
    )


def stats_lines():
  """A markdown table of every registered model, one row per built model."""
  yield (
    '| model | dataset | image size | default batch | parameters | '
    'GFLOPs/image (fwd) |'
  )
  yield '|---|---|---|---|---|---|'
  for name, data_name, size, batch, count, gflops in rows():
    yield '| %s | %s | %d | %d | %s | %.3f |' % (
      name,
      data_name,
      size,
      batch,
      '{:,}'.format(count),
      gflops,
    )


def render() -> str:
  """The whole --list_models_with_stats table as one string."""
  return '\n'.join(stats_lines())
