"""ManagerSettings: every run setting a variable manager reads, parsed once.

Resolution builds one ManagerSettings from the resolved Params
(`ManagerSettings.from_params`) and puts it on the run plan; the managers are
built from it (`VariableMgr.from_settings`) and never read Params or parse a
flag string themselves. A new manager setting is a field here (and its line in
`from_params`), read where it takes effect.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from variable_mgr import allreduce_spec
from variable_mgr import collective_options
from variable_mgr import topology
from variable_mgr.compression import catalog as compression_catalog


class SettingsError(ValueError):
  """A manager flag whose value does not parse; one line naming the flag."""


@dataclasses.dataclass(frozen=True)
class ManagerSettings:
  """The manager flags of one run, as values.

  variable_update: the manager's name (--variable_update).
  use_resource_vars: create resource variables.
  local_parameter_device: 'cpu' or 'gpu', where parameter_server keeps the
    variables of a local run and where the classic default reduction sums.
  all_reduce_spec: the parsed --all_reduce_spec, or None when unset.
  hierarchical_copy, network_topology: the classic hierarchical reduction.
  relaxed: --variable_consistency=relaxed (apply a step's sums next step).
  merge_scope: --allreduce_merge_scope, gradients per name scope.
  gradient_repacking: --gradient_repacking, packs per dtype (0: off).
  agg_small_grads_max_bytes, agg_small_grads_max_group: small-gradient
    packing (0 bytes: off).
  compact_dtype: 'float16' or 'bfloat16' when gradients travel in 16 bits
    (--compact_gradient_transfer with 16-bit compute and no
    --gradient_compression), else None.
  ring_order: --gpu_indices as tower indices, or None when unset.
  ps_partition_threshold_bytes: --ps_partition_threshold_bytes.
  hybrid_threshold_bytes: --hybrid_threshold_bytes.
  staged_vars: --staged_vars (selects a setting variant; see registry.py).
  gradient_compression: --gradient_compression, a compressor's name
    (compression/catalog.py).
  powersgd_rank: --powersgd_rank, the rank of PowerSGD's approximations.
  collective_implementation: --collective_implementation (auto, ring,
    nccl): the communication_hint of every collective op.
  collective_bytes_per_pack: --collective_bytes_per_pack, the pack size of
    the collective reductions (0: one collective per gradient).
  """

  variable_update: str = 'parameter_server'
  use_resource_vars: bool = False
  local_parameter_device: Optional[str] = 'cpu'
  all_reduce_spec: Optional[allreduce_spec.AllReduceSpec] = None
  hierarchical_copy: bool = False
  network_topology: str = 'dgx1'
  relaxed: bool = False
  merge_scope: int = 1
  gradient_repacking: int = 0
  agg_small_grads_max_bytes: int = 0
  agg_small_grads_max_group: int = 10
  compact_dtype: Optional[str] = None
  ring_order: Optional[Tuple[int, ...]] = None
  ps_partition_threshold_bytes: int = 0
  hybrid_threshold_bytes: int = 1 << 20
  staged_vars: bool = False
  gradient_compression: str = 'none'
  powersgd_rank: int = compression_catalog.DEFAULT_POWERSGD_RANK
  collective_implementation: str = 'auto'
  collective_bytes_per_pack: int = 0

  @classmethod
  def from_params(cls, params) -> 'ManagerSettings':
    """The settings of resolved Params (the only place they are read).

    Raises SettingsError, its message naming the flag, when
    --all_reduce_spec or --gpu_indices does not parse.
    """
    spec = None
    if params.all_reduce_spec:
      try:
        spec = allreduce_spec.parse_all_reduce_spec(params.all_reduce_spec)
      except allreduce_spec.AllReduceSpecError as e:
        raise SettingsError(str(e)) from None
    return cls(
      variable_update=params.variable_update,
      use_resource_vars=bool(params.use_resource_vars),
      local_parameter_device=params.local_parameter_device,
      all_reduce_spec=spec,
      hierarchical_copy=params.hierarchical_copy,
      network_topology=params.network_topology,
      relaxed=params.variable_consistency == 'relaxed',
      merge_scope=params.allreduce_merge_scope,
      gradient_repacking=params.gradient_repacking,
      agg_small_grads_max_bytes=params.agg_small_grads_max_bytes,
      agg_small_grads_max_group=params.agg_small_grads_max_group,
      compact_dtype=_compact_dtype(params),
      ring_order=topology.ring_order(
        params.gpu_indices, params.num_gpus, SettingsError
      ),
      ps_partition_threshold_bytes=params.ps_partition_threshold_bytes,
      hybrid_threshold_bytes=params.hybrid_threshold_bytes,
      staged_vars=params.staged_vars,
      gradient_compression=params.gradient_compression,
      powersgd_rank=params.powersgd_rank,
      collective_implementation=params.collective_implementation,
      collective_bytes_per_pack=params.collective_bytes_per_pack,
    )

  @property
  def collective_subdivisions(self) -> int:
    """N of --all_reduce_spec=collective#N (ring subdivisions), else -1.

    -1 (a bare `collective`) lets the runtime choose, as in
    allreduce.collective_all_reduce; `collective#1` asks for one.
    """
    if self.all_reduce_spec is None:
      return -1
    alg = self.all_reduce_spec.ranges[0].alg
    return alg.shards if alg.shards_given else -1

  @property
  def collective_reduce_options(self) -> collective_options.ReduceOptions:
    """How the gradient collectives of collective_all_reduce and hybrid are
    built (merge scope, subdivisions, pack size, implementation)."""
    return collective_options.ReduceOptions(
      merge_scope=self.merge_scope,
      subdivs=self.collective_subdivisions,
      bytes_per_pack=self.collective_bytes_per_pack,
      implementation=self.collective_implementation,
    )


def _compact_dtype(params) -> Optional[str]:
  """The 16-bit wire dtype: only when the towers compute in 16 bits, and
  gradients are not compressed otherwise (--gradient_compression decides
  the wire format then: PowerSGD's factors, say, would overflow float16)."""
  if not params.compact_gradient_transfer:
    return None
  if params.gradient_compression != 'none':
    return None
  if params.use_fp16:
    return 'float16'
  if params.use_bf16:
    return 'bfloat16'
  return None


def as_settings(settings_or_params) -> ManagerSettings:
  """ManagerSettings as they are; Params (Python callers) made into them."""
  if isinstance(settings_or_params, ManagerSettings):
    return settings_or_params
  return ManagerSettings.from_params(settings_or_params)
