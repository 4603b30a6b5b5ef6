"""The model table printed by `--list_models`: counted from built graphs."""

from __future__ import annotations

import models
from tf_cnn_benchmarks.config import datasets


def rows():
  """(name, dataset, image size, batch, parameters, fwd GFLOPs) per model."""
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


def render() -> str:
  """A markdown table of every registered model."""
  lines = [
    '| model | dataset | image size | default batch | parameters | '
    'GFLOPs/image (fwd) |',
    '|---|---|---|---|---|---|',
  ]
  for name, data_name, size, batch, count, gflops in rows():
    lines.append(
      '| %s | %s | %d | %d | %s | %.3f |'
      % (name, data_name, size, batch, '{:,}'.format(count), gflops)
    )
  return '\n'.join(lines)
