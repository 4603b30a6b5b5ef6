"""Managers that run in one process: parameter_server, replicated, independent."""

from __future__ import annotations

import contextlib
from typing import Sequence

import tensorflow as tf

from variable_mgr import allreduce
from variable_mgr import base
from variable_mgr import batch_allreduce
from variable_mgr import collective_keys
from variable_mgr.registry import register

tf1 = tf.compat.v1

# Op types that hold a variable's storage; parameter_server places these.
_VARIABLE_OPS = frozenset(
    ['Variable', 'VariableV2', 'VarHandleOp', 'AutoReloadVariable'])


def _variable_bytes(op: tf.Operation) -> int:
  shape = tf.TensorShape(op.get_attr('shape'))
  elements = shape.num_elements() if shape.is_fully_defined() else 1
  return elements * tf.as_dtype(op.get_attr('dtype')).size


class GreedyVariablePlacer:
  """Device function: variables to the least-loaded parameter device.

  Every other op stays on the tower device. With one parameter device this is
  "all variables on the CPU"; with the tower GPUs it spreads variables by size.
  """

  def __init__(self, param_devices: Sequence[str]):
    self.param_devices = tuple(param_devices)
    self.bytes_on = [0] * len(self.param_devices)

  def device_fn(self, tower_device: str):
    """Device function for the ops of one tower."""
    def choose(op):
      if op.type not in _VARIABLE_OPS:
        return tower_device
      k = min(range(len(self.bytes_on)), key=self.bytes_on.__getitem__)
      self.bytes_on[k] += _variable_bytes(op)
      return self.param_devices[k]
    return choose


@register
class ParameterServer(base.VariableMgr):
  """One copy of the variables on the parameter device(s).

  Every tower reads them, the towers' gradients are averaged next to each
  variable, and one optimizer applies the mean.
  """

  name = 'parameter_server'

  def __init__(self, tower_devices: Sequence[str], *,
               param_devices: Sequence[str] = ('/cpu:0',), **kwargs):
    super().__init__(tower_devices, **kwargs)
    self.placer = GreedyVariablePlacer(param_devices)

  @classmethod
  def from_params(cls, params, tower_devices, cluster=None):
    del cluster   # local only; distributed.py has the cluster variants
    if params.local_parameter_device == 'cpu':
      param_devices = ('/cpu:0',)
    else:   # spread over the towers' own devices, as the classic gpu mode did
      param_devices = tuple(tower_devices)
    return cls(tower_devices, param_devices=param_devices,
               use_resource_vars=params.use_resource_vars)

  def describe(self) -> str:
    return '%s (variables on %s)' % (self.name,
                                     ', '.join(self.placer.param_devices))

  def variable_prefix(self, index: int) -> str:
    del index
    return 'v/'

  @contextlib.contextmanager
  def tower_scope(self, index: int):
    with tf1.name_scope('tower_%d' % index):
      with base.replica_scope('v', self.placer.device_fn(self.tower_devices[index]),
                              reuse=index > 0,
                              use_resource=self.use_resource_vars):
        yield

  def reduce_gradients(self, tower_grads):
    sites = []
    for grads_and_vars in zip(*tower_grads):
      var = grads_and_vars[0][1]
      # Average where the variable lives, so each gradient crosses once.
      with tf.device(var.device):
        sites.append((base.mean_of([g for g, _ in grads_and_vars]), var))
    return base.Reduction([(None, sites)])

  def stat_update_ops(self, tower_update_ops):
    # The towers share one copy of the moving statistics; letting every tower
    # race to update it adds nothing, so tower 0 updates it (as classically).
    return list(tower_update_ops[0])


class _PerTowerCopies(base.VariableMgr):
  """Shared parts of the modes that keep one variable copy per tower."""

  def variable_prefix(self, index: int) -> str:
    return 'v%d/' % index

  def tower_scope(self, index: int):
    return base.replica_scope('v%d' % index, self.tower_devices[index],
                              use_resource=self.use_resource_vars)

  def _apply_name_scope(self, site: int):
    return tf1.name_scope(self.variable_prefix(site))


@register
class Replicated(_PerTowerCopies):
  """One copy per tower; gradients all-reduced; every tower applies the mean.

  After initialisation every replica is overwritten with v0's values, so the
  replicas start (and, applying the same updates, stay) identical. With
  relaxed consistency the reduced gradients of a step are applied in the
  next step (the first step applies zeros), so updates overlap computation.
  """

  name = 'replicated'
  uses_all_reduce = True

  def __init__(self, tower_devices: Sequence[str], *, reducer=None,
               relaxed: bool = False, **kwargs):
    super().__init__(tower_devices, **kwargs)
    self.reducer = reducer or GradientReducer()
    self.relaxed = relaxed

  @classmethod
  def from_params(cls, params, tower_devices, cluster=None):
    del cluster   # local only; distributed.py has the cluster variants
    sixteen_bit = (tf.float16 if params.use_fp16 else
                   tf.bfloat16 if params.use_bf16 else None)
    return cls(tower_devices,
               reducer=GradientReducer.from_params(params, sixteen_bit),
               relaxed=params.variable_consistency == 'relaxed',
               use_resource_vars=params.use_resource_vars)

  def all_reduce_description(self):
    return self.reducer.describe() + (' (relaxed)' if self.relaxed else '')

  def reduce_gradients(self, tower_grads):
    grads = [[g for g, _ in gv] for gv in tower_grads]
    sums = self.reducer.sum(grads, self.tower_devices)
    side_ops = ()
    if self.relaxed:
      delay = batch_allreduce.OneStepDelay(sums, self.tower_devices)
      sums, side_ops = delay.delayed, (delay.update_op,)
    scale = 1.0 / self.num_towers
    sites = []
    for i, (gv, tower_sums) in enumerate(zip(tower_grads, sums)):
      with tf.device(self.tower_devices[i]):
        means = [s * tf.cast(scale, s.dtype) for s in tower_sums]
      sites.append((self.tower_devices[i], list(zip(means, [v for _, v in gv]))))
    return base.Reduction(sites, side_ops, consistent=not self.relaxed)

  def post_init_ops(self):
    return copy_from_replica_zero(tf1.global_variables(), self.num_towers)


