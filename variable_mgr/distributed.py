"""Managers for multi-worker runs (a cluster of worker, ps, controller tasks).

parameter_server (cluster variant): variables on the ps tasks, balanced by
  bytes; with cross-replica sync the workers' gradients of a step are averaged
  in shared accumulators before one update, else each worker applies its own.
distributed_replicated: a copy per tower on each worker, a shared copy on the
  ps; every step the mean is applied on the ps and copied back.
distributed_all_reduce: one controller builds one graph over every worker's
  devices (replicated with an all-reduce spec, hybrid specs included).
collective_all_reduce: each worker builds its own graph; gradients are
  all-reduced with CollectiveReduceV2 over every tower of every worker.
hybrid: variables above a size threshold on the ps (synchronised), the rest
  per-tower copies all-reduced with collectives.

Variables shared between workers are found by name and device: every worker
builds the same names on the same ps devices, so their graphs use one copy.
"""

from __future__ import annotations

import contextlib
import dataclasses

import tensorflow as tf

from variable_mgr import base
from variable_mgr import collectives
from variable_mgr import local
from variable_mgr import naming
from variable_mgr import sizes
from variable_mgr import transfers
from variable_mgr.registry import register
from variable_mgr.registry import register_cluster_variant
from variable_mgr.traits import Traits

tf1 = tf.compat.v1

# Name scope of hybrid's ps-held variables' optimizer (see _ps_update).
PS_OPTIMIZER_SCOPE = 'ps_optimizer/'


class SyncAccumulators:
  """Averages the workers' gradients of a step in shared accumulators.

  Every worker pushes its gradients (stamped with its step count) into one
  ConditionalAccumulator per variable, next to the variable; the chief takes
  the mean of all workers, applies it, and puts one token per other worker in
  a shared queue; the other workers' steps end by taking a token, so no worker
  starts a step before the previous update landed.

  The stamp is a per-worker count of synchronous steps, not the global step:
  a step skipped for inf/nan leaves the global step where it was, but the
  accumulators still count it, and a stamp behind their count is dropped as
  stale (the chief would then wait forever). The workers move in lockstep, so
  their counts agree.

  With automatic loss scaling the chief alone sees the averaged gradients, so
  it alone can tell a step to skip (inf/nan); each token carries its verdict
  (1: applied, 0: skipped), and the other workers record the one they take
  as theirs: their batch-norm statistics move only on an applied step.
  """

  def __init__(
    self, cluster: base.ClusterDevices, token_device: str, counter_device: str
  ):
    self.cluster = cluster
    self.token_device = token_device
    self.counter_device = counter_device

  def _step_counter(self) -> tf.Variable:
    # Created outside the caller's control scope: an initial value with
    # control inputs cannot be run by the initialiser.
    with tf.control_dependencies(None), tf.device(self.counter_device):
      return tf1.get_variable(
        'sync_step',
        initializer=tf.constant(0, tf.int64),
        trainable=False,
        use_resource=True,
        collections=[tf1.GraphKeys.LOCAL_VARIABLES],
      )

  def step(self, grads_and_vars, apply_fn, loss_scale=None) -> tf.Operation:
    """Ops of one synchronous step; apply_fn(grads_and_vars) -> update op.

    loss_scale: the automatic LossScale whose verdict on this step the
    tokens carry (see the class), or None.
    """
    num_workers = self.cluster.num_workers
    counter = self._step_counter()
    with tf.device(self.counter_device):
      stamp = tf.identity(counter.read_value())
    grads_and_vars = list(grads_and_vars)
    grads = [g for g, _ in grads_and_vars]
    if self.cluster.pack_transfers:  # one transfer per ps task, not per grad
      grads = transfers.packed_transfer(
        grads,
        [self.counter_device] * len(grads),
        [v.device for _, v in grads_and_vars],
      )
    pushes, accumulators = [], []
    for grad, (_, var) in zip(grads, grads_and_vars):
      with tf.device(var.device):
        acc = tf1.ConditionalAccumulator(
          grad.dtype,
          shape=var.shape,
          shared_name='sync_acc/' + var.op.name,
          name='sync_acc/' + var.op.name.replace(':', '_'),
        )
        pushes.append(acc.apply_grad(grad, local_step=stamp))
        accumulators.append(acc)
    with tf.device(self.counter_device), tf.control_dependencies(pushes):
      count = counter.assign_add(1)
    with tf.device(self.token_device):
      tokens = tf1.FIFOQueue(
        -1,
        [tf.int32],
        shapes=[[]],
        shared_name='sync_tokens',
        name='sync_tokens',
      )
    if not self.cluster.is_chief:
      with tf.control_dependencies(pushes):
        token = tokens.dequeue()
      if loss_scale is not None:
        with tf.device(self.counter_device):
          loss_scale.record_verdict(token > 0)
      return tf.group(token, count, name='sync_wait')
    means = []
    with tf.control_dependencies(pushes):
      for acc, (_, var) in zip(accumulators, grads_and_vars):
        with tf.device(var.device):
          means.append((acc.take_grad(num_workers), var))
    update = apply_fn(means)
    with tf.control_dependencies([update]):
      verdict = (
        tf.constant(1, tf.int32)
        if loss_scale is None
        else tf.cast(loss_scale.step_verdict(), tf.int32)
      )
      release = tokens.enqueue_many([tf.fill([num_workers - 1], verdict)])
    return tf.group(update, release, count, name='sync_apply')


