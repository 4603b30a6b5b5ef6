"""All-reduce of every tower's gradients at once, with optional packing.

The replicated managers (replicated, distributed_all_reduce) sum their
towers' gradients with one `BatchAllReduce`, built from the all-reduce flags.
From a manager to an algorithm:

  BatchAllReduce.sum        the compressor (--gradient_compression) around
    _sum_plain               the gradients, in groups under one name scope each
      _repack or _reduce_in_groups  which tensors travel together (packing)
      BatchAllReduce._sum_unit      one tensor per tower; 16 bits on the wire
        allreduce.all_reduce        the spec's algorithm for the unit's size

Packing trades a concat/split on each device for fewer, larger reductions:
many small all-reduces are dominated by per-op latency, a few big ones by
bandwidth. Whatever the options, the reduced values equal those of reducing
each tensor on its own (up to the 16-bit cast when compact_dtype is set).
"""

from __future__ import annotations

from typing import List, Sequence

import tensorflow as tf

from variable_mgr import allreduce
from variable_mgr import collective_options
from variable_mgr import grouping
from variable_mgr import sizes
from variable_mgr import topology
from variable_mgr.compression import base as compression_base
from variable_mgr.compression import registry as compression_registry

tf1 = tf.compat.v1

COMPACT_DTYPES = (tf.float16, tf.bfloat16)
# The default spec: every tensor summed on the first device (`copy`).
COPY = allreduce.AllReduceSpec(
  (allreduce.SpecRange(None, allreduce.AlgSpec('copy')),)
)


