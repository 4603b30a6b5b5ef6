"""Name -> model factory registry, one namespace per dataset.

Every model of `models.declared` is registered here when the package is
imported: its factory imports the row's family module (which defines the
class and registers nothing) when the model is first created, and calls the
class with the row's name, dataset, image size, batch size, learning rate and
options. `register` adds models that are not declared (tests' tiny ones).
"""

import functools
import importlib
from typing import Callable, Dict, List, Optional, Tuple

from models import declared

DATASETS = declared.DATASETS

# (name, dataset) -> zero-argument factory returning a fresh Model.
_REGISTRY: Dict[Tuple[str, str], Callable] = {}


class UnknownModelError(ValueError):
  """Raised by `create_model` for a name (or dataset) with no model."""


def register(name: str, dataset: str, factory: Callable) -> None:
  """Registers `factory` (no arguments -> Model) as `name` for `dataset`.

  Raises:
    ValueError: unknown dataset, or (name, dataset) already registered.
  """
  if dataset not in DATASETS:
    raise ValueError('dataset must be one of %s, got %r' % (DATASETS, dataset))
  key = (name, dataset)
  if key in _REGISTRY:
    raise ValueError('model %r is already registered for %r' % (name, dataset))
  _REGISTRY[key] = factory


def create_model(name: str, dataset: str):
  """Returns a new Model instance for (name, dataset).

  Raises:
    UnknownModelError: with the names available for that dataset.
  """
  factory = _REGISTRY.get((name, dataset))
  if factory is None:
    if dataset not in DATASETS:
      raise UnknownModelError(
        'unknown dataset %r; datasets: %s' % (dataset, ', '.join(DATASETS))
      )
    raise UnknownModelError(
      'unknown model %r for dataset %r; available: %s'
      % (name, dataset, ', '.join(names(dataset)))
    )
  return factory()


def names(dataset: Optional[str] = None) -> List[str]:
  """Sorted model names, for one dataset or (None) across all of them."""
  return sorted({n for n, d in _REGISTRY if dataset is None or d == dataset})


def list_models() -> List[Tuple[str, str]]:
  """Sorted (name, dataset) pairs of every registered model."""
  return sorted(_REGISTRY)


def _create_declared(declaration: declared.Declaration):
  """A new instance of `declaration`'s class, its family module imported."""
  module = importlib.import_module('models.%s' % declaration.family)
  constructor = getattr(module, declaration.constructor)
  return constructor(
    declaration.name,
    declaration.dataset,
    declaration.image_size,
    declaration.default_batch_size,
    declaration.default_learning_rate,
    **dict(declaration.options),
  )


def _register_declared():
  """A factory for every row of models/declared.py."""
  for declaration in declared.DECLARATIONS:
    register(
      declaration.name,
      declaration.dataset,
      functools.partial(_create_declared, declaration),
    )


_register_declared()