@dataclasses.dataclass(frozen=True)
class _LossSlot:
  """Stands for a variable in SyncAccumulators: where the loss is averaged.

  The accumulators need only a variable's device, shape and name.
  """

  device: str
  shape: tf.TensorShape = tf.TensorShape([])
  op: object = dataclasses.field(default_factory=lambda: _Named('cluster_loss'))


@dataclasses.dataclass(frozen=True)
class _Named:
  name: str


class PsClusterMixin:
  """What the managers whose shared variables sit on ps tasks have in common.

  Put it first among the bases (class M(PsClusterMixin, SomeManager)); it
  has no __init__ and reads only what VariableMgr.__init__ sets (`cluster`,
  `cpu_device`), so the manager's own __init__ simply calls super().

  The chief initialises every variable, another worker only its own (the
  shared ones it waits for); the global step lives on the first ps task;
  a checkpoint holds the shared copy of a variable, not a tower's cache of
  it. Updates of shared variables are averaged over the workers
  (SyncAccumulators) or applied by each worker alone (async).
  """

  cluster: base.ClusterDevices
  # Set by _sync_or_async (see there).
  applied_grads: list | None = None

  @property
  def ps_devices(self) -> tuple:
    """One device per ps task."""
    return tuple(self.cluster.ps_devices)

  @property
  def global_step_device(self) -> str:
    return self.ps_devices[0]

  def initialized_variables(self):
    if self.cluster.is_chief:
      return tf1.global_variables()
    return [
      v
      for v in tf1.global_variables()
      if base.on_task(v, self.cluster.worker_device)
    ]

  def shared_variables(self):
    return [
      v
      for v in tf1.global_variables()
      if not base.on_task(v, self.cluster.worker_device)
    ]

  def savable_variables(self):
    # The ps copy 'v/NAME' (and its optimizer slots) is the variable; a
    # tower's copy, where there is one, is a cache of it.
    saved = super().savable_variables()
    saved.update(base.shared_copy_variables())  # the copy replaces the cache
    return saved

  def _apply(self, grads_and_vars, make_optimizer, global_step, clip_norm):
    if clip_norm is not None:
      grads_and_vars = base.clip_by_global_norm(grads_and_vars, clip_norm)
    return make_optimizer().apply_gradients(
      grads_and_vars, global_step=global_step
    )

  def _sync_or_async(
    self,
    grads_and_vars,
    make_optimizer,
    global_step,
    clip_norm,
    guard=None,
    loss=None,
    loss_scale=None,
  ):
    """The update: averaged over workers (sync) or this worker's own.

    global_step: moved by the update, or None to leave it alone.
    guard(grads_and_vars, apply) -> op wraps the apply in the loss-scale
    check; it runs where the apply runs (the chief, in sync mode).
    loss: this worker's loss; in sync mode it is averaged with the
    gradients (one more scalar accumulator), and the chief's
    `cluster_loss` is the mean.
    loss_scale: the LossScale `guard` checks with; in sync mode the other
    workers learn the chief's verdict from it (see SyncAccumulators).
    Sets `applied_grads`: the gradients the update receives here (before
    unscaling and clipping), or None where none is applied (a non-chief
    worker in sync mode).
    """
    self.applied_grads = None

    def apply(gvs):
      return self._apply(gvs, make_optimizer, global_step, clip_norm)

    def apply_fn(gvs):
      self.applied_grads = list(gvs)
      return guard(gvs, apply) if guard else apply(gvs)

    if not (self.cluster.cross_replica_sync and self.cluster.num_workers > 1):
      return apply_fn(grads_and_vars)
    if loss is not None:
      grads_and_vars = list(grads_and_vars) + [
        (
          tf.reshape(tf.cast(loss, tf.float32), []),
          _LossSlot(self.ps_devices[0]),
        )
      ]

      def apply_fn_and_loss(means):
        self.cluster_loss = means[-1][0]
        return apply_fn(means[:-1])

    auto = loss_scale if loss_scale and loss_scale.config.auto else None
    return SyncAccumulators(
      self.cluster, self.ps_devices[0], self.cpu_device
    ).step(
      grads_and_vars,
      apply_fn_and_loss if loss is not None else apply_fn,
      loss_scale=auto,
    )

  def _report_applied_norm(self, loss_scale, clip_norm) -> None:
    """applied_gradient_norm from what _sync_or_async applied here."""
    if self.applied_grads:
      self.applied_gradient_norm = base.applied_norm(
        self.applied_grads, self.cpu_device, loss_scale, clip_norm
      )

  def _loss_scale_guard(self, loss_scale):
    """guard for _sync_or_async: unscale, check, skip on inf/nan, adjust.

    The scale lives on the global step's device (a ps task), shared by all
    workers: the one process that applies the update also moves the scale.
    """
    if loss_scale is None:
      return None

    def guard(grads_and_vars, apply):
      return loss_scale.guarded_update(
        [(self.global_step_device, grads_and_vars)],
        lambda sites: [apply(sites[0][1])],
      )

    return guard


