"""hybrid: big variables on the ps tasks, the rest all-reduced per tower.

Variables above --hybrid_threshold_bytes live once on the ps tasks
(synchronised like parameter_server's, see ps_cluster); the others are
per-tower copies whose gradients are averaged with collectives over every
tower of every worker. One inf/nan verdict and one gradient clip cover both
groups.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools

import tensorflow as tf

from variable_mgr import base
from variable_mgr import catalog
from variable_mgr import collective_options
from variable_mgr import collectives
from variable_mgr import local
from variable_mgr import naming
from variable_mgr import ps_cluster
from variable_mgr import sizes
from variable_mgr.compression import registry as compression_registry
from variable_mgr.registry import register

tf1 = tf.compat.v1

# Name scope of hybrid's ps-held variables' optimizer (see _ps_update).
PS_OPTIMIZER_SCOPE = 'ps_optimizer/'


def checkpoint_fallback_name(name: str) -> str | None:
  """Where another mode's checkpoint keeps the value of `name`, or None.

  hybrid's ps optimizer saves its non-slot state (Adam's beta powers) as
  'ps_optimizer/NAME', every other optimizer as 'NAME' (its slots have the
  same names in every mode). In a synchronous run both have taken the same
  steps, so each is the other's value when a checkpoint lacks it: without
  it the ps group's bias correction started again at step 1.
  """
  if name.startswith(PS_OPTIMIZER_SCOPE):
    plain = name[len(PS_OPTIMIZER_SCOPE) :]
    return plain if '/' not in plain else None
  return PS_OPTIMIZER_SCOPE + name if '/' not in name else None


@dataclasses.dataclass(frozen=True)
class _SkipGuard:
  """The inf/nan verdict of one hybrid step, shared by all its updates.

  finite: None without automatic loss scaling (every update runs), else a
    bool tensor every worker agrees on.
  """

  loss_scale: object = None
  finite: object = None

  def run(self, make_updates) -> list:
    """The ops make_updates() builds, skipped together unless finite."""
    if self.finite is None:
      return make_updates()
    return [self.loss_scale.apply_if(self.finite, make_updates)]

  def run_on(self, device, inputs, make_updates) -> list:
    """As run, for updates on another task's `device`: decided there.

    inputs: every tensor from outside that the updates read. A conditional
    is run as switches and merges, and on a skipped step the branch not
    taken sends dead tensors between the devices it spans; no op waits for
    those, so a step could end (and the other worker's end of the same
    step, whose id collectives share, clean it up on the ps: "Cleanup")
    while the ps still waits for them. Here the verdict is copied to
    `device` after every input has arrived, and the conditional (both
    branches, its merge) runs on `device` alone: what crosses tasks is
    the verdict and the inputs before it, and its result after it, all of
    which the step waits for.
    """
    if self.finite is None:
      return make_updates()
    self.loss_scale.record_verdict(self.finite)
    with tf.device(device):
      with tf.control_dependencies(inputs):
        finite = tf.identity(self.finite)
      return [self.loss_scale.apply_if(finite, make_updates, record=False)]

  def count_step(self, global_step):
    """Moves the global step (not on a skipped step) and the loss scale."""
    if self.finite is None:
      return global_step.assign_add(1)
    return tf.group(
      global_step.assign_add(tf.cast(self.finite, tf.int64)),
      self.loss_scale.adjust(self.finite),
    )


def _by_device(grads_and_vars) -> list:
  """(device, its variables' (gradient, variable) pairs), in first-seen
  order."""
  shares = {}
  for g, v in grads_and_vars:
    shares.setdefault(v.device, []).append((g, v))
  return list(shares.items())


def _squared_norm(grads_and_vars, device) -> tf.Tensor:
  """Sum of the squares of every gradient (float32), on `device`."""
  with tf.device(device):
    return tf.add_n(
      [tf.constant(0.0)]
      + [
        tf.reduce_sum(tf.square(tf.cast(g, tf.float32)))
        for g, _ in grads_and_vars
      ]
    )


class _HybridClip:
  """--gradient_clip over the global norm of BOTH of hybrid's groups.

  The all-reduced group's mean is known on every worker; the ps-held
  group's cluster mean only where it is applied (the chief, with sync), so
  the chief shares its squared norm with a collective minimum (the other
  workers offer the largest float32). Every update is then scaled by
  clip / max(global norm, clip), as tf.clip_by_global_norm does elsewhere.
  """

  _BIG = 3.0e38  # a non-chief's offer to the minimum

  def __init__(self, mgr: 'Hybrid', clip_norm, tower0_sites):
    self.mgr = mgr
    # A per-element clip (a function; see base.clip_by_global_norm) needs
    # no norm: each group is clipped alone.
    self.per_element = clip_norm if callable(clip_norm) else None
    self.clip_norm = None if callable(clip_norm) else clip_norm
    self.small_sq = (
      _squared_norm(tower0_sites, mgr.cpu_device)
      if self.clip_norm is not None
      else None
    )
    self.big_sq = None if mgr._shared else tf.constant(0.0)
    self._factor = None

  @property
  def _shared_by_collective(self) -> bool:
    cluster = self.mgr.cluster
    return cluster.cross_replica_sync and cluster.num_workers > 1

  def clipped(self, grads_and_vars, ps_group=False):
    """`grads_and_vars` scaled by the global clip factor (or as given)."""
    if self.per_element is not None:
      return self.per_element(grads_and_vars)
    if self.clip_norm is None:
      return grads_and_vars
    if ps_group:
      self._set_big_sq(_squared_norm(grads_and_vars, self.mgr.cpu_device))
    factor = self._clip_factor()
    out = []
    for g, v in grads_and_vars:
      with tf.device(g.device):
        out.append((g * tf.cast(factor, g.dtype), v))
    return out

  def receive_ps_norm(self) -> None:
    """On a worker that applied no ps update: the chief's squared norm."""
    if self.clip_norm is not None and self.big_sq is None:
      self._set_big_sq(None)

  def _set_big_sq(self, local_sq) -> None:
    if not self._shared_by_collective:
      self.big_sq = local_sq
      return
    with tf.device(self.mgr.cpu_device):
      offer = tf.constant(self._BIG) if local_sq is None else local_sq
    self.big_sq = collectives.collective_min_value(
      offer,
      self.mgr.tower_devices,
      self.mgr.group,
      self.mgr.cpu_device,
      self.mgr.options.implementation,
    )

  def _clip_factor(self):
    if self._factor is None:
      if self.big_sq is None:
        self.receive_ps_norm()
      with tf.device(self.mgr.cpu_device):
        norm = tf.sqrt(self.small_sq + self.big_sq)
        self._factor = self.clip_norm / tf.maximum(norm, self.clip_norm)
    return self._factor


@register
class Hybrid(ps_cluster.PsClusterMixin, base.PerTowerCopies):
  """Big variables on the ps (synchronised), small ones all-reduced.

  A variable of more than `threshold_bytes` has one shared copy, 'v/name',
  on a ps task (balanced by bytes) that every tower reads; a smaller one has
  a copy per tower, 'vI/name', whose gradients are averaged with
  collectives over every tower of every worker.
  """

  name = 'hybrid'
  traits = catalog.cluster_traits('hybrid')
  settings_fields = {
    'threshold_bytes': 'hybrid_threshold_bytes',
    'compression': 'gradient_compression',
    'options': 'collective_reduce_options',
  }

  def __init__(
    self,
    tower_devices,
    *,
    cluster: base.ClusterDevices,
    threshold_bytes: int = 1 << 20,
    compression: str = 'none',
    options: collective_options.ReduceOptions | None = None,
    **kwargs,
  ):
    super().__init__(
      tower_devices,
      cpu_device=cluster.worker_cpu_device,
      cluster=cluster,
      **kwargs,
    )
    self.threshold_bytes = threshold_bytes
    self.options = options or collective_options.ReduceOptions()
    # A cast (powersgd is refused: the ps-held group has no all-reduce).
    self.compressor = compression_registry.create(compression)
    self.group = collectives.collective_group(self.tower_devices, cluster)
    self._placer = local.GreedyVariablePlacer(self.ps_devices)
    self._shared = {}  # relative name -> ps variable
    self._tower_vars = [[] for _ in self.tower_devices]

  @property
  def global_step_device(self) -> str:
    # Each worker counts its own steps, as collective_all_reduce does: a
    # collective step that also updated a ps-held global step was aborted
    # ("Cleanup") on the ps. The workers run in lockstep, so every worker's
    # count is the step number the sync accumulators need as a stamp.
    return self.cpu_device

  def describe(self) -> str:
    return '%s (variables > %d bytes on %d ps task(s), the rest collective)' % (
      self.name,
      self.threshold_bytes,
      len(self.ps_devices),
    )

  def all_reduce_description(self):
    return '%s over %d device(s)%s%s' % (
      self.options.op_type,
      len(self.group),
      self.options.describe(self.group),
      compression_registry.description_suffix(self.compressor),
    )

  # ---- building the towers ----------------------------------------------

  @contextlib.contextmanager
  def tower_scope(self, index: int):
    def route(getter, name, *args, **kwargs):
      return self._route(index, getter, name, *args, **kwargs)

    with tf1.variable_scope(
      naming.tower_scope_name(index),
      custom_getter=route,
      use_resource=self.use_resource_vars,
    ):
      with tf1.device(self.tower_devices[index]):
        yield

  def _route(self, index, getter, name, *args, **kwargs):
    """Custom getter of tower `index`: big variables to their ps copy."""
    trainable = kwargs.get('trainable', True)
    relative = naming.relative_name(name, self.variable_prefix(index))
    num_bytes = sizes.requested_bytes(kwargs)
    if (
      trainable and relative is not None and (num_bytes > self.threshold_bytes)
    ):
      var = self._shared_variable(relative, num_bytes, getter, args, kwargs)
    else:
      var = getter(name, *args, **kwargs)
    if trainable:
      self._tower_vars[index].append(var)
    return var

  def _shared_variable(self, relative, num_bytes, getter, args, kwargs):
    """The one ps copy 'v/RELATIVE' (created by the first tower that asks)."""
    if relative not in self._shared:
      with tf1.device(None), tf.device(self._placer.place(num_bytes)):
        self._shared[relative] = getter(
          naming.shared_name(relative), *args, **kwargs
        )
    return self._shared[relative]

  def tower_trainable_variables(self, index: int) -> list:
    return list(self._tower_vars[index])

  # ---- the update ---------------------------------------------------------

  def build_train_op(self, tower_grads, step_update: base.StepUpdate):
    with tf.control_dependencies(
      base.all_done(ps_cluster.all_grads(tower_grads), 'gradients_ready')
    ):
      sites, means = self._reduce(tower_grads)
      if step_update.loss_scale is not None:
        # Every worker's scale is its own variable (on its step counter's
        # device) but moves identically: each worker sees the same decision.
        sites = [step_update.loss_scale.unscale(gv) for gv in sites]
        means = step_update.loss_scale.unscale(means)
      guard = self._skip_guard(step_update.loss_scale, sites, means)
      clip = _HybridClip(self, step_update.clip_norm, sites[0] if sites else [])
      # The ps update first: with clipping, it learns the ps-held group's
      # share of the global norm that the towers' updates need too.
      ps_updates = (
        [self._ps_update(means, step_update, clip, guard)] if means else []
      )
      updates = (
        guard.run(
          lambda: self._tower_updates(sites, step_update.make_optimizer, clip)
        )
        if sites
        else []
      ) + ps_updates
      if means:
        updates.append(self._end_of_step_barrier(updates))
      with tf.device(self.global_step_device), tf.control_dependencies(updates):
        bump = guard.count_step(step_update.global_step)
      train_op = tf.group(*updates, bump, name='train_op')
    self._report_hybrid_norm(sites, means, step_update.clip_norm)
    if step_update.loss is None:
      return train_op
    means = collectives.collective_mean_loss(
      step_update.loss,
      self.tower_devices,
      self.group,
      self.options.implementation,
    )
    self.cluster_loss = means[0]
    return tf.group(train_op, *means, name='train_op_and_loss')

  def _report_hybrid_norm(self, sites, means, clip_norm) -> None:
    """applied_gradient_norm: of both groups, where both are applied.

    Tower 0's all-reduced group and the ps-held group as its update
    receives it (the workers' average on the chief, with sync); both are
    already unscaled. None on a worker that does not apply the ps group.
    """
    if means and not self.applied_grads:
      return
    self.applied_gradient_norm = functools.partial(
      base.applied_norm,
      (list(sites[0]) if sites else []) + list(self.applied_grads or []),
      self.cpu_device,
      None,
      clip_norm,
    )

  def _reduce(self, tower_grads):
    """Reduces the step's gradients; returns (sites, means).

    sites[i]: tower i's (mean over every tower of every worker, variable)
    pairs of the per-tower variables; means: (mean over this worker's
    towers, variable) pairs of the ps-held ones.
    """
    shared_ids = {id(v) for v in self._shared.values()}
    big = [[(g, v) for g, v in gv if id(v) in shared_ids] for gv in tower_grads]
    small = [
      [(g, v) for g, v in gv if id(v) not in shared_ids] for gv in tower_grads
    ]
    sites = (
      collectives.collective_means_per_tower(
        small,
        self.tower_devices,
        self.group,
        options=self.options,
        compressor=self.compressor,
        first_replica=self.cluster.task_index * self.num_towers,
        tower_prefixes=[
          self.variable_prefix(i) for i in range(self.num_towers)
        ],
      )
      if small[0]
      else []
    )
    means = ps_cluster.local_means(big, self.cpu_device) if big[0] else []
    return sites, means

  def _skip_guard(self, loss_scale, sites, means) -> _SkipGuard:
    """The step's inf/nan verdict (only with automatic loss scaling)."""
    if loss_scale is None or not loss_scale.config.auto:
      return _SkipGuard()
    return _SkipGuard(
      loss_scale, self._finite_everywhere(loss_scale, sites, means)
    )

  def _tower_updates(self, sites, make_optimizer, clip) -> list:
    """Every tower applies the means of its small variables."""
    updates = []
    for i, gv in enumerate(sites):
      with tf.device(self.tower_devices[i]), self._apply_name_scope(i):
        updates.append(
          self._apply(clip.clipped(gv), make_optimizer, None, None)
        )
    return updates

  def _ps_update(self, means, step_update: base.StepUpdate, clip, guard):
    """The ps-held variables' update (averaged over workers if sync)."""

    def guarded(gvs, apply):
      # Where the update is applied (the chief, if sync): the averaged
      # gradients are known here, and clip learns their norm.
      gvs = clip.clipped(gvs, ps_group=True)
      if guard.finite is None:  # never skipped: one optimizer, applied
        return tf.group(apply(gvs))
      return tf.group(
        *[
          self._guarded_on_task(device, share, step_update, guard)
          for device, share in _by_device(gvs)
        ]
      )

    # Its own name scope: the ps optimizer's non-slot variables (Adam's beta
    # powers) must not share tower 0's checkpoint names ('v0/beta1_power'
    # is saved as 'beta1_power'), or only one of them would be saved.
    with tf1.name_scope(PS_OPTIMIZER_SCOPE):
      update = self._sync_or_async(
        means, step_update.make_optimizer, None, None, guard=guarded
      )
    clip.receive_ps_norm()  # a worker that did not apply: gets the norm
    return update

  def _guarded_on_task(self, device, grads_and_vars, step_update, guard):
    """The update of the ps-held variables on `device`, skipped there.

    One optimizer per ps task (one, with a single ps task): its branch and
    its learning rate's copy stay on that task (see _SkipGuard.run_on).
    """
    make_optimizer = step_update.make_optimizer
    inputs = [g for g, _ in grads_and_vars]
    if step_update.learning_rate is not None:
      with tf.device(device):
        rate = tf.identity(step_update.learning_rate)
      inputs.append(rate)
      make_optimizer = functools.partial(make_optimizer, learning_rate=rate)
    return tf.group(
      *guard.run_on(
        device,
        inputs,
        lambda: [self._apply(grads_and_vars, make_optimizer, None, None)],
      )
    )

  def _finite_everywhere(self, loss_scale, sites, means) -> tf.Tensor:
    """True iff every worker's gradients of this step are finite.

    The all-reduced means are the same on every worker; the ps-bound means
    are this worker's own, so each worker's verdict is combined with a
    collective minimum: every worker then skips or applies together.
    """
    checked = list(sites) + [means]
    local_ok = loss_scale.all_finite(
      [(self.cpu_device, gv) for gv in checked if gv]
    )
    verdict = collectives.collective_min_value(
      tf.cast(local_ok, tf.float32),
      self.tower_devices,
      self.group,
      self.cpu_device,
      self.options.implementation,
    )
    with tf.device(self.cpu_device):
      return verdict > 0.5

  def _end_of_step_barrier(self, updates) -> tf.Operation:
    """Ends this worker's step only when every worker's updates are done.

    A graph with collectives runs every worker's step under the same step
    id, so the ps holds one rendezvous per step for all workers; the first
    worker to finish cleans it up, aborting ("Cleanup <step id>") a slower
    worker's ps work of the same step. Waiting here for every worker's
    updates (which include its ps work) leaves nothing to abort.
    """
    with tf.device(self.cpu_device), tf.control_dependencies(updates):
      done = tf.identity(tf.zeros([]))
    return tf.group(
      *collectives.collective_min(
        done, self.tower_devices, self.group, self.options.implementation
      ),
      name='step_barrier',
    )

  def post_init_ops(self):
    return collectives.broadcast_tower_copies(
      self.num_towers,
      self.tower_devices,
      self.group,
      self.cluster.is_chief,
      self.options.implementation,
    )
