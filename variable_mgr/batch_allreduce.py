"""All-reduce of every tower's gradients at once, with optional packing.

Packing trades a concat/split on each device for fewer, larger reductions:
many small all-reduces are dominated by per-op latency, a few big ones by
bandwidth. Whatever the options, the reduced values equal those of reducing
each tensor on its own (up to the 16-bit cast when compact_dtype is set).

Also holds the one-step-delay helper for --variable_consistency=relaxed.
"""

import itertools
from typing import List, Sequence, Tuple

import tensorflow as tf

from variable_mgr import allreduce

tf1 = tf.compat.v1

_COMPACT_DTYPES = (tf.float16, tf.bfloat16)


def _check_towers(tower_tensors, devices):
  """Validates the [tower][tensor] structure; returns it as tensors."""
  if len(tower_tensors) != len(devices) or not devices:
    raise ValueError(f'got {len(tower_tensors)} towers for {len(devices)} '
                     'devices (need one tower per device, at least one)')
  towers = []
  for tensors, device in zip(tower_tensors, devices):
    with tf.device(device):
      towers.append([tf.convert_to_tensor(t) for t in tensors])
  first = towers[0]
  for t in first:
    if not t.shape.is_fully_defined():
      raise ValueError(f'batch all-reduce needs fully defined shapes: {t}')
  for tower in towers[1:]:
    if len(tower) != len(first) or any(
        a.dtype != b.dtype or a.shape != b.shape for a, b in zip(tower, first)):
      raise ValueError('all towers need the same shapes and dtypes in the '
                       'same order')
  return towers


def _check_compact(compact_dtype):
  if compact_dtype is None:
    return None
  compact_dtype = tf.as_dtype(compact_dtype)
  if compact_dtype not in _COMPACT_DTYPES:
    raise ValueError(f'compact_dtype must be float16 or bfloat16, got '
                     f'{compact_dtype.name}')
  return compact_dtype


class _Reducer:
  """Reduces one unit (one tensor per tower) with the shared settings."""

  def __init__(self, devices, spec, compact_dtype, collective_keys):
    self.devices = list(devices)
    self.spec = spec
    self.compact_dtype = compact_dtype
    self.collective_keys = collective_keys

  def __call__(self, unit):
    """unit[i] lives on devices[i]; returns the sums, sum i on devices[i]."""
    dtype = unit[0].dtype
    squeeze = self.compact_dtype is not None and dtype == tf.float32
    if squeeze:
      # Cast on the sending device so the 16-bit copy is what travels.
      unit = self._cast_each(unit, self.compact_dtype)
    summed = allreduce.all_reduce(unit, self.devices, self.spec,
                                  collective_keys=self.collective_keys)
    return self._cast_each(summed, dtype) if squeeze else summed

  def _cast_each(self, tensors, dtype):
    out = []
    for t, d in zip(tensors, self.devices):
      with tf.device(d):
        out.append(tf.cast(t, dtype))
    return out


def _flat_concat(tensors, device):
  """Flattens and concatenates `tensors` into one vector on `device`."""
  with tf.device(device):
    flats = [tf.reshape(t, [-1]) for t in tensors]
    return tf.concat(flats, 0) if len(flats) > 1 else flats[0]


def _split_restore(flat, like, device):
  """Cuts `flat` back into tensors shaped like `like`, on `device`."""
  sizes = [t.shape.num_elements() for t in like]
  with tf.device(device):
    pieces = tf.split(flat, sizes) if len(sizes) > 1 else [flat]
    return [tf.reshape(p, t.shape) for p, t in zip(pieces, like)]


def _reduce_group(towers, indices, devices, reduce_unit):
  """Reduces tensors `indices` of every tower as ONE concatenated vector.

  Returns {index: [sum on tower i for each tower]}.
  """
  unit = [_flat_concat([tower[j] for j in indices], d)
          for tower, d in zip(towers, devices)]
  summed = reduce_unit(unit)
  out = {j: [None] * len(devices) for j in indices}
  for i, d in enumerate(devices):
    pieces = _split_restore(summed[i], [towers[i][j] for j in indices], d)
    for j, piece in zip(indices, pieces):
      out[j][i] = piece
  return out


def _even_sizes(total, parts):
  """Splits `total` into `parts` sizes differing by at most one."""
  base, extra = divmod(total, parts)
  return [base + 1 if i < extra else base for i in range(parts)]


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
    sizes = _even_sizes(total, max(1, min(num_packs, total)))
    packs = []  # packs[i] = the packs of tower i
    for tower, d in zip(towers, devices):
      flat = _flat_concat([tower[j] for j in indices], d)
      with tf.device(d):
        packs.append(tf.split(flat, sizes) if len(sizes) > 1 else [flat])
    summed = [reduce_unit([p[k] for p in packs]) for k in range(len(sizes))]
    for i, d in enumerate(devices):
      with tf.device(d):
        flat = tf.concat([s[i] for s in summed], 0) if len(summed) > 1 \
            else summed[0][i]
      pieces = _split_restore(flat, [towers[i][j] for j in indices], d)
      for j, piece in zip(indices, pieces):
        out.setdefault(j, [None] * len(devices))[i] = piece
  return out


