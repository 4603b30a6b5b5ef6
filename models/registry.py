"""Name -> model factory registry, one namespace per dataset.

The family modules register their factories when `models` is imported
(which imports TensorFlow). `DECLARED` names the same models as plain data,
so `python -m tf_cnn_benchmarks --list_models` prints them at once: this
module imports nothing but typing, and the entry point reads it without
importing the package. A test checks that DECLARED and the registered
models are the same set: a new model is registered by its family and named
here.
"""

import functools
from typing import Callable, Dict, Iterable, List, Optional, Tuple

DATASETS = ('imagenet', 'cifar10')

# Every model the family modules register, per dataset.
DECLARED = {
  'imagenet': (
    'alexnet',
    'googlenet',
    'inception3',
    'inception4',
    'lenet',
    'mobilenet',
    'mobilenet_v1',
    'mobilenet_v2',
    'nasnet',
    'nasnetlarge',
    'official_resnet101',
    'official_resnet101_v2',
    'official_resnet152',
    'official_resnet152_v2',
    'official_resnet18',
    'official_resnet18_v2',
    'official_resnet200',
    'official_resnet200_v2',
    'official_resnet34',
    'official_resnet34_v2',
    'official_resnet50',
    'official_resnet50_v2',
    'overfeat',
    'resnet101',
    'resnet101_v1.5',
    'resnet101_v2',
    'resnet152',
    'resnet152_v1.5',
    'resnet152_v2',
    'resnet50',
    'resnet50_v1.5',
    'resnet50_v2',
    'trivial',
    'vgg11',
    'vgg16',
    'vgg19',
  ),
  'cifar10': (
    'alexnet',
    'densenet100_k12',
    'densenet100_k24',
    'densenet40_k12',
    'nasnet',
    'resnet110',
    'resnet110_v2',
    'resnet20',
    'resnet20_v2',
    'resnet32',
    'resnet32_v2',
    'resnet44',
    'resnet44_v2',
    'resnet56',
    'resnet56_v2',
    'trivial',
  ),
}

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


def register_family(
  dataset: str, model_class: Callable, variants: Iterable[Tuple[str, tuple]]
) -> None:
  """Registers `model_class(name, *args)` as `name` for each (name, args)."""
  for name, args in variants:
    register(name, dataset, functools.partial(model_class, name, *args))


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


def declared_models() -> List[Tuple[str, str]]:
  """Sorted (name, dataset) pairs of DECLARED (no model built or imported)."""
  return sorted((n, d) for d, names_ in DECLARED.items() for n in names_)
