"""What the cluster managers whose shared variables sit on ps tasks share.

SyncAccumulators: the workers' gradients of a step averaged in shared
  accumulators next to each variable, one update, tokens for the others.
PsClusterMixin: initialisation, checkpoints, the sync-or-async update, the
  compressed push (a cast, --gradient_compression) and the loss-scale guard
  of parameter_server (cluster), distributed_replicated and hybrid.

Variables shared between workers are found by name and device: every worker
builds the same names on the same ps devices, so their graphs use one copy.
"""

from __future__ import annotations

import dataclasses
import functools

import tensorflow as tf

from variable_mgr import base
from variable_mgr import naming
from variable_mgr import transfers
from variable_mgr.compression import registry as compression_registry

tf1 = tf.compat.v1


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
    self,
    cluster: base.ClusterDevices,
    token_device: str,
    counter_device: str,
    compressor=None,
  ):
    self.cluster = cluster
    self.token_device = token_device
    self.counter_device = counter_device
    # Casts the pushes (compression.base.Compressor.push); None: as they are.
    self.compressor = compressor

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
    grads = self._sent(grads_and_vars)
    if self.cluster.pack_transfers:  # one transfer per ps task, not per grad
      grads = transfers.packed_transfer(
        grads,
        [self.counter_device] * len(grads),
        [v.device for _, v in grads_and_vars],
      )
    pushes, accumulators = [], []
    for grad, (original, var) in zip(grads, grads_and_vars):
      push, acc = self._push(grad, original.dtype, var, stamp)
      pushes.append(push)
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

  def _push(self, sent, dtype, var, stamp):
    """(the push of one sent gradient into its accumulator, the
    accumulator), beside `var`; a compressed gradient is made `dtype` there
    first (the accumulators add float32)."""
    if self.compressor is not None:
      sent = self.compressor.pull(sent, dtype, var.device)
    with tf.device(var.device):
      acc = tf1.ConditionalAccumulator(
        sent.dtype,
        shape=var.shape,
        shared_name='sync_acc/' + var.op.name,
        name='sync_acc/' + var.op.name.replace(':', '_'),
      )
      return acc.apply_grad(sent, local_step=stamp), acc

  def _sent(self, grads_and_vars) -> list:
    """The gradients as this worker sends them: the variables' compressed
    (the loss slot's as it is)."""
    grads = [g for g, _ in grads_and_vars]
    if self.compressor is None:
      return grads
    indices = [
      k
      for k, (_, v) in enumerate(grads_and_vars)
      if not isinstance(v, _LossSlot)
    ]
    sent = self.compressor.push(
      [grads[k] for k in indices],
      self.counter_device,
      self.cluster.task_index,
      [
        naming.strip_replica_prefix(grads_and_vars[k][1].op.name)
        for k in indices
      ],
    )
    for k, tensor in zip(indices, sent):
      grads[k] = tensor
    return grads


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
  # How the pushes travel (a cast or none; the manager sets its own).
  compressor = compression_registry.create('none')

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
      return apply_fn(self._pushed(grads_and_vars))
    if loss is not None:  # a scalar, or a vector of per-worker means
      loss = tf.cast(loss, tf.float32)
      grads_and_vars = list(grads_and_vars) + [
        (loss, _LossSlot(self.ps_devices[0], loss.shape))
      ]

      def apply_fn_and_loss(means):
        self.cluster_loss = means[-1][0]
        return apply_fn(means[:-1])

    auto = loss_scale if loss_scale and loss_scale.config.auto else None
    return SyncAccumulators(
      self.cluster, self.ps_devices[0], self.cpu_device, self.compressor
    ).step(
      grads_and_vars,
      apply_fn_and_loss if loss is not None else apply_fn,
      loss_scale=auto,
    )

  def _pushed(self, grads_and_vars) -> list:
    """grads_and_vars as the variables receive them: compressed on this
    worker, decompressed beside each variable."""
    grads_and_vars = list(grads_and_vars)
    sent = self.compressor.push(
      [g for g, _ in grads_and_vars],
      self.cpu_device,
      self.cluster.task_index,
      [naming.strip_replica_prefix(v.op.name) for _, v in grads_and_vars],
    )
    return [
      (self.compressor.pull(s, g.dtype, v.device), v)
      for s, (g, v) in zip(sent, grads_and_vars)
    ]

  def _shared_update(self, grads_and_vars, step_update) -> tf.Operation:
    """The update of ps-held variables for a whole step_update: guarded by
    its loss scale, synchronised or not, its applied norm reported."""
    update = self._sync_or_async(
      grads_and_vars,
      step_update.make_optimizer,
      step_update.global_step,
      step_update.clip_norm,
      guard=self._loss_scale_guard(step_update.loss_scale),
      loss=step_update.loss,
      loss_scale=step_update.loss_scale,
    )
    self._report_applied_norm(step_update.loss_scale, step_update.clip_norm)
    return update

  def _report_applied_norm(self, loss_scale, clip_norm) -> None:
    """applied_gradient_norm from what _sync_or_async applied here."""
    if self.applied_grads:
      self.applied_gradient_norm = functools.partial(
        base.applied_norm,
        self.applied_grads,
        self.cpu_device,
        loss_scale,
        clip_norm,
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


def all_grads(tower_grads) -> list:
  """Every gradient of the step: updates wait for them (see base).

  In place updates of a variable must not land while this worker (or, in
  sync mode, any worker: the chief waits for every worker's push) still reads
  the old value for another layer's backprop.
  """
  return [g for grads in tower_grads for g, _ in grads]


def local_means(tower_grads, device):
  """Per variable: the mean of this worker's towers' gradients, on `device`."""
  out = []
  with tf.device(device):
    for grads_and_vars in zip(*tower_grads):
      out.append(
        (base.mean_of([g for g, _ in grads_and_vars]), grads_and_vars[0][1])
      )
  return out
