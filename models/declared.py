"""Every model of the zoo, declared once, as plain data.

A model's name is written here and nowhere else in the product: one row per
(name, dataset) gives the family module under models/ that holds the
network, the `Model` subclass in it, the classic image size, default batch
size and learning rate, the subclass's own constructor arguments, and the
traits the tests read. `models.registry` turns each row into a factory that
imports the family module when the model is first created. --list_models
and docs/models.md's table read these rows without TensorFlow: this module
imports only the standard library, and
`tf_cnn_benchmarks.reporting.model_table` loads it by path, without the
`models` package.

Adding a model: write the subclass in its family module, then add its row
(under a `Family` header naming the module and class) to `_TABLE`; then run
`python scripts/model_doc_table.py` (docs/models.md).
"""

from typing import Iterable, List, NamedTuple, Tuple

DATASETS = ('imagenet', 'cifar10')

# Traits, by the word a row's last column holds (space-separated).
TRAITS = {
  # Stepped in the slow suite only (`pytest -m slow`): ~10 s or more a
  # step on two shared cores, or a network another declared model already
  # steps (an alias, or a deeper copy of one stepped at a small depth).
  'slow': 'its one-step CPU test runs in the slow suite only',
  # One model per kind of layer (LRN, depthwise, concat, residual): NCHW
  # needs its own kernels, and stepping them all would double the run.
  'nchw': 'the default test run steps it in NCHW too',
  'aux': 'builds an auxiliary classifier head when training',
}


class Family(NamedTuple):
  """A header row of `_TABLE`: the rows below it until the next header.

  Attributes:
    module: the module under models/ that defines the class.
    constructor: the `Model` subclass; called as
      constructor(name, dataset, image_size, default_batch_size,
      default_learning_rate, **dict(zip(options, row's option values))).
    options: the names of the class's own constructor arguments.
  """

  module: str
  constructor: str
  options: Tuple[str, ...] = ()


class Declaration(NamedTuple):
  """One model: what the registry builds and --list_models / the docs show."""

  name: str
  dataset: str
  family: str
  constructor: str
  image_size: int
  default_batch_size: int
  default_learning_rate: float
  options: Tuple[Tuple[str, object], ...]
  traits: frozenset

  def has(self, trait: str) -> bool:
    """Whether the row names `trait` (one of TRAITS)."""
    if trait not in TRAITS:
      raise KeyError(
        'unknown trait %r; traits: %s' % (trait, ', '.join(TRAITS))
      )
    return trait in self.traits


_NASNET_OPTIONS = (
  'cells_per_stack',
  'filters',
  'stem_filters',
  'skip_reduction_input',
)

