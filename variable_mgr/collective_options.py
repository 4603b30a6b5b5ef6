"""How collective reductions travel: implementation, packing, merge scope.

Three run settings shape the collective ops of collective_all_reduce,
hybrid and the `collective` all-reduce spec (variable_mgr/collectives.py,
allreduce.py):

  --collective_implementation=auto|ring|nccl: the `communication_hint` of
    every collective op. TensorFlow picks NCCL for a GPU group when the hint
    is 'nccl' or the session's `experimental.collective_nccl` is set, else
    its ring. `auto` is nccl when every device of the group is a GPU and
    ring otherwise (TensorFlow's only CPU implementation), so a GPU cluster
    no longer runs its reductions as a ring over gRPC; a CPU graph differs
    from earlier ones only in the hint attribute ('ring' for TensorFlow's
    default 'auto', which chose the ring there too).
  --collective_bytes_per_pack=N: gradients of one dtype are concatenated
    into packs of at most N bytes (a bigger gradient travels alone), one
    collective per pack, as tf.distribute's
    CommunicationOptions(bytes_per_pack); 0 = one collective per gradient.
    Packing happens after gradient compression (it packs what travels).
  --allreduce_merge_scope=K > 1 (collective_all_reduce, hybrid): K units
    (gradients or packs) per name scope, as V1 CollectiveReduce ops (keys
    as attributes), with grappler's scoped allocator turned on for them
    (`session_rewrites`): it merges the ops of a scope and device into one
    collective over one buffer, as the classic harness did. The V2 op takes
    its keys as tensors, which the scoped allocator refuses ("more than one
    input"), so K = 1 keeps V2.
    (replicated's `collective` spec keeps its name scopes and V2 ops, as
    the classic harness turned the scoped allocator on for
    collective_all_reduce only.)

The flags as data (names, checks, results keys) are in collective_catalog.py.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Sequence

import tensorflow as tf

from variable_mgr import collective_catalog
from variable_mgr import sizes

# The op type grappler's scoped allocator is enabled for (the V1 op).
MERGED_OP = 'CollectiveReduce'


@dataclasses.dataclass(frozen=True)
class ReduceOptions:
  """How a manager's gradient collectives are built (the module docstring).

  merge_scope: units per 'allreduce' name scope (> 1: V1 ops, merged by the
    scoped allocator). subdivs: ring subdivisions per device (-1: TF picks).
  bytes_per_pack: pack size in bytes (0: one collective per gradient).
  implementation: auto, ring or nccl.
  """

  merge_scope: int = 1
  subdivs: int = -1
  bytes_per_pack: int = 0
  implementation: str = 'auto'

  @property
  def op_type(self) -> str:
    """The reduce op built: V1 where the scoped allocator merges, else V2."""
    return MERGED_OP if self.merge_scope > 1 else 'CollectiveReduceV2'

  def describe(self, devices: Sequence[str]) -> str:
    """', ring', ', nccl, packs <= N bytes' ...: for the AllReduce row."""
    parts = [hint_for(self.implementation, devices)]
    if self.bytes_per_pack:
      parts.append('packs <= %d bytes' % self.bytes_per_pack)
    if self.merge_scope > 1:
      parts.append('%d per merged scope' % self.merge_scope)
    return ', ' + ', '.join(parts)


def is_gpu(device: str) -> bool:
  """Whether `device` names a GPU."""
  return (tf.DeviceSpec.from_string(device).device_type or '').upper() == 'GPU'


def hint_for(implementation: str, devices: Sequence[str]) -> str:
  """The communication_hint of a collective over `devices`.

  auto: 'nccl' when every device is a GPU, else 'ring'.
  """
  if implementation not in collective_catalog.IMPLEMENTATIONS:
    raise ValueError(
      '--collective_implementation=%r: one of %s'
      % (implementation, ', '.join(collective_catalog.IMPLEMENTATIONS))
    )
  if implementation != 'auto':
    return implementation
  gpu = bool(devices) and all(is_gpu(d) for d in devices)
  return 'nccl' if gpu else 'ring'


def pack_groups(
  nbytes: Sequence[int], dtypes: Sequence, bytes_per_pack: int
) -> List[List[int]]:
  """Indices of the tensors each pack holds, packs of one dtype.

  Tensors are taken in order within each dtype (dtypes in first-seen
  order); a pack is closed when the next tensor would take it past
  `bytes_per_pack`, so a tensor bigger than that travels alone. 0: every
  tensor alone.
  """
  if bytes_per_pack <= 0:
    return [[j] for j in range(len(nbytes))]
  by_dtype: Dict[object, List[int]] = {}
  for j, dtype in enumerate(dtypes):
    by_dtype.setdefault(dtype, []).append(j)
  packs = []
  for indices in by_dtype.values():
    pack, size = [], 0
    for j in indices:
      if pack and size + nbytes[j] > bytes_per_pack:
        packs.append(pack)
        pack, size = [], 0
      pack.append(j)
      size += nbytes[j]
    packs.append(pack)
  return packs


def tensor_packs(tensors, bytes_per_pack: int) -> List[List[int]]:
  """pack_groups over tensors of fully known shapes."""
  return pack_groups(
    [sizes.num_bytes(t.shape, t.dtype) for t in tensors],
    [t.dtype.base_dtype for t in tensors],
    bytes_per_pack,
  )


def session_rewrites(config, *, merge: bool):
  """Adds grappler's scoped allocator for CollectiveReduce to a session
  ConfigProto when `merge` (what the classic harness set for
  collective_all_reduce); returns the config."""
  if merge:
    rewrite = config.graph_options.rewrite_options
    rewrite.scoped_allocator_optimization = type(rewrite).ON
    if MERGED_OP not in rewrite.scoped_allocator_opts.enable_op:
      rewrite.scoped_allocator_opts.enable_op.append(MERGED_OP)
  return config


def flat_concat(tensors, device):
  """Flattens and concatenates `tensors` into one vector on `device`."""
  with tf.device(device):
    flats = [tf.reshape(t, [-1]) for t in tensors]
    return tf.concat(flats, 0) if len(flats) > 1 else flats[0]


def split_restore(flat, like, device):
  """Cuts `flat` back into tensors shaped like `like`, on `device`."""
  lengths = [t.shape.num_elements() for t in like]
  with tf.device(device):
    pieces = tf.split(flat, lengths) if len(lengths) > 1 else [flat]
    return [tf.reshape(p, t.shape) for p, t in zip(pieces, like)]


def reduce_packed(towers, devices, packs, reduce_unit) -> List[list]:
  """out[i][j]: tensor j of every tower reduced, on devices[i], pack-wise.

  towers[i][j] lives on devices[i]; each pack of `packs` (index lists) is
  one call of reduce_unit(unit) -> one result per tower, unit[i] on
  devices[i]. A one-tensor pack travels as it is (no reshape).
  """
  out = [[None] * len(towers[0]) for _ in towers]
  for pack in packs:
    if len(pack) == 1:
      summed = reduce_unit([tower[pack[0]] for tower in towers])
      for i, value in enumerate(summed):
        out[i][pack[0]] = value
      continue
    unit = [
      flat_concat([tower[j] for j in pack], d)
      for tower, d in zip(towers, devices)
    ]
    summed = reduce_unit(unit)
    for i, d in enumerate(devices):
      pieces = split_restore(summed[i], [towers[i][j] for j in pack], d)
      for j, piece in zip(pack, pieces):
        out[i][j] = piece
  return out