def _all_grads(tower_grads) -> list:
  """Every gradient of the step: updates wait for them (see base).

  In place updates of a variable must not land while this worker (or, in
  sync mode, any worker: the chief waits for every worker's push) still reads
  the old value for another layer's backprop.
  """
  return [g for grads in tower_grads for g, _ in grads]


def _local_means(tower_grads, device):
  """Per variable: the mean of this worker's towers' gradients, on `device`."""
  out = []
  with tf.device(device):
    for grads_and_vars in zip(*tower_grads):
      out.append(
        (base.mean_of([g for g, _ in grads_and_vars]), grads_and_vars[0][1])
      )
  return out


def _requested_shape(getter_kwargs) -> tf.TensorShape:
  """The shape a variable getter is asked for (the initializer's if none)."""
  shape = getter_kwargs.get('shape')
  initializer = getter_kwargs.get('initializer')
  if shape is None and hasattr(initializer, 'shape'):
    shape = initializer.shape
  return tf.TensorShape(shape)


def _requested_bytes(getter_kwargs) -> int:
  """Bytes of the variable a getter is asked for (see sizes.num_bytes)."""
  return sizes.num_bytes(
    _requested_shape(getter_kwargs), getter_kwargs.get('dtype') or tf.float32
  )


@register_cluster_variant
class ClusterParameterServer(PsClusterMixin, local.ParameterServer):
  """parameter_server across workers: the variables on the ps tasks."""

  name = 'parameter_server'
  traits = Traits(runs_local=False, runs_in_cluster=True, needs_ps=True)

  def __init__(
    self,
    tower_devices,
    *,
    cluster: base.ClusterDevices,
    partition_threshold_bytes: int = 0,
    **kwargs,
  ):
    super().__init__(
      tower_devices,
      param_devices=cluster.ps_devices,
      cpu_device=cluster.worker_cpu_device,
      cluster=cluster,
      **kwargs,
    )
    self.partition_threshold_bytes = partition_threshold_bytes
    self._parts = {}  # variable name -> its part variables
    self._reads = None  # transfers.PackedReads of the graph being built

  @classmethod
  def from_params(cls, params, tower_devices, cluster=None):
    return cls(
      tower_devices,
      cluster=cluster,
      partition_threshold_bytes=params.ps_partition_threshold_bytes,
      use_resource_vars=params.use_resource_vars,
    )

  def prepare_towers(self, build_forward):
    """With packed transfers: creates the variables, then reads them packed.

    Every tower of this worker then reads the worker's packed copy (one
    transfer per ps task and dtype per step) instead of each variable from
    its ps task (one RPC per variable per step).
    """
    self._reads = None
    if not self.cluster.pack_transfers:
      return
    # Its ops never run; on this worker's CPU, so that a GPU graph's
    # kernel check does not count them.
    with tf1.name_scope('variable_creation'):
      with self._variable_scope(
        self.cpu_device, reuse=False, auxiliary_name_scope=False
      ):
        build_forward()
    shared = [
      v
      for v in tf1.trainable_variables()
      if v.op.name.startswith(naming.SHARED_PREFIX)
    ]
    with tf.device(self.cpu_device):
      self._reads = transfers.PackedReads(shared, self.cpu_device)

  def _packed(self):
    """The PackedReads towers read from now, or None (direct reads)."""
    return self._reads if self._reads and self._reads.active() else None

  @contextlib.contextmanager
  def tower_scope(self, index: int):
    with tf1.name_scope('tower_%d' % index):
      packed = self._packed() is not None  # the variables exist
      with self._variable_scope(
        self.tower_devices[index],
        reuse=packed or index > 0,
        auxiliary_name_scope=index == 0,
      ):
        yield

  @contextlib.contextmanager
  def _variable_scope(self, device: str, reuse: bool, auxiliary_name_scope):
    """The shared variable scope, variables on the ps, ops on `device`."""
    if self._packed() is not None:
      getter = self._packed_getter
    elif self.partition_threshold_bytes and len(self.ps_devices) > 1:
      getter = self._partitioning_getter
    else:
      getter = None
    with tf1.variable_scope(
      naming.SHARED_SCOPE,
      reuse=reuse,
      custom_getter=getter,
      use_resource=self.use_resource_vars,
      auxiliary_name_scope=auxiliary_name_scope,
    ):
      with tf1.device(self.placer.device_fn(device)):
        yield

  def _packed_getter(self, getter, name, *args, **kwargs):
    """A variable's packed read (a split variable: its parts' reads joined)."""
    reads = self._packed()
    if name in self._parts:
      return tf.concat([reads.value(p) for p in self._parts[name]], 0)
    return reads.value(getter(name, *args, **kwargs))

  def tower_weights(self, index, variables):
    reads = self._packed()
    if reads is None:
      return super().tower_weights(index, variables)
    return [reads.value(v) for v in variables]

  def _partitioning_getter(self, getter, name, *args, **kwargs):
    """Splits a big trainable variable along axis 0 over the ps tasks.

    The parts are variables 'NAME/part_K' on ps task K; the model gets their
    concatenation (read on the tower's device), so it never knows.
    """
    if name not in self._parts:
      num = self._num_parts(kwargs)
      if num < 2:
        return getter(name, *args, **kwargs)
      self._parts[name] = self._make_parts(getter, name, num, kwargs)
    return tf.concat([p.read_value() for p in self._parts[name]], 0)

  def _num_parts(self, kwargs) -> int:
    """How many parts a new variable is split into (1: not split)."""
    shape = _requested_shape(kwargs)
    if (
      not kwargs.get('trainable', True)
      or not hasattr(kwargs.get('initializer'), 'shape')
      or not shape.rank
      or shape[0] is None
      or _requested_bytes(kwargs) <= self.partition_threshold_bytes
    ):
      return 1
    return min(len(self.ps_devices), shape[0])

  def _make_parts(self, getter, name, num, kwargs):
    initializer = kwargs['initializer']
    rows = sizes.even_sizes(_requested_shape(kwargs)[0], num)
    parts, start = [], 0
    for k, count in enumerate(rows):
      part_kwargs = dict(
        kwargs, shape=None, initializer=initializer[start : start + count]
      )
      # Not the byte-balancing placer: part K goes to ps task K.
      with tf1.device(None), tf.device(self.ps_devices[k]):
        parts.append(getter('%s/part_%d' % (name, k), **part_kwargs))
      start += count
    return parts

  def stat_update_ops(self, tower_update_ops):
    # One shared copy of the moving statistics for the whole cluster: as in
    # a local run, only the first tower (the chief's tower 0, global tower
    # 0) updates it; every worker updating it would apply the decay once per
    # worker per step, in a racy read-modify-write.
    if not self.cluster.is_chief:
      return []
    return super().stat_update_ops(tower_update_ops)

  def describe(self) -> str:
    split = (
      ', variables > %d bytes split over the ps tasks'
      % self.partition_threshold_bytes
      if self.partition_threshold_bytes
      else ''
    )
    return '%s (variables on %d ps task(s), %s%s)' % (
      self.name,
      len(self.ps_devices),
      'sync' if self.cluster.cross_replica_sync else 'async',
      split,
    )

  def build_train_op(
    self,
    tower_grads,
    make_optimizer,
    global_step,
    clip_norm=None,
    loss_scale=None,
    loss=None,
  ):
    # Average this worker's towers locally, so each gradient crosses once.
    means = _local_means(tower_grads, self.cpu_device)
    with tf.control_dependencies(_all_grads(tower_grads)):
      train_op = tf.group(
        self._sync_or_async(
          means,
          make_optimizer,
          global_step,
          clip_norm,
          guard=self._loss_scale_guard(loss_scale),
          loss=loss,
          loss_scale=loss_scale,
        ),
        name='train_op',
      )
    self._report_applied_norm(loss_scale, clip_norm)
    return train_op


