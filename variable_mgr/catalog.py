"""Every built-in manager name with its traits, as data (no TensorFlow).

The manager classes take their `traits` from here, and the cost model reads
its strategy rules here (which names run in one process or a cluster, which
need ps tasks or a controller, which take an --all_reduce_spec or pack), so
a rule is written once, beside the name. tests/test_manager_catalog.py checks
that the registered classes carry exactly these traits.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Tuple

from variable_mgr.traits import Traits

# A cluster class's common part: it runs as a task, never alone.
_TASK = dict(runs_local=False, runs_in_cluster=True)


@dataclasses.dataclass(frozen=True)
class Declared:
  """What one --variable_update name is.

  local: the traits of the class that serves it in one process (None: it
    runs only in a cluster).
  cluster: the traits of the class a cluster task uses, when that is not
    the local class (None: the local class, if it runs in a cluster).
  shares_gradients: the towers train one model from their summed gradients
    (False: independent, whose towers train separate models).
  """

  local: Optional[Traits] = None
  cluster: Optional[Traits] = None
  shares_gradients: bool = True

  def traits(self, in_cluster: bool) -> Optional[Traits]:
    """The traits of the class that serves the name here (None: none)."""
    if in_cluster:
      if self.cluster is not None:
        return self.cluster
      return self.local if self.local and self.local.runs_in_cluster else None
    return self.local if self.local and self.local.runs_local else None


MANAGERS: Dict[str, Declared] = {
  'parameter_server': Declared(
    local=Traits(), cluster=Traits(**_TASK, needs_ps=True)
  ),
  'replicated': Declared(local=Traits(all_reduce=True)),
  'independent': Declared(local=Traits(), shares_gradients=False),
  'distributed_replicated': Declared(cluster=Traits(**_TASK, needs_ps=True)),
  'distributed_all_reduce': Declared(
    cluster=Traits(**_TASK, one_graph=True, all_reduce=True)
  ),
  'collective_all_reduce': Declared(
    cluster=Traits(**_TASK, cross_worker_ops=True, collective_spec=True)
  ),
  'hybrid': Declared(
    cluster=Traits(**_TASK, needs_ps=True, cross_worker_ops=True)
  ),
}


def local_traits(name: str) -> Traits:
  """The traits of `name`'s class for one process (the class reads them)."""
  return MANAGERS[name].local


def cluster_traits(name: str) -> Traits:
  """The traits of `name`'s cluster class (the class reads them)."""
  return MANAGERS[name].cluster


def traits_of(name: str, in_cluster: bool) -> Optional[Traits]:
  """The traits of the class that serves `name` (None: unknown name, or it
  does not run there)."""
  declared = MANAGERS.get(name)
  return declared.traits(in_cluster) if declared else None


def names(in_cluster: bool, shared_only: bool = True) -> Tuple[str, ...]:
  """The names that run in one process (or in a cluster), in declaration
  order; with shared_only, those whose towers share one model (what a
  prediction is of)."""
  return tuple(
    name
    for name, d in MANAGERS.items()
    if d.traits(in_cluster) is not None
    and (d.shares_gradients or not shared_only)
  )


def any_of(name: str, rule) -> bool:
  """Whether `rule(traits)` holds of `name` in one process or a cluster."""
  return any(
    rule(t)
    for t in (traits_of(name, False), traits_of(name, True))
    if t is not None
  )


def collective_only(traits: Traits) -> bool:
  """Whether the name takes --all_reduce_spec=collective[#N] only."""
  return traits.collective_spec


def takes_spec(traits: Traits) -> bool:
  """Whether --all_reduce_spec applies (collective[#N] only, where
  collective_spec)."""
  return traits.all_reduce or traits.collective_spec


def packs(traits: Traits) -> bool:
  """Whether the batch all-reduce's packing flags apply
  (--gradient_repacking, --agg_small_grads_*)."""
  return traits.all_reduce
