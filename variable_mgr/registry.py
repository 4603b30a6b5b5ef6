"""Registry of variable managers: one map, name -> Entry.

An Entry holds every class that can serve a --variable_update name: the
registered class, the variant a cluster task uses instead (e.g.
parameter_server with its variables on ps tasks) and the variants a boolean
manager setting selects (e.g. --staged_vars). `select` is the one lookup;
the other functions are views over the map.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from variable_mgr import settings as settings_lib


@dataclasses.dataclass(frozen=True)
class Entry:
  """The classes that serve one manager name.

  manager: the registered class (its traits say where it runs).
  cluster: the class a cluster task uses instead, or None.
  variants: (setting, class) pairs; the class serves the name when the
    boolean ManagerSettings field `setting` is on.
  """

  manager: Optional[type] = None
  cluster: Optional[type] = None
  variants: Tuple[Tuple[str, type], ...] = ()


_ENTRIES: dict = {}  # name -> Entry


def _update(name: str, **changes) -> None:
  _ENTRIES[name] = dataclasses.replace(_ENTRIES.get(name, Entry()), **changes)


def register(cls):
  """Class decorator: registers a VariableMgr subclass under `cls.name`."""
  if _ENTRIES.get(cls.name, Entry()).manager is not None:
    raise ValueError('variable manager %r is already registered' % cls.name)
  _update(cls.name, manager=cls)
  return cls


def register_cluster_variant(cls):
  """Class decorator: `cls` serves `cls.name` when a cluster is given."""
  if _ENTRIES.get(cls.name, Entry()).cluster is not None:
    raise ValueError('cluster variant %r is already registered' % cls.name)
  _update(cls.name, cluster=cls)
  return cls


def register_setting_variant(setting: str):
  """Class decorator: the class serves `cls.name` when `setting` is on.

  setting: a boolean ManagerSettings (and Params) field. The variant's
  traits say where it runs (a local-only variant is refused in a cluster by
  the flag checks).
  """

  def decorate(cls):
    if setting in setting_variants():
      raise ValueError('setting %r already has a variant' % setting)
    variants = _ENTRIES.get(cls.name, Entry()).variants
    _update(cls.name, variants=variants + ((setting, cls),))
    return cls

  return decorate


def names() -> list[str]:
  """Names of every registered manager, sorted."""
  return sorted(n for n, e in _ENTRIES.items() if e.manager is not None)


def select(name: str, settings=None, *, in_cluster: bool = False):
  """The class that serves `name` for a run.

  settings: ManagerSettings or Params; a setting variant of `name` whose
    setting is on there wins. None: no variant.
  in_cluster: the run is a cluster task; the entry's cluster class (if any)
    then serves it.
  """
  entry = _ENTRIES.get(name, Entry())
  if entry.manager is None:
    raise ValueError(
      'unknown variable manager %r; one of %s' % (name, ', '.join(names()))
    )
  for setting, variant in entry.variants:
    if getattr(settings, setting, False):
      return variant
  if in_cluster and entry.cluster is not None:
    return entry.cluster
  return entry.manager


def get(name: str, *, in_cluster: bool = False):
  """select() without setting variants: the class serving `name`."""
  return select(name, in_cluster=in_cluster)


def setting_variants() -> dict:
  """{setting: the manager class it selects} (its .name: the base mode)."""
  return {s: cls for e in _ENTRIES.values() for s, cls in e.variants}


def local_names() -> list[str]:
  """Names of the managers that run in one process without a cluster."""
  return [n for n in names() if get(n).traits.runs_local]


def cluster_names() -> list[str]:
  """Names of the managers that run in a cluster."""
  return [n for n in names() if get(n, in_cluster=True).traits.runs_in_cluster]


def all_reduce_names() -> list[str]:
  """Names of the managers that reduce gradients with an all-reduce spec."""
  return [n for n in names() if get(n).traits.all_reduce]


def create(name: str, settings, tower_devices, cluster=None):
  """Builds the manager `name` for the tower devices.

  settings: the run's ManagerSettings (Params are made into them).
  cluster: a base.ClusterDevices for a multi-worker run, else None.
  """
  settings = settings_lib.as_settings(settings)
  cls = select(name, settings, in_cluster=cluster is not None)
  return cls.from_settings(settings, tuple(tower_devices), cluster=cluster)
