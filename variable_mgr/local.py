"""Managers of one process: parameter_server, replicated, independent."""

from __future__ import annotations

import contextlib
import functools
from typing import Sequence

import tensorflow as tf

from variable_mgr import base
from variable_mgr import batch_allreduce
from variable_mgr import catalog
from variable_mgr import naming
from variable_mgr import relaxed as relaxed_lib
from variable_mgr import sizes
from variable_mgr.compression import registry as compression_registry
from variable_mgr.registry import register

tf1 = tf.compat.v1

# Op types that hold a variable's storage; parameter_server places these.
_VARIABLE_OPS = frozenset(
  ['Variable', 'VariableV2', 'VarHandleOp', 'AutoReloadVariable']
)


class GreedyVariablePlacer:
  """Device function: variables to the least-loaded parameter device.

  Every other op stays on the tower device. With one parameter device this is
  "all variables on the CPU"; with the tower GPUs it spreads variables by size.
  """

  def __init__(self, param_devices: Sequence[str]):
    self.param_devices = tuple(param_devices)
    self.bytes_on = [0] * len(self.param_devices)

  def place(self, num_bytes: int) -> str:
    """The least-loaded parameter device, now also holding `num_bytes`."""
    k = min(range(len(self.bytes_on)), key=self.bytes_on.__getitem__)
    self.bytes_on[k] += num_bytes
    return self.param_devices[k]

  def device_fn(self, tower_device: str):
    """Device function for the ops of one tower."""

    def choose(op):
      if op.type not in _VARIABLE_OPS:
        return tower_device
      return self.place(
        sizes.num_bytes(op.get_attr('shape'), op.get_attr('dtype'))
      )

    return choose


@register
class ParameterServer(base.VariableMgr):
  """One copy of the variables on the parameter device(s).

  Every tower reads them, the towers' gradients are averaged next to each
  variable, and one optimizer applies the mean.
  """

  name = 'parameter_server'
  traits = catalog.local_traits('parameter_server')

  def __init__(
    self,
    tower_devices: Sequence[str],
    *,
    param_devices: Sequence[str] = ('/cpu:0',),
    compression: str = 'none',
    **kwargs,
  ):
    super().__init__(tower_devices, **kwargs)
    self.placer = GreedyVariablePlacer(param_devices)
    # A cast on each push (powersgd is refused: no all-reduce here).
    self.compressor = compression_registry.create(compression)

  @classmethod
  def from_settings(cls, settings, tower_devices, cluster=None):
    if cluster is not None:  # the cluster variant puts them on the ps tasks
      return super().from_settings(settings, tower_devices, cluster)
    if settings.local_parameter_device == 'cpu':
      param_devices = ('/cpu:0',)
    else:  # spread over the towers' own devices, as the classic gpu mode did
      param_devices = tuple(tower_devices)
    return cls(
      tower_devices,
      param_devices=param_devices,
      compression=settings.gradient_compression,
      use_resource_vars=settings.use_resource_vars,
    )

  def describe(self) -> str:
    return '%s (variables on %s%s)' % (
      self.name,
      ', '.join(self.placer.param_devices),
      compression_registry.description_suffix(self.compressor),
    )

  def variable_prefix(self, index: int) -> str:
    del index
    return naming.SHARED_PREFIX

  @contextlib.contextmanager
  def tower_scope(self, index: int):
    with tf1.name_scope('tower_%d' % index):
      with base.replica_scope(
        naming.SHARED_SCOPE,
        self.placer.device_fn(self.tower_devices[index]),
        reuse=index > 0,
        use_resource=self.use_resource_vars,
      ):
        yield

  def reduce_gradients(self, tower_grads):
    names = [naming.strip_replica_prefix(v.op.name) for _, v in tower_grads[0]]
    # Each tower pushes its gradients (compressed on its device).
    sent = [
      self.compressor.push([g for g, _ in gv], device, i, names)
      for i, (gv, device) in enumerate(zip(tower_grads, self.tower_devices))
    ]
    sites = []
    for j, (g, var) in enumerate(tower_grads[0]):
      # Average where the variable lives, so each gradient crosses once.
      with tf.device(var.device):
        mean = base.mean_of([tower[j] for tower in sent])
      sites.append((self.compressor.pull(mean, g.dtype, var.device), var))
    return base.Reduction([(None, sites)])

  def stat_update_ops(self, tower_update_ops):
    # The towers share one copy of the moving statistics; letting every tower
    # race to update it adds nothing, so tower 0 updates it (as classically).
    return list(tower_update_ops[0])


