"""Registry of variable managers: name -> VariableMgr subclass."""

from __future__ import annotations

_MANAGERS: dict = {}
# Managers used instead of the registered one when a cluster is given (e.g.
# parameter_server across workers): name -> VariableMgr subclass.
_CLUSTER_VARIANTS: dict = {}
# Managers used instead of the registered one when a boolean run setting is
# on (e.g. --staged_vars for parameter_server): setting -> subclass.
_SETTING_VARIANTS: dict = {}


def register(cls):
  """Class decorator: registers a VariableMgr subclass under `cls.name`."""
  if cls.name in _MANAGERS:
    raise ValueError('variable manager %r is already registered' % cls.name)
  _MANAGERS[cls.name] = cls
  return cls


def register_cluster_variant(cls):
  """Class decorator: `cls` serves `cls.name` when a cluster is given."""
  if cls.name in _CLUSTER_VARIANTS:
    raise ValueError('cluster variant %r is already registered' % cls.name)
  _CLUSTER_VARIANTS[cls.name] = cls
  return cls


def register_setting_variant(setting: str):
  """Class decorator: the class serves `cls.name` when `setting` is on.

  setting: a boolean Params field. The variant's traits say where it runs
  (a local-only variant is refused in a cluster by the flag checks).
  """

  def decorate(cls):
    if setting in _SETTING_VARIANTS:
      raise ValueError('setting %r already has a variant' % setting)
    _SETTING_VARIANTS[setting] = cls
    return cls

  return decorate


def setting_variants() -> dict:
  """{setting: the manager class it selects} (its .name: the base mode)."""
  return dict(_SETTING_VARIANTS)


def names() -> list[str]:
  """Names of every registered manager, sorted."""
  return sorted(_MANAGERS)


def local_names() -> list[str]:
  """Names of the managers that run in one process without a cluster."""
  return sorted(n for n in _MANAGERS if get(n).traits.runs_local)


def cluster_names() -> list[str]:
  """Names of the managers that run in a cluster."""
  return sorted(
    n for n in _MANAGERS if get(n, in_cluster=True).traits.runs_in_cluster
  )


def all_reduce_names() -> list[str]:
  """Names of the managers that reduce gradients with an all-reduce spec."""
  return sorted(n for n in _MANAGERS if get(n).traits.all_reduce)


def get(name: str, *, in_cluster: bool = False):
  """The manager class registered as `name`.

  in_cluster: the run is a cluster task; a name with a cluster variant (e.g.
    parameter_server across ps tasks) then gives that variant.
  """
  if in_cluster and name in _CLUSTER_VARIANTS:
    return _CLUSTER_VARIANTS[name]
  try:
    return _MANAGERS[name]
  except KeyError:
    raise ValueError(
      'unknown variable manager %r; one of %s' % (name, ', '.join(names()))
    ) from None


def select(name: str, params, *, in_cluster: bool = False):
  """The class that serves `name` for a run: get(), or the setting variant
  of `name` whose setting is on in params."""
  for setting, variant in _SETTING_VARIANTS.items():
    if variant.name == name and getattr(params, setting, False):
      return variant
  return get(name, in_cluster=in_cluster)


def create(name: str, params, tower_devices, cluster=None):
  """Builds the manager `name` from run Params and the tower devices.

  cluster: a base.ClusterDevices for a multi-worker run, else None.
  """
  return select(name, params, in_cluster=cluster is not None).from_params(
    params, tuple(tower_devices), cluster=cluster
  )