def small_tensor_groups(tensors: Sequence[tf.Tensor], max_bytes: int,
                        max_group: int) -> List[List[int]]:
  """Groups of tensor indices to reduce together.

  Consecutive tensors of one dtype, each at most `max_bytes`, are grouped in
  runs of at most `max_group`; every other tensor is a group of its own.
  """
  groups, run = [], []

  def close_run():
    groups.extend(run[k:k + max_group] for k in range(0, len(run), max_group))
    run.clear()

  for j, t in enumerate(tensors):
    small = t.shape.num_elements() * t.dtype.size <= max_bytes
    if not small or (run and tensors[run[-1]].dtype != t.dtype):
      close_run()
    if small:
      run.append(j)
    else:
      groups.append([j])
  close_run()
  return groups


def batch_all_reduce(tower_tensors: Sequence[Sequence[tf.Tensor]],
                     devices: Sequence[str], spec, *, num_packs: int = 0,
                     agg_small_grads_max_bytes: int = 0,
                     agg_small_grads_max_group: int = 10,
                     compact_dtype=None,
                     collective_keys=None) -> List[List[tf.Tensor]]:
  """Sums gradient j over the towers for every j.

  Args:
    tower_tensors: tower_tensors[i][j] = gradient j of the tower on
      devices[i]; all towers have the same shapes and dtypes in one order.
    devices: one device per tower.
    spec: AllReduceSpec or spec string (see allreduce.parse_all_reduce_spec).
    num_packs: N > 0 concatenates all tensors of a dtype and reduces them as
      N nearly equal packs (--gradient_repacking).
    agg_small_grads_max_bytes: > 0 packs runs of consecutive tensors of at
      most this many bytes, up to agg_small_grads_max_group per pack.
    agg_small_grads_max_group: see agg_small_grads_max_bytes.
    compact_dtype: tf.float16 or tf.bfloat16 to send float32 values in 16
      bits (cast before the reduction, cast back after).
    collective_keys: CollectiveKeys allocator for the `collective` algorithm.

  Returns:
    out[i][j] = the sum of gradient j, on devices[i], original shape/dtype.
  """
  if num_packs > 0 and agg_small_grads_max_bytes > 0:
    raise ValueError('use num_packs (gradient repacking) or '
                     'agg_small_grads_max_bytes, not both')
  if isinstance(spec, str):
    spec = allreduce.parse_all_reduce_spec(spec)  # parse once, not per unit
  devices = list(devices)
  towers = _check_towers(tower_tensors, devices)
  reduce_unit = _Reducer(devices, spec, _check_compact(compact_dtype),
                         collective_keys)
  with tf1.name_scope('batch_all_reduce'):
    if num_packs > 0:
      out = _repack(towers, devices, num_packs, reduce_unit)
    else:
      out = _reduce_in_groups(towers, devices, agg_small_grads_max_bytes,
                              agg_small_grads_max_group, reduce_unit)
  return [[out[j][i] for j in range(len(towers[0]))]
          for i in range(len(devices))]


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


# --------------------------------------------------------------------------
# Relaxed consistency


class OneStepDelay:
  """Holds last step's reduced values per device, to apply them a step late.

  For every tower tensor, a non-trainable LOCAL variable on that tower's
  device starts at zeros. `delayed[i][j]` reads the stored value and
  `update_op` stores the new one; each write waits for its variable's read,
  so one session.run of both sees the old value and leaves the new one.
  Initialize with tf1.local_variables_initializer().
  """

  def __init__(self, tower_tensors, devices, name='one_step_delay'):
    if len(tower_tensors) != len(devices):
      raise ValueError(f'got {len(tower_tensors)} towers for '
                       f'{len(devices)} devices')
    self.variables: List[List[tf.Variable]] = []
    self.delayed: List[List[tf.Tensor]] = []
    writes = []
    with tf1.name_scope(name):
      for i, (tensors, device) in enumerate(zip(tower_tensors, devices)):
        with tf.device(device):
          variables, reads = [], []
          for j, t in enumerate(tensors):
            t = tf.convert_to_tensor(t)
            # The store starts at zeros whatever control dependencies the
            # caller's scope holds: its initializer must run at init time.
            with tf.control_dependencies(None):
              var = tf1.Variable(
                  tf.zeros(t.shape, t.dtype), trainable=False,
                  collections=[tf1.GraphKeys.LOCAL_VARIABLES],
                  use_resource=True, name=f'tower{i}_value{j}')
            read = var.read_value()
            with tf.control_dependencies([read]):
              writes.append(var.assign(t, read_value=False))
            variables.append(var)
            reads.append(read)
        self.variables.append(variables)
        self.delayed.append(reads)
      self.update_op = tf.group(*writes, name='update')

  @property
  def all_variables(self) -> List[tf.Variable]:
    """Every variable, flattened (e.g. for an explicit initializer)."""
    return list(itertools.chain.from_iterable(self.variables))


def defer_one_step(tower_tensors: Sequence[Sequence[tf.Tensor]],
                   devices: Sequence[str]
                   ) -> Tuple[List[List[tf.Tensor]], tf.Operation]:
  """Returns (last step's values, op storing this step's) per tower/device.

  Step 1 yields zeros; step k yields the values given at step k-1.
  """
  delay = OneStepDelay(tower_tensors, devices)
  return delay.delayed, delay.update_op
