"""Variable managers: where variables live and how gradients become updates.

The driver talks to every manager through `VariableMgr` (base.py) and never asks
which one it has. The built-in managers register on first use of the package's
API (variable_mgr.get, .names, ...).

Modules:
  base: the contract (VariableMgr), PerTowerCopies, ClusterDevices.
  naming: replica prefixes (tower i's vI/, the shared v/), checkpoint names.
  local: parameter_server, replicated, independent; the greedy placer.
  distributed: the cluster managers; hybrid: the hybrid one; ps_cluster:
    what the ps-held ones share (SyncAccumulators, PsClusterMixin).
  settings: ManagerSettings, every manager flag as a value (the parsed
    --all_reduce_spec included), built once at resolution.
  batch_allreduce: BatchAllReduce, how replicated sums its gradients
    (packing, 16-bit transfer); allreduce: the algorithms; allreduce_spec:
    the algorithm registry and the spec grammar.
  relaxed: the one-step delay of --variable_consistency=relaxed.
  staged: parameter_server with --staged_vars (a setting variant).
  loss_scale: fp16 loss scaling; sizes: byte counts and even splits;
  collective_keys: keys for collective ops; collectives: the cross-worker
  collective ops; collective_options: their implementation, packing and
  merge scope (collective_catalog: the flags as data, no TensorFlow);
  registry (one map of entries:
    manager, cluster variant, setting variants), traits.
"""

import importlib

# The package imports its managers (and so TensorFlow) on first use of its
# API, not on import: `variable_mgr.catalog` (the managers' traits as data)
# and `variable_mgr.allreduce_spec` (the spec grammar) serve the cost model,
# which imports no TensorFlow.
_MANAGER_MODULES = ('distributed', 'hybrid', 'local', 'staged')
_API = {
  'StepUpdate': 'base',
  'VariableMgr': 'base',
  'all_reduce_names': 'registry',
  'cluster_names': 'registry',
  'create': 'registry',
  'get': 'registry',
  'local_names': 'registry',
  'names': 'registry',
  'register': 'registry',
  'select': 'registry',
  'setting_variants': 'registry',
  'ManagerSettings': 'settings',
  'SettingsError': 'settings',
}

__all__ = sorted(_API)


def load_managers() -> None:
  """Imports the built-in manager modules, which registers them."""
  for module in _MANAGER_MODULES:
    importlib.import_module('variable_mgr.' + module)


def __getattr__(name: str):
  """The package's API, loaded (with every manager) on first use. Any other
  name is left to the import system: `from variable_mgr import catalog`
  asks here first, and must not load the managers."""
  if name not in _API:
    raise AttributeError('module variable_mgr has no attribute %r' % name)
  load_managers()
  value = getattr(importlib.import_module('variable_mgr.' + _API[name]), name)
  globals()[name] = value
  return value