@register
class DistributedReplicated(PsClusterMixin, base.PerTowerCopies):
  """A copy per tower on each worker; the shared copy ('v/...') on the ps."""

  name = 'distributed_replicated'
  traits = Traits(runs_local=False, runs_in_cluster=True, needs_ps=True)

  def __init__(self, tower_devices, *, cluster: base.ClusterDevices, **kwargs):
    super().__init__(
      tower_devices,
      cpu_device=cluster.worker_cpu_device,
      cluster=cluster,
      **kwargs,
    )
    self._placer = local.GreedyVariablePlacer(self.ps_devices)
    self._ps_copies = {}  # relative name -> the shared copy on a ps task

  def describe(self) -> str:
    return '%s (shared copy on %d ps task(s), %s)' % (
      self.name,
      len(self.ps_devices),
      'sync' if self.cluster.cross_replica_sync else 'async',
    )

  def _ps_copy(self, relative, v0):
    """The shared copy of tower 0's variable v0 (created once)."""
    if relative not in self._ps_copies:
      device = self._placer.place(sizes.num_bytes(v0.shape, v0.dtype))
      with tf.device(device), tf1.name_scope(None):
        self._ps_copies[relative] = tf1.Variable(
          v0.initial_value,
          trainable=False,
          name=naming.shared_name(relative),
          use_resource=self.use_resource_vars,
        )
    return self._ps_copies[relative]

  def build_train_op(
    self,
    tower_grads,
    make_optimizer,
    global_step,
    clip_norm=None,
    loss_scale=None,
    loss=None,
  ):
    means = _local_means(tower_grads, self.cpu_device)
    relatives = [
      naming.relative_name(v.op.name, self.variable_prefix(0)) for _, v in means
    ]
    shared = [
      (g, self._ps_copy(relative, v))
      for relative, (g, v) in zip(relatives, means)
    ]
    with tf.control_dependencies(_all_grads(tower_grads)):
      update = self._sync_or_async(
        shared,
        make_optimizer,
        global_step,
        clip_norm,
        guard=self._loss_scale_guard(loss_scale),
        loss=loss,
        loss_scale=loss_scale,
      )
    self._report_applied_norm(loss_scale, clip_norm)
    with tf.control_dependencies([update]):
      copies = self._copy_back(relatives)
    return tf.group(update, *copies, name='train_op')

  def _copy_back(self, relatives):
    """Every tower's copy of each variable named <- its shared copy."""
    tower_copies = base.tower_copies(tf1.global_variables(), self.num_towers)
    shared = [self._ps_copies[relative] for relative in relatives]
    reads = transfers.PackedReads(
      shared, self.cpu_device, pack=self.cluster.pack_transfers
    )
    ops = []
    for relative, var in zip(relatives, shared):
      value = reads.value(var)
      for device, target in zip(self.tower_devices, tower_copies[relative]):
        with tf.device(device):
          ops.append(target.assign(value))
    return ops

  def post_init_ops(self):
    # Forward only: no shared copies, nothing to copy.
    return self._copy_back(list(self._ps_copies))