# Rows: (name, dataset, image size, default batch size, learning rate
# [, the values of the header's options [, traits]]).
_TABLE = (
  # Almost no compute: the harness's own overhead. ImageNet input 224 + 3.
  Family('trivial', 'Trivial'),
  ('trivial', 'imagenet', 227, 32, 0.005),
  ('trivial', 'cifar10', 32, 32, 0.005, (), 'nchw'),
  Family('lenet', 'LeNet'),
  ('lenet', 'imagenet', 28, 32, 0.005, (), 'nchw'),
  Family('alexnet', 'AlexNet'),
  ('alexnet', 'imagenet', 227, 512, 0.005),
  Family('alexnet', 'AlexNetCifar'),
  ('alexnet', 'cifar10', 32, 128, 0.1, (), 'nchw'),
  Family('overfeat', 'OverFeat'),
  ('overfeat', 'imagenet', 231, 32, 0.005, (), 'slow'),
  Family('googlenet', 'GoogLeNet'),
  ('googlenet', 'imagenet', 224, 32, 0.005, (), 'nchw'),
  Family('vgg', 'VGG', ('depth',)),
  ('vgg11', 'imagenet', 224, 64, 0.005, (11,)),
  ('vgg16', 'imagenet', 224, 64, 0.005, (16,), 'slow'),
  ('vgg19', 'imagenet', 224, 64, 0.005, (19,), 'slow'),
  Family('inception3', 'Inception3'),
  ('inception3', 'imagenet', 299, 32, 0.005, ()),
  Family('inception4', 'Inception4'),
  ('inception4', 'imagenet', 299, 32, 0.005, (), 'slow'),
  # The classic harness's mobilenet is V2 as TF-slim built it (tf_slim:
  # slim's init and logits layer under the classifier); mobilenet_v2 is the
  # paper's network, V1 has a name of its own.
  Family('mobilenet', 'MobileNet'),
  ('mobilenet_v1', 'imagenet', 224, 32, 0.005, (), 'nchw'),
  Family('mobilenet_v2', 'MobileNetV2', ('tf_slim',)),
  ('mobilenet', 'imagenet', 224, 32, 0.005, (True,), 'slow'),
  ('mobilenet_v2', 'imagenet', 224, 32, 0.005, (False,), 'nchw'),
  # No 'aux': the classic harness built its NASNets without num_classes,
  # hence without slim's auxiliary head.
  Family('nasnet', 'NASNet', _NASNET_OPTIONS),
  ('nasnet', 'imagenet', 224, 32, 0.005, (4, 44, 32, False), 'slow'),
  ('nasnetlarge', 'imagenet', 331, 16, 0.005, (6, 168, 96, True), 'slow'),
  # 0.025: NasnetCifarModel's rate (slim's cifar notes), not the 0.005 of
  # the ImageNet NASNets.
  Family('nasnet', 'NASNetCifar', _NASNET_OPTIONS),
  ('nasnet', 'cifar10', 32, 32, 0.025, (6, 32, 96, False), 'slow'),
  # The classic resnet* names: 0.128 at a global batch of 256, scaled with
  # the batch, after a 5-epoch warm-up.
  Family('resnet', 'ResNet', ('depth', 'version')),
  ('resnet50', 'imagenet', 224, 64, 0.128, (50, 'v1')),
  ('resnet50_v1.5', 'imagenet', 224, 64, 0.128, (50, 'v1.5')),
  ('resnet50_v2', 'imagenet', 224, 64, 0.128, (50, 'v2')),
  ('resnet101', 'imagenet', 224, 32, 0.128, (101, 'v1'), 'slow'),
  ('resnet101_v1.5', 'imagenet', 224, 32, 0.128, (101, 'v1.5'), 'slow'),
  ('resnet101_v2', 'imagenet', 224, 32, 0.128, (101, 'v2'), 'slow'),
  ('resnet152', 'imagenet', 224, 32, 0.128, (152, 'v1'), 'slow'),
  ('resnet152_v1.5', 'imagenet', 224, 32, 0.128, (152, 'v1.5'), 'slow'),
  ('resnet152_v2', 'imagenet', 224, 32, 0.128, (152, 'v2'), 'slow'),
  # The classic official_resnet* names, the TF official models' ResNets:
  # their v1 is v1.5 here; 0.1 at a global batch of 256, no warm-up. The
  # classic default batch: 128 for depth 50, 32 for any other.
  Family('resnet', 'OfficialResNet', ('depth', 'version')),
  ('official_resnet18', 'imagenet', 224, 32, 0.1, (18, 'v1.5')),
  ('official_resnet18_v2', 'imagenet', 224, 32, 0.1, (18, 'v2')),
  ('official_resnet34', 'imagenet', 224, 32, 0.1, (34, 'v1.5'), 'slow'),
  ('official_resnet34_v2', 'imagenet', 224, 32, 0.1, (34, 'v2'), 'slow'),
  ('official_resnet50', 'imagenet', 224, 128, 0.1, (50, 'v1.5'), 'slow'),
  ('official_resnet50_v2', 'imagenet', 224, 128, 0.1, (50, 'v2'), 'slow'),
  ('official_resnet101', 'imagenet', 224, 32, 0.1, (101, 'v1.5'), 'slow'),
  ('official_resnet101_v2', 'imagenet', 224, 32, 0.1, (101, 'v2'), 'slow'),
  ('official_resnet152', 'imagenet', 224, 32, 0.1, (152, 'v1.5'), 'slow'),
  ('official_resnet152_v2', 'imagenet', 224, 32, 0.1, (152, 'v2'), 'slow'),
  ('official_resnet200', 'imagenet', 224, 32, 0.1, (200, 'v1.5'), 'slow'),
  ('official_resnet200_v2', 'imagenet', 224, 32, 0.1, (200, 'v2'), 'slow'),
  # Depth 6n + 2.
  Family('resnet_cifar', 'CifarResNet', ('depth', 'version')),
  ('resnet20', 'cifar10', 32, 128, 0.1, (20, 'v1'), 'nchw'),
  ('resnet20_v2', 'cifar10', 32, 128, 0.1, (20, 'v2'), 'nchw'),
  ('resnet32', 'cifar10', 32, 128, 0.1, (32, 'v1')),
  ('resnet32_v2', 'cifar10', 32, 128, 0.1, (32, 'v2')),
  ('resnet44', 'cifar10', 32, 128, 0.1, (44, 'v1')),
  ('resnet44_v2', 'cifar10', 32, 128, 0.1, (44, 'v2')),
  ('resnet56', 'cifar10', 32, 128, 0.1, (56, 'v1')),
  ('resnet56_v2', 'cifar10', 32, 128, 0.1, (56, 'v2')),
  ('resnet110', 'cifar10', 32, 128, 0.1, (110, 'v1'), 'slow'),
  ('resnet110_v2', 'cifar10', 32, 128, 0.1, (110, 'v2'), 'slow'),
  # DenseNet (L, k): depth 3n + 4, growth rate k.
  Family('densenet', 'CifarDenseNet', ('depth', 'growth_rate')),
  ('densenet40_k12', 'cifar10', 32, 64, 0.1, (40, 12), 'nchw'),
  ('densenet100_k12', 'cifar10', 32, 64, 0.1, (100, 12), 'slow'),
  ('densenet100_k24', 'cifar10', 32, 64, 0.1, (100, 24), 'slow'),
)


