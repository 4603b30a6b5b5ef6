"""Dataset shapes the benchmark knows: classes, channels and epoch sizes."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Dataset:
  """What the driver needs to know of a dataset to make synthetic input."""

  name: str
  num_classes: int
  depth: int
  num_train_examples: int
  num_eval_examples: int


# ImageNet has 1001 classes as in the classic harness: label 0 is the
# "background" class of the TF-slim ImageNet TFRecords.
_DATASETS = {
  'imagenet': Dataset('imagenet', 1001, 3, 1281167, 50000),
  'cifar10': Dataset('cifar10', 10, 3, 50000, 10000),
}


def names() -> tuple[str, ...]:
  """Names of the known datasets."""
  return tuple(sorted(_DATASETS))


def get(name: str) -> Dataset:
  """The dataset called `name` (KeyError if unknown)."""
  return _DATASETS[name]