class BatchAllReduce:
  """Sums every tower's gradients with an all-reduce spec and batch options.

  Gradients are reduced in groups of `merge_scope` under one name scope each
  (--allreduce_merge_scope); packing works across gradients, so a packing
  option makes all of them one group.

  Args:
    spec: a parsed AllReduceSpec (allreduce_spec.parse_all_reduce_spec;
      None: `copy`), or a per-unit reduction of variable_mgr/topology.py
      (the classic spec-less defaults), which gets each unit's index.
    merge_scope: gradients per name scope when nothing is packed.
    num_packs: N > 0 concatenates all tensors of a dtype and reduces them as
      N nearly equal packs (--gradient_repacking).
    agg_small_grads_max_bytes: > 0 packs runs of consecutive tensors of at
      most this many bytes, up to agg_small_grads_max_group per pack.
    agg_small_grads_max_group: see agg_small_grads_max_bytes.
    compact_dtype: tf.float16 or tf.bfloat16 to send float32 values in 16
      bits (cast before the reduction, cast back after).
    ring_order: the order of the towers (of each worker) the spec's
      algorithm sees (--gpu_indices: the ring of xring); None: as given.
    compressor: a compression.base.Compressor around the reduction (None:
      none); it calls the packed, spec'd reduction once or twice.
    bytes_per_pack: > 0 packs the tensors of each dtype into packs of at
      most this many bytes (--collective_bytes_per_pack, resolution allows
      it with the `collective` spec only; collective_options.pack_groups).
    collective_implementation: auto, ring or nccl, the communication_hint
      of the `collective` algorithm's ops.
  """

  def __init__(
    self,
    spec=None,
    *,
    merge_scope: int = 1,
    num_packs: int = 0,
    agg_small_grads_max_bytes: int = 0,
    agg_small_grads_max_group: int = 10,
    compact_dtype=None,
    ring_order=None,
    compressor=None,
    bytes_per_pack: int = 0,
    collective_implementation: str = 'auto',
  ):
    if (
      sum(x > 0 for x in (num_packs, agg_small_grads_max_bytes, bytes_per_pack))
      > 1
    ):
      raise ValueError(
        'use one packing (num_packs, i.e. gradient repacking, '
        'agg_small_grads_max_bytes or bytes_per_pack), not both'
      )
    if isinstance(spec, str):
      raise TypeError(
        'BatchAllReduce takes a parsed spec '
        '(allreduce_spec.parse_all_reduce_spec), not %r' % spec
      )
    self.spec = COPY if spec is None else spec
    self.merge_scope = merge_scope
    self.num_packs = num_packs
    self.agg_small_grads_max_bytes = agg_small_grads_max_bytes
    self.agg_small_grads_max_group = agg_small_grads_max_group
    self.compact_dtype = _check_compact(compact_dtype)
    self.ring_order = tuple(ring_order) if ring_order else None
    self._unit_index = 0  # units reduced so far by the current sum()
    self.compressor = compressor or compression_registry.create('none')
    self.bytes_per_pack = bytes_per_pack
    self.collective_implementation = collective_implementation

  @classmethod
  def from_settings(cls, settings) -> 'BatchAllReduce':
    """The all-reduce a settings.ManagerSettings describes.

    Without --all_reduce_spec: the classic default (topology.py), set by
    --hierarchical_copy or --local_parameter_device. Gradients travel in 16
    bits (--compact_gradient_transfer) only when the towers compute in 16
    bits, and then in the compute dtype.
    """
    if settings.all_reduce_spec is not None:
      spec = settings.all_reduce_spec
    elif settings.hierarchical_copy:
      spec = topology.HierarchicalCopy(settings.network_topology)
    else:
      spec = topology.CopyToDevices(settings.local_parameter_device == 'gpu')
    return cls(
      spec,
      merge_scope=settings.merge_scope,
      num_packs=settings.gradient_repacking,
      agg_small_grads_max_bytes=settings.agg_small_grads_max_bytes,
      agg_small_grads_max_group=settings.agg_small_grads_max_group,
      compact_dtype=(
        tf.as_dtype(settings.compact_dtype) if settings.compact_dtype else None
      ),
      ring_order=settings.ring_order,
      compressor=compression_registry.from_settings(settings),
      bytes_per_pack=settings.collective_bytes_per_pack,
      collective_implementation=settings.collective_implementation,
    )

  def describe(self) -> str:
    """The spec and the options in use, for the console header."""
    options = []
    if self.num_packs:
      options.append('repacking %d' % self.num_packs)
    if self.agg_small_grads_max_bytes:
      options.append(
        'small-gradient packs <= %d bytes x %d'
        % (self.agg_small_grads_max_bytes, self.agg_small_grads_max_group)
      )
    if self.bytes_per_pack:
      options.append('packs <= %d bytes' % self.bytes_per_pack)
    if self.compact_dtype is not None:
      options.append('sent as %s' % self.compact_dtype.name)
    if self.ring_order and isinstance(self.spec, allreduce.AllReduceSpec):
      options.append('tower order %s' % ','.join(map(str, self.ring_order)))
    if self.compressor.name != 'none':
      options.append('compressed: %s' % self.compressor.describe())
    return str(self.spec) + (' (%s)' % ', '.join(options) if options else '')

  def sum(
    self,
    tower_tensors: Sequence[Sequence[tf.Tensor]],
    devices: Sequence[str],
    names: Sequence[str] | None = None,
  ) -> List[List[tf.Tensor]]:
    """Sums tensor j over the towers, for every j (through the compressor).

    Args:
      tower_tensors: tower_tensors[i][j] = gradient j of the tower on
        devices[i]; all towers have the same shapes and dtypes in one order.
      devices: one device per tower.
      names: per tensor, its variable's relative name (names the
        compressor's state); None: 'grad_J'.

    Returns:
      out[i][j] = the sum of gradient j, on devices[i], original shape/dtype.
    """
    devices = list(devices)
    towers = _check_towers(tower_tensors, devices)
    wire = compression_base.Wire(
      devices=tuple(devices),
      reduce=lambda sent: self._sum_plain(sent, devices),
      num_replicas=len(devices),
      names=tuple(names) if names else None,
    )
    return self.compressor.reduce(towers, wire)

  def _sum_plain(self, towers, devices) -> List[List[tf.Tensor]]:
    """sum() of tensors as they travel: packed, in merge-scope groups."""
    if len(devices) == 1:
      # One tower's sum is its own gradient, where it already is: no copy,
      # no op (each op costs start-up time, and a 1-tower run pays it).
      return [list(towers[0])]
    num = len(towers[0])
    packing = (
      self.num_packs > 0
      or self.agg_small_grads_max_bytes > 0
      or self.bytes_per_pack > 0
    )
    step = (num or 1) if packing else self.merge_scope
    sums = [[] for _ in towers]
    self._unit_index = 0
    for start in range(0, num, step):
      group = [tensors[start : start + step] for tensors in towers]
      with tf1.name_scope('allreduce_%d' % (start // step)):
        reduced = self._sum_group(group, devices)
      for i in range(len(devices)):
        sums[i].extend(reduced[j][i] for j in range(len(group[0])))
    return sums

  def _sum_group(self, towers, devices) -> dict:
    """{j: [sum of tensor j on devices[i] for each i]}, packed as configured."""

    def sum_unit(unit):
      return self._sum_unit(unit, devices)

    if self.num_packs > 0:
      return _repack(towers, devices, self.num_packs, sum_unit)
    if self.bytes_per_pack > 0:
      packs = collective_options.tensor_packs(towers[0], self.bytes_per_pack)
      out = collective_options.reduce_packed(towers, devices, packs, sum_unit)
      return {
        j: [tower_out[j] for tower_out in out] for j in range(len(towers[0]))
      }
    return _reduce_in_groups(
      towers,
      devices,
      self.agg_small_grads_max_bytes,
      self.agg_small_grads_max_group,
      sum_unit,
    )

  def _sum_unit(self, unit, devices):
    """unit[i] lives on devices[i]; returns the sums, sum i on devices[i]."""
    dtype = unit[0].dtype
    squeeze = self.compact_dtype is not None and dtype == tf.float32
    if squeeze:
      # Cast on the sending device so the 16-bit copy is what travels.
      unit = _cast_each(unit, devices, self.compact_dtype)
    if isinstance(self.spec, allreduce.AllReduceSpec):
      summed = _in_order(
        lambda ts, ds: allreduce.all_reduce(
          ts,
          ds,
          self.spec,
          collective_implementation=self.collective_implementation,
        ),
        unit,
        devices,
        self.ring_order,
      )
    else:  # a classic per-unit reduction: it places the unit by its index
      summed = self.spec.sum_unit(unit, devices, self._unit_index)
    self._unit_index += 1
    return _cast_each(summed, devices, dtype) if squeeze else summed


def _in_order(reduce_fn, tensors, devices, ring_order):
  """reduce_fn over the towers of each worker taken in `ring_order`.

  The outputs come back in the devices' own order.
  """
  if not ring_order:
    return reduce_fn(tensors, devices)
  g = len(ring_order)
  perm = [w + k for w in range(0, len(devices), g) for k in ring_order]
  summed = reduce_fn([tensors[k] for k in perm], [devices[k] for k in perm])
  out = [None] * len(devices)
  for position, k in enumerate(perm):
    out[k] = summed[position]
  return out


def _check_towers(tower_tensors, devices):
  """Validates the [tower][tensor] structure; returns it as tensors."""
  if len(tower_tensors) != len(devices) or not devices:
    raise ValueError(
      'got %d towers for %d devices (need one tower per '
      'device, at least one)' % (len(tower_tensors), len(devices))
    )
  towers = []
  for tensors, device in zip(tower_tensors, devices):
    with tf.device(device):
      towers.append([tf.convert_to_tensor(t) for t in tensors])
  first = towers[0]
  for t in first:
    if not t.shape.is_fully_defined():
      raise ValueError('batch all-reduce needs fully defined shapes: %s' % t)
  for tower in towers[1:]:
    if len(tower) != len(first) or any(
      a.dtype != b.dtype or a.shape != b.shape for a, b in zip(tower, first)
    ):
      raise ValueError(
        'all towers need the same shapes and dtypes in the same order'
      )
  return towers


def _check_compact(compact_dtype):
  if compact_dtype is None:
    return None
  compact_dtype = tf.as_dtype(compact_dtype)
  if compact_dtype not in COMPACT_DTYPES:
    raise ValueError(
      'compact_dtype must be float16 or bfloat16, got %s' % compact_dtype.name
    )
  return compact_dtype


def _cast_each(tensors, devices, dtype):
  """tensors[i] cast to `dtype` on devices[i]."""
  out = []
  for t, d in zip(tensors, devices):
    with tf.device(d):
      out.append(tf.cast(t, dtype))
  return out


# One concat/split rule for every packing (collective_options).
_flat_concat = collective_options.flat_concat
_split_restore = collective_options.split_restore


def _reduce_group(towers, indices, devices, reduce_unit):
  """Reduces tensors `indices` of every tower as ONE concatenated vector.

  Returns {index: [sum on tower i for each tower]}.
  """
  unit = [
    _flat_concat([tower[j] for j in indices], d)
    for tower, d in zip(towers, devices)
  ]
  summed = reduce_unit(unit)
  out = {j: [None] * len(devices) for j in indices}
  for i, d in enumerate(devices):
    pieces = _split_restore(summed[i], [towers[i][j] for j in indices], d)
    for j, piece in zip(indices, pieces):
      out[j][i] = piece
  return out


def _dtype_groups(tensors):
  """Indices grouped by dtype, groups in first-seen order."""
  groups = {}
  for j, t in enumerate(tensors):
    groups.setdefault(t.dtype, []).append(j)
  return list(groups.values())


def _repack(towers, devices, num_packs, reduce_unit):
  """--gradient_repacking: concat all tensors of a dtype, cut into N packs."""
  out = {}
  for indices in _dtype_groups(towers[0]):
    total = sum(towers[0][j].shape.num_elements() for j in indices)
    pack_sizes = sizes.even_sizes(total, max(1, min(num_packs, total)))
    packs = []  # packs[i] = the packs of tower i
    for tower, d in zip(towers, devices):
      flat = _flat_concat([tower[j] for j in indices], d)
      with tf.device(d):
        packs.append(
          tf.split(flat, pack_sizes) if len(pack_sizes) > 1 else [flat]
        )
    summed = [
      reduce_unit([p[k] for p in packs]) for k in range(len(pack_sizes))
    ]
    for i, d in enumerate(devices):
      with tf.device(d):
        flat = (
          tf.concat([s[i] for s in summed], 0)
          if len(summed) > 1
          else summed[0][i]
        )
      pieces = _split_restore(flat, [towers[i][j] for j in indices], d)
      for j, piece in zip(indices, pieces):
        out.setdefault(j, [None] * len(devices))[i] = piece
  return out


def small_tensor_groups(
  tensors: Sequence[tf.Tensor], max_bytes: int, max_group: int
) -> List[List[int]]:
  """Groups of tensor indices to reduce together (grouping.small_groups
  over the tensors' byte counts and dtypes)."""
  return grouping.small_groups(
    [sizes.num_bytes(t.shape, t.dtype) for t in tensors],
    [t.dtype for t in tensors],
    max_bytes,
    max_group,
  )


def _reduce_in_groups(towers, devices, max_bytes, max_group, reduce_unit):
  """Reduces single tensors as they are and small-tensor runs packed."""
  if max_bytes > 0 and max_group > 1:
    groups = small_tensor_groups(towers[0], max_bytes, max_group)
  else:
    groups = [[j] for j in range(len(towers[0]))]
  out = {}
  for indices in groups:
    if len(indices) == 1:
      j = indices[0]
      out[j] = reduce_unit([tower[j] for tower in towers])
    else:
      out.update(_reduce_group(towers, indices, devices, reduce_unit))
  return out
