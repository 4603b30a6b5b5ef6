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
hybrid (hybrid.py): variables above a size threshold on the ps
  (synchronised), the rest per-tower copies all-reduced with collectives.

What the ps-held managers share is in ps_cluster.py.
"""

from __future__ import annotations

import contextlib

import tensorflow as tf

from variable_mgr import base
from variable_mgr import catalog
from variable_mgr import collective_options
from variable_mgr import collectives
from variable_mgr import local
from variable_mgr import naming
from variable_mgr import ps_cluster
from variable_mgr import sizes
from variable_mgr import transfers
from variable_mgr.compression import catalog as compression_catalog
from variable_mgr.compression import registry as compression_registry
from variable_mgr.registry import register
from variable_mgr.registry import register_cluster_variant

tf1 = tf.compat.v1


@register_cluster_variant
class ClusterParameterServer(ps_cluster.PsClusterMixin, local.ParameterServer):
  """parameter_server across workers: the variables on the ps tasks."""

  name = 'parameter_server'
  traits = catalog.cluster_traits('parameter_server')
  settings_fields = {
    'partition_threshold_bytes': 'ps_partition_threshold_bytes',
    'compression': 'gradient_compression',
  }

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
    shape = sizes.requested_shape(kwargs)
    if (
      not kwargs.get('trainable', True)
      or not hasattr(kwargs.get('initializer'), 'shape')
      or not shape.rank
      or shape[0] is None
      or sizes.requested_bytes(kwargs) <= self.partition_threshold_bytes
    ):
      return 1
    return min(len(self.ps_devices), shape[0])

  def _make_parts(self, getter, name, num, kwargs):
    initializer = kwargs['initializer']
    rows = sizes.even_sizes(sizes.requested_shape(kwargs)[0], num)
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
    return '%s (variables on %d ps task(s), %s%s%s)' % (
      self.name,
      len(self.ps_devices),
      'sync' if self.cluster.cross_replica_sync else 'async',
      split,
      compression_registry.description_suffix(self.compressor),
    )

  def build_train_op(self, tower_grads, step_update: base.StepUpdate):
    # Average this worker's towers locally, so each gradient crosses once.
    means = ps_cluster.local_means(tower_grads, self.cpu_device)
    with tf.control_dependencies(
      base.all_done(ps_cluster.all_grads(tower_grads), 'gradients_ready')
    ):
      train_op = tf.group(
        self._shared_update(means, step_update), name='train_op'
      )
    return train_op


@register
class DistributedReplicated(ps_cluster.PsClusterMixin, base.PerTowerCopies):
  """A copy per tower on each worker; the shared copy ('v/...') on the ps."""

  name = 'distributed_replicated'
  traits = catalog.cluster_traits('distributed_replicated')
  settings_fields = {'compression': 'gradient_compression'}

  def __init__(
    self,
    tower_devices,
    *,
    cluster: base.ClusterDevices,
    compression: str = 'none',
    **kwargs,
  ):
    super().__init__(
      tower_devices,
      cpu_device=cluster.worker_cpu_device,
      cluster=cluster,
      **kwargs,
    )
    # A cast on the push to the shared copy (powersgd is refused).
    self.compressor = compression_registry.create(compression)
    self._placer = local.GreedyVariablePlacer(self.ps_devices)
    self._ps_copies = {}  # relative name -> the shared copy on a ps task

  def describe(self) -> str:
    return '%s (shared copy on %d ps task(s), %s%s)' % (
      self.name,
      len(self.ps_devices),
      'sync' if self.cluster.cross_replica_sync else 'async',
      compression_registry.description_suffix(self.compressor),
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

  def build_train_op(self, tower_grads, step_update: base.StepUpdate):
    means = ps_cluster.local_means(tower_grads, self.cpu_device)
    relatives = [
      naming.relative_name(v.op.name, self.variable_prefix(0)) for _, v in means
    ]
    shared = [
      (g, self._ps_copy(relative, v))
      for relative, (g, v) in zip(relatives, means)
    ]
    with tf.control_dependencies(
      base.all_done(ps_cluster.all_grads(tower_grads), 'gradients_ready')
    ):
      update = self._shared_update(shared, step_update)
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
  traits = catalog.cluster_traits('distributed_all_reduce')

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
  traits = catalog.cluster_traits('collective_all_reduce')
  # --all_reduce_spec=collective[#N] or unset (resolution checked it).
  settings_fields = {
    'options': 'collective_reduce_options',
    'compression': 'gradient_compression',
    'powersgd_rank': 'powersgd_rank',
  }

  def __init__(
    self,
    tower_devices,
    *,
    cluster: base.ClusterDevices,
    options: collective_options.ReduceOptions | None = None,
    compression: str = 'none',
    powersgd_rank: int = compression_catalog.DEFAULT_POWERSGD_RANK,
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
    self.options = options or collective_options.ReduceOptions()
    self.compressor = compression_registry.create(compression, powersgd_rank)

  @property
  def implementation(self) -> str:
    """--collective_implementation (every collective op's hint follows)."""
    return self.options.implementation

  def all_reduce_description(self):
    subdivs = self.options.subdivs
    return '%s over %d device(s)%s%s%s' % (
      self.options.op_type,
      len(self.group),
      '' if subdivs < 0 else ', %d subdivision(s)' % subdivs,
      self.options.describe(self.group),
      compression_registry.description_suffix(self.compressor),
    )

  def reduce_gradients(self, tower_grads):
    per_tower = collectives.collective_means_per_tower(
      tower_grads,
      self.tower_devices,
      self.group,
      options=self.options,
      compressor=self.compressor,
      first_replica=self.cluster.task_index * self.num_towers,
      tower_prefixes=[self.variable_prefix(i) for i in range(self.num_towers)],
    )
    return base.Reduction(
      [(d, gv) for d, gv in zip(self.tower_devices, per_tower)]
    )

  def build_train_op(self, tower_grads, step_update: base.StepUpdate):
    train_op = super().build_train_op(tower_grads, step_update)
    return self._with_cluster_loss(train_op, step_update.loss)

  def _with_cluster_loss(self, train_op, loss):
    """train_op, also averaging `loss` over every worker (cluster_loss)."""
    if loss is None:
      return train_op
    means = collectives.collective_mean_loss(
      loss, self.tower_devices, self.group, self.implementation
    )
    self.cluster_loss = means[0]
    return tf.group(train_op, *means, name='train_op_and_loss')

  def post_init_ops(self):
    return collectives.broadcast_tower_copies(
      self.num_towers,
      self.tower_devices,
      self.group,
      self.cluster.is_chief,
      self.implementation,
    )

  def overwritten_after_init(self, index):
    # The broadcast writes the chief's tower 0 over every other copy.
    return index > 0 or not self.cluster.is_chief

  def stat_update_ops(self, tower_update_ops):
    # As classically: each worker's tower 0 updates its moving statistics
    # (the chief's are the ones saved); the other towers' would be nearly
    # the same, and updating them is work for nothing.
    return list(tower_update_ops[0])