@register
class DistributedAllReduce(local.Replicated):
  """Replicated over every tower of every worker, run by one controller."""

  name = 'distributed_all_reduce'
  traits = Traits(
    runs_local=False, runs_in_cluster=True, one_graph=True, all_reduce=True
  )

  def __init__(self, tower_devices, *, cluster: base.ClusterDevices, **kwargs):
    # The controller's ops outside the towers run on worker 0's CPU.
    super().__init__(
      tower_devices,
      cpu_device=base.cpu_of_task(cluster.worker_devices[0]),
      cluster=cluster,
      **kwargs,
    )


@register
class CollectiveAllReduce(base.PerTowerCopies):
  """Per-worker graphs; gradients averaged by collectives over all towers."""

  name = 'collective_all_reduce'
  traits = Traits(
    runs_local=False,
    runs_in_cluster=True,
    cross_worker_ops=True,
    collective_spec=True,
  )

  def __init__(
    self,
    tower_devices,
    *,
    cluster: base.ClusterDevices,
    merge_scope: int = 1,
    subdivs: int = -1,
    **kwargs,
  ):
    tower_devices = [
      collectives.device_on_task(cluster.worker_device, d)
      for d in tower_devices
    ]
    super().__init__(
      tower_devices,
      cpu_device=cluster.worker_cpu_device,
      cluster=cluster,
      **kwargs,
    )
    self.group = collectives.collective_group(self.tower_devices, cluster)
    self.merge_scope = merge_scope
    self.subdivs = subdivs

  @classmethod
  def from_params(cls, params, tower_devices, cluster=None):
    # --all_reduce_spec=collective#N (params checked it is that or unset).
    spec = params.all_reduce_spec
    return cls(
      tower_devices,
      cluster=cluster,
      merge_scope=params.allreduce_merge_scope,
      subdivs=int(spec.partition('#')[2]) if spec and '#' in spec else -1,
      use_resource_vars=params.use_resource_vars,
    )

  def all_reduce_description(self):
    return 'CollectiveReduceV2 over %d device(s)%s' % (
      len(self.group),
      '' if self.subdivs < 0 else ', %d subdivision(s)' % self.subdivs,
    )

  def reduce_gradients(self, tower_grads):
    per_tower = collectives.collective_means_per_tower(
      tower_grads,
      self.tower_devices,
      self.group,
      merge_scope=self.merge_scope,
      subdivs=self.subdivs,
    )
    return base.Reduction(
      [(d, gv) for d, gv in zip(self.tower_devices, per_tower)]
    )

  def build_train_op(
    self,
    tower_grads,
    make_optimizer,
    global_step,
    clip_norm=None,
    loss_scale=None,
    loss=None,
  ):
    train_op = super().build_train_op(
      tower_grads, make_optimizer, global_step, clip_norm, loss_scale
    )
    return self._with_cluster_loss(train_op, loss)

  def _with_cluster_loss(self, train_op, loss):
    """train_op, also averaging `loss` over every worker (cluster_loss)."""
    if loss is None:
      return train_op
    means = collectives.collective_mean_loss(
      loss, self.tower_devices, self.group
    )
    self.cluster_loss = means[0]
    return tf.group(train_op, *means, name='train_op_and_loss')

  def post_init_ops(self):
    return collectives.broadcast_tower_copies(
      self.num_towers, self.tower_devices, self.group, self.cluster.is_chief
    )


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

  def count_step(self, global_step):
    """Moves the global step (not on a skipped step) and the loss scale."""
    if self.finite is None:
      return global_step.assign_add(1)
    return tf.group(
      global_step.assign_add(tf.cast(self.finite, tf.int64)),
      self.loss_scale.adjust(self.finite),
    )


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
    mins = collectives.collective_min(
      offer, self.mgr.tower_devices, self.mgr.group
    )
    self.big_sq = mins[0]

  def _clip_factor(self):
    if self._factor is None:
      if self.big_sq is None:
        self.receive_ps_norm()
      with tf.device(self.mgr.cpu_device):
        norm = tf.sqrt(self.small_sq + self.big_sq)
        self._factor = self.clip_norm / tf.maximum(norm, self.clip_norm)
    return self._factor