def _declarations(table: Iterable) -> Tuple[Declaration, ...]:
  """`table`'s rows as Declarations, each with its header's module and class.

  Raises:
    ValueError: a row before any header, an unknown dataset or trait, a row
      whose option values do not match its header's names, or a (name,
      dataset) declared twice.
  """
  family = None
  out: List[Declaration] = []
  for row in table:
    if isinstance(row, Family):
      family = row
      continue
    name, dataset, size, batch, rate, *rest = row
    values, traits = rest + [(), ''][len(rest) :]  # both optional
    where = 'model %r (%s)' % (name, dataset)
    if family is None:
      raise ValueError('%s comes before any Family header' % where)
    if dataset not in DATASETS:
      raise ValueError('%s: dataset must be one of %s' % (where, DATASETS))
    if len(values) != len(family.options):
      raise ValueError(
        '%s: %d option values for %s' % (where, len(values), family.options)
      )
    unknown = set(traits.split()) - set(TRAITS)
    if unknown:
      raise ValueError('%s: unknown traits %s' % (where, sorted(unknown)))
    if any((d.name, d.dataset) == (name, dataset) for d in out):
      raise ValueError('%s is declared twice' % where)
    options = tuple(zip(family.options, values))
    out.append(
      Declaration(
        name,
        dataset,
        family.module,
        family.constructor,
        size,
        batch,
        rate,
        options,
        frozenset(traits.split()),
      )
    )
  return tuple(out)


DECLARATIONS = _declarations(_TABLE)


def declared_models() -> List[Tuple[str, str]]:
  """Sorted (name, dataset) pairs of every declared model."""
  return sorted((d.name, d.dataset) for d in DECLARATIONS)


def by_key() -> dict:
  """{(name, dataset): Declaration} of every declared model."""
  return {(d.name, d.dataset): d for d in DECLARATIONS}
