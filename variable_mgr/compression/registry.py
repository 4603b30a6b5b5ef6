"""The compressors by name: the one lookup the managers and tests use."""

from __future__ import annotations

from variable_mgr.compression import base
from variable_mgr.compression import casts
from variable_mgr.compression import catalog
from variable_mgr.compression import powersgd

_CLASSES = {
  cls.name: cls
  for cls in (
    casts.NoCompression,
    casts.Fp16,
    casts.Bf16,
    casts.Fp16ErrorFeedback,
    casts.Bf16ErrorFeedback,
    powersgd.PowerSGD,
  )
}


def names() -> list:
  """Every compressor's name, in the catalog's order."""
  return [n for n in catalog.NAMES if n in _CLASSES]


def get(name: str) -> type:
  """The class of compressor `name`."""
  if name not in _CLASSES:
    raise ValueError(
      'unknown gradient compression %r; one of %s' % (name, ', '.join(names()))
    )
  return _CLASSES[name]


def create(
  name: str = 'none', rank: int = catalog.DEFAULT_POWERSGD_RANK
) -> base.Compressor:
  """A new compressor `name` (each graph needs its own: it holds state)."""
  return get(name)(rank=rank)


def from_settings(settings) -> base.Compressor:
  """The compressor a settings.ManagerSettings names."""
  return create(settings.gradient_compression, settings.powersgd_rank)


def description_suffix(compressor) -> str:
  """', compressed: DESCRIPTION' for an all-reduce's description; '' for
  none."""
  if compressor.name == 'none':
    return ''
  return ', compressed: %s' % compressor.describe()