@register
class Hybrid(PsClusterMixin, base.PerTowerCopies):
  """Big variables on the ps (synchronised), small ones all-reduced.

  A variable of more than `threshold_bytes` has one shared copy, 'v/name',
  on a ps task (balanced by bytes) that every tower reads; a smaller one has
  a copy per tower, 'vI/name', whose gradients are averaged with
  collectives over every tower of every worker.
  """

  name = 'hybrid'
  traits = Traits(
    runs_local=False, runs_in_cluster=True, needs_ps=True, cross_worker_ops=True
  )

  def __init__(
    self,
    tower_devices,
    *,
    cluster: base.ClusterDevices,
    threshold_bytes: int = 1 << 20,
    **kwargs,
  ):
    super().__init__(
      tower_devices,
      cpu_device=cluster.worker_cpu_device,
      cluster=cluster,
      **kwargs,
    )
    self.threshold_bytes = threshold_bytes
    self.group = collectives.collective_group(self.tower_devices, cluster)
    self._placer = local.GreedyVariablePlacer(self.ps_devices)
    self._shared = {}  # relative name -> ps variable
    self._tower_vars = [[] for _ in self.tower_devices]

  @classmethod
  def from_params(cls, params, tower_devices, cluster=None):
    return cls(
      tower_devices,
      cluster=cluster,
      threshold_bytes=params.hybrid_threshold_bytes,
      use_resource_vars=params.use_resource_vars,
    )

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
    return 'CollectiveReduceV2 over %d device(s)' % len(self.group)

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
    num_bytes = _requested_bytes(kwargs)
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

  def build_train_op(
    self,
    tower_grads,
    make_optimizer,
    global_step,
    clip_norm=None,
    loss_scale=None,
    loss=None,
  ):
    with tf.control_dependencies(_all_grads(tower_grads)):
      sites, means = self._reduce(tower_grads)
      if loss_scale is not None:
        # Every worker's scale is its own variable (on its step counter's
        # device) but moves identically: each worker sees the same decision.
        sites = [loss_scale.unscale(gv) for gv in sites]
        means = loss_scale.unscale(means)
      guard = self._skip_guard(loss_scale, sites, means)
      clip = _HybridClip(self, clip_norm, sites[0] if sites else [])
      # The ps update first: with clipping, it learns the ps-held group's
      # share of the global norm that the towers' updates need too.
      ps_updates = (
        [self._ps_update(means, make_optimizer, clip, guard)] if means else []
      )
      updates = (
        guard.run(lambda: self._tower_updates(sites, make_optimizer, clip))
        if sites
        else []
      ) + ps_updates
      if means:
        updates.append(self._end_of_step_barrier(updates))
      with tf.device(self.global_step_device), tf.control_dependencies(updates):
        bump = guard.count_step(global_step)
      train_op = tf.group(*updates, bump, name='train_op')
    self._report_hybrid_norm(sites, means, clip_norm)
    if loss is None:
      return train_op
    means = collectives.collective_mean_loss(
      loss, self.tower_devices, self.group
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
    self.applied_gradient_norm = base.applied_norm(
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
        small, self.tower_devices, self.group
      )
      if small[0]
      else []
    )
    means = _local_means(big, self.cpu_device) if big[0] else []
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

  def _ps_update(self, means, make_optimizer, clip, guard):
    """The ps-held variables' update (averaged over workers if sync)."""

    def guarded(gvs, apply):
      # Where the update is applied (the chief, if sync): the averaged
      # gradients are known here, and clip learns their norm.
      gvs = clip.clipped(gvs, ps_group=True)
      return tf.group(*guard.run(lambda: [apply(gvs)]))

    # Its own name scope: the ps optimizer's non-slot variables (Adam's beta
    # powers) must not share tower 0's checkpoint names ('v0/beta1_power'
    # is saved as 'beta1_power'), or only one of them would be saved.
    with tf1.name_scope(PS_OPTIMIZER_SCOPE):
      update = self._sync_or_async(
        means, make_optimizer, None, None, guard=guarded
      )
    clip.receive_ps_norm()  # a worker that did not apply: gets the norm
    return update

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
    verdicts = collectives.collective_min(
      tf.cast(local_ok, tf.float32), self.tower_devices, self.group
    )
    with tf.device(self.cpu_device):
      return verdicts[0] > 0.5

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
      *collectives.collective_min(done, self.tower_devices, self.group),
      name='step_barrier',
    )

  def post_init_ops(self):
    return collectives.broadcast_tower_copies(
      self.num_towers, self.tower_devices, self.group, self.cluster.is_chief
    )