@register
class Independent(_PerTowerCopies):
  """One copy per tower and no exchange: each tower trains on its own."""

  name = 'independent'

  def reduce_gradients(self, tower_grads):
    return base.Reduction(
        [(self.tower_devices[i], list(gv)) for i, gv in enumerate(tower_grads)])

  def savable_variables(self):
    """Tower 0 under the shared names, every other tower under its own.

    The towers' values differ, so each is saved; another mode loading the
    checkpoint takes tower 0's, and a checkpoint of another mode (which
    lacks 'vI/...') starts towers 1.. from their initial values.
    """
    saved = super().savable_variables()
    others = tuple(self.variable_prefix(i) for i in range(1, self.num_towers))
    for v in tf1.global_variables():
      if others and v.op.name.startswith(others):
        saved[v.op.name] = v
    return saved


def copy_from_replica_zero(variables, num_replicas: int) -> list:
  """Assign ops setting every `vI/name` to the value of `v0/name`."""
  by_name = {v.op.name: v for v in variables}
  ops = []
  for name, source in sorted(by_name.items()):
    if not name.startswith('v0/'):
      continue
    for i in range(1, num_replicas):
      target = by_name.get('v%d/%s' % (i, name[3:]))
      if target is not None:
        with tf.device(target.device):
          ops.append(target.assign(source.read_value()))
  return ops


class GradientReducer:
  """Sums every tower's gradients with an all-reduce spec (default: copy).

  Gradients are reduced in groups of `merge_scope` under one name scope
  each (--allreduce_merge_scope), every group with the batch options
  (repacking, small-gradient packing, compact 16-bit transfer).
  """

  def __init__(self, spec: str = 'copy', *, merge_scope: int = 1,
               num_packs: int = 0, agg_small_grads_max_bytes: int = 0,
               agg_small_grads_max_group: int = 10, compact_dtype=None):
    self.spec = allreduce.parse_all_reduce_spec(spec)
    self.merge_scope = merge_scope
    self.batch_options = dict(
        num_packs=num_packs,
        agg_small_grads_max_bytes=agg_small_grads_max_bytes,
        agg_small_grads_max_group=agg_small_grads_max_group,
        compact_dtype=compact_dtype)

  @classmethod
  def from_params(cls, params, compact_dtype=None):
    """The reducer the all-reduce flags describe."""
    return cls(params.all_reduce_spec or 'copy',
               merge_scope=params.allreduce_merge_scope,
               num_packs=params.gradient_repacking,
               agg_small_grads_max_bytes=params.agg_small_grads_max_bytes,
               agg_small_grads_max_group=params.agg_small_grads_max_group,
               compact_dtype=(compact_dtype if params.compact_gradient_transfer
                              else None))

  def describe(self) -> str:
    options = []
    if self.batch_options['num_packs']:
      options.append('repacking %d' % self.batch_options['num_packs'])
    if self.batch_options['agg_small_grads_max_bytes']:
      options.append('small-gradient packs <= %d bytes x %d' % (
          self.batch_options['agg_small_grads_max_bytes'],
          self.batch_options['agg_small_grads_max_group']))
    if self.batch_options['compact_dtype'] is not None:
      options.append('sent as %s' % self.batch_options['compact_dtype'].name)
    return str(self.spec) + (' (%s)' % ', '.join(options) if options else '')

  def sum(self, tower_tensors, devices):
    """tower_tensors[i][j] summed over i; result[i][j] placed on devices[i]."""
    num = len(tower_tensors[0])
    # Packing works across gradients, so it sees them all at once.
    packs = (self.batch_options['num_packs'] or
             self.batch_options['agg_small_grads_max_bytes'])
    step = num if packs else self.merge_scope
    keys = collective_keys.keys_for_graph()
    sums = [[] for _ in tower_tensors]
    for start in range(0, num, step):
      group = [tensors[start:start + step] for tensors in tower_tensors]
      with tf1.name_scope('allreduce_%d' % (start // step)):
        reduced = batch_allreduce.batch_all_reduce(
            group, devices, self.spec, collective_keys=keys,
            **self.batch_options)
      for i, tensors in enumerate(reduced):
        sums[i].extend(tensors)
    return sums
