"""Registry of variable managers: name -> VariableMgr subclass."""

from __future__ import annotations

_MANAGERS: dict = {}


def register(cls):
  """Class decorator: registers a VariableMgr subclass under `cls.name`."""
  if cls.name in _MANAGERS:
    raise ValueError('variable manager %r is already registered' % cls.name)
  _MANAGERS[cls.name] = cls
  return cls


def names() -> list[str]:
  """Names of every registered manager, sorted."""
  return sorted(_MANAGERS)


def local_names() -> list[str]:
  """Names of the managers that run in one process without a cluster."""
  return sorted(n for n, c in _MANAGERS.items() if not c.requires_cluster)


def all_reduce_names() -> list[str]:
  """Names of the managers that reduce gradients with an all-reduce spec."""
  return sorted(n for n, c in _MANAGERS.items() if c.uses_all_reduce)


def get(name: str):
  """The manager class registered as `name`."""
  try:
    return _MANAGERS[name]
  except KeyError:
    raise ValueError('unknown variable manager %r; one of %s' %
                     (name, ', '.join(names()))) from None


def create(name: str, params, tower_devices):
  """Builds the manager `name` from run Params and the tower devices."""
  return get(name).from_params(params, tuple(tower_devices))