@register
class Replicated(base.PerTowerCopies):
  """One copy per tower; gradients all-reduced; every tower applies the mean.

  After initialisation every replica is overwritten with v0's values, so the
  replicas start (and, applying the same updates, stay) identical. With
  relaxed consistency the reduced gradients of a step are applied in the
  next step (the first step applies zeros), so updates overlap computation.
  """

  name = 'replicated'
  traits = catalog.local_traits('replicated')

  def __init__(
    self,
    tower_devices: Sequence[str],
    *,
    all_reduce=None,
    relaxed: bool = False,
    **kwargs,
  ):
    super().__init__(tower_devices, **kwargs)
    self.all_reduce = all_reduce or batch_allreduce.BatchAllReduce()
    self.relaxed = relaxed

  @classmethod
  def from_settings(cls, settings, tower_devices, cluster=None):
    # cluster is None here (a local run); distributed_all_reduce takes it.
    return cls(
      tower_devices,
      all_reduce=batch_allreduce.BatchAllReduce.from_settings(settings),
      relaxed=settings.relaxed,
      use_resource_vars=settings.use_resource_vars,
      cluster=cluster,
    )

  def all_reduce_description(self):
    return self.all_reduce.describe() + (' (relaxed)' if self.relaxed else '')

  def _sums(self, tower_grads) -> list:
    """Every tower's sums of the step's gradients (compressed as set)."""
    return self.all_reduce.sum(
      [[g for g, _ in gv] for gv in tower_grads],
      self.tower_devices,
      names=[
        naming.relative_name(v.op.name, self.variable_prefix(0))
        for _, v in tower_grads[0]
      ],
    )

  def reduce_gradients(self, tower_grads):
    sums = self._sums(tower_grads)
    side_ops = ()
    if self.relaxed:
      # Named after each tower's variable ('v0/conv0/kernel/delayed'): the
      # checkpoint saves tower 0's store and post_init_ops copies it to
      # every tower, so a resume applies the step held back (see relaxed).
      delay = relaxed_lib.OneStepDelay(
        sums,
        self.tower_devices,
        variable_names=[
          [v.op.name + relaxed_lib.DELAYED_SUFFIX for _, v in gv]
          for gv in tower_grads
        ],
      )
      sums, side_ops = delay.delayed, (delay.update_op,)
    sites = self._mean_sites(tower_grads, sums)
    return base.Reduction(sites, side_ops, consistent=not self.relaxed)

  def build_train_op(self, tower_grads, step_update: base.StepUpdate):
    if not (
      self.relaxed
      and step_update.loss_scale is not None
      and step_update.loss_scale.config.auto
    ):
      return super().build_train_op(tower_grads, step_update)
    return self._relaxed_auto_scaled_train_op(tower_grads, step_update)

  def _relaxed_auto_scaled_train_op(self, tower_grads, step_update):
    """Relaxed consistency with an automatic loss scale.

    The scale may change between steps, so this step's sums are unscaled
    with the scale they were computed with and checked *now*, before they
    are held back: the scale moves at once on inf/nan, and the verdict is
    held back with the gradients, so the next step skips (or applies) them.
    The scale's update waits for every gradient, hence for every tower's
    read of it.
    """
    grads = [[g for g, _ in gv] for gv in tower_grads]
    sums = self._sums(tower_grads)
    unscaled = [
      [
        g
        for g, _ in step_update.loss_scale.unscale(
          [(s, None) for s in tower_sums]
        )
      ]
      for tower_sums in sums
    ]
    finite = step_update.loss_scale.all_finite(
      [
        (d, [(g, None) for g in u])
        for d, u in zip(self.tower_devices, unscaled)
      ]
    )
    step_update.loss_scale.record_verdict(finite)
    with tf.device(step_update.loss_scale.device):
      not_finite = 1.0 - tf.cast(finite, tf.float32)
    delay = relaxed_lib.OneStepDelay(
      unscaled + [[not_finite]],
      self.tower_devices + (step_update.loss_scale.device,),
      variable_names=[
        [v.op.name + relaxed_lib.DELAYED_SUFFIX for _, v in gv]
        for gv in tower_grads
      ]
      + [['loss_scale_state/delayed_not_finite']],
    )
    sites = self._mean_sites(tower_grads, delay.delayed[:-1])
    self.applied_gradient_norm = functools.partial(
      base.applied_norm,
      sites[0][1],
      self.cpu_device,
      None,
      step_update.clip_norm,
    )
    with tf.device(step_update.loss_scale.device):
      held_back_finite = delay.delayed[-1][0] < 0.5
    update = step_update.loss_scale.apply_if(
      held_back_finite,
      lambda: self.apply_sites(
        sites,
        step_update.make_optimizer,
        step_update.global_step,
        step_update.clip_norm,
      ),
      record=False,
    )
    with tf.control_dependencies([g for tower in grads for g in tower]):
      adjust = step_update.loss_scale.adjust(finite)
    return tf.group(update, adjust, delay.update_op, name='train_op')

  def _mean_sites(self, tower_grads, tower_sums) -> list:
    """Apply sites: tower i's sums scaled to the mean, with its variables.

    Relaxed, each update also waits for this step's reads of its variable
    (relaxed.after_reads), so a run's numbers do not depend on timing.
    """
    scale = 1.0 / self.num_towers
    ops = (
      relaxed_lib.step_ops([g for gv in tower_grads for g, _ in gv])
      if self.relaxed
      else None
    )
    sites = []
    for i, (gv, sums) in enumerate(zip(tower_grads, tower_sums)):
      if self.num_towers == 1:  # x * 1.0 == x: no op needed
        means = list(sums)
      else:
        means = self._scaled(sums, scale, self.tower_devices[i])
      pairs = list(zip(means, [v for _, v in gv]))
      if ops is not None:
        pairs = relaxed_lib.after_reads(pairs, ops)
      sites.append((self.tower_devices[i], pairs))
    return sites

  @staticmethod
  def _scaled(sums, scale: float, device: str) -> list:
    """Each of `sums` times `scale`, on `device`."""
    with tf.device(device):
      # One constant per dtype and tower, not one per gradient: each op
      # is start-up time (graph optimisation) in every tower.
      dtypes = dict.fromkeys(s.dtype for s in sums)  # in order
      scales = {d: tf.constant(scale, d) for d in dtypes}
      return [s * scales[s.dtype] for s in sums]

  def post_init_ops(self):
    return copy_from_replica_zero(tf1.global_variables(), self.num_towers)

  def overwritten_after_init(self, index):
    return index > 0  # copy_from_replica_zero

  def stat_update_ops(self, tower_update_ops):
    # As classically: the replicas' moving statistics would be nearly the
    # same, and only tower 0's are saved and evaluated, so only tower 0
    # updates its own (the others' updates would be work for nothing).
    return list(tower_update_ops[0])


@register
class Independent(base.PerTowerCopies):
  """One copy per tower and no exchange: each tower trains on its own."""

  name = 'independent'
  traits = catalog.local_traits('independent')
  shares_gradients = catalog.MANAGERS['independent'].shares_gradients

  def reduce_gradients(self, tower_grads):
    return base.Reduction(
      [(self.tower_devices[i], list(gv)) for i, gv in enumerate(tower_grads)]
    )

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
  """Assign ops setting every tower's copy to the value of tower 0's."""
  ops = []
  for copies in base.tower_copies(variables, num_replicas).values():
    source = copies[0]
    for target in copies[1:]:
      if target is not None:
        with tf.device(target.device):
          ops.append(target.assign(source.read_value()))
  return ops
