"""Variable managers: where variables live and how gradients become updates.

The driver talks to every manager through `VariableMgr` (base.py) and never asks
which one it has. Importing this package registers the built-in managers.

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
  collective_keys: keys for collective ops; registry (one map of entries:
    manager, cluster variant, setting variants), traits.
"""

# Importing the manager modules registers them.
from variable_mgr import distributed  # noqa: F401
from variable_mgr import hybrid  # noqa: F401
from variable_mgr import local  # noqa: F401
from variable_mgr import staged  # noqa: F401
from variable_mgr.base import StepUpdate
from variable_mgr.base import VariableMgr
from variable_mgr.registry import all_reduce_names
from variable_mgr.registry import cluster_names
from variable_mgr.registry import create
from variable_mgr.registry import get
from variable_mgr.registry import local_names
from variable_mgr.registry import names
from variable_mgr.registry import register
from variable_mgr.registry import select
from variable_mgr.registry import setting_variants
from variable_mgr.settings import ManagerSettings
from variable_mgr.settings import SettingsError

__all__ = [
  'all_reduce_names',
  'cluster_names',
  'create',
  'get',
  'local_names',
  'ManagerSettings',
  'names',
  'register',
  'select',
  'setting_variants',
  'SettingsError',
  'StepUpdate',
  'VariableMgr',
]
