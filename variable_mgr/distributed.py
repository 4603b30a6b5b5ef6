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

import tensorflow as tf

from variable_mgr import base
from variable_mgr import collective_keys
from variable_mgr import local
from variable_mgr.registry import register
from variable_mgr.registry import register_cluster_variant

tf1 = tf.compat.v1

# Collectives of one step wait at most this long for their peers; a lost peer
# is normally reported sooner by the cluster watchdog.
COLLECTIVE_TIMEOUT_S = 50.0


def _device_of(task_prefix: str, tower_device: str) -> str:
  """`tower_device` (e.g. /cpu:1) moved onto the task `task_prefix`."""
  spec = tf.DeviceSpec.from_string(tower_device)
  task = tf.DeviceSpec.from_string(task_prefix)
  return spec.replace(job=task.job, replica=0, task=task.task).to_string()


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
  """

  def __init__(self, cluster: base.ClusterDevices, token_device: str,
               counter_device: str):
    self.cluster = cluster
    self.token_device = token_device
    self.counter_device = counter_device

  def _step_counter(self) -> tf.Variable:
    # Created outside the caller's control scope: an initial value with
    # control inputs cannot be run by the initialiser.
    with tf.control_dependencies(None), tf.device(self.counter_device):
      return tf1.get_variable(
          'sync_step', initializer=tf.constant(0, tf.int64), trainable=False,
          use_resource=True, collections=[tf1.GraphKeys.LOCAL_VARIABLES])

  def step(self, grads_and_vars, apply_fn) -> tf.Operation:
    """Ops of one synchronous step; apply_fn(grads_and_vars) -> update op."""
    num_workers = self.cluster.num_workers
    counter = self._step_counter()
    with tf.device(self.counter_device):
      stamp = tf.identity(counter.read_value())
    pushes, accumulators = [], []
    for grad, var in grads_and_vars:
      with tf.device(var.device):
        acc = tf1.ConditionalAccumulator(
            grad.dtype, shape=var.shape, shared_name='sync_acc/' + var.op.name,
            name='sync_acc/' + var.op.name.replace(':', '_'))
        pushes.append(acc.apply_grad(grad, local_step=stamp))
        accumulators.append(acc)
    with tf.device(self.counter_device), tf.control_dependencies(pushes):
      count = counter.assign_add(1)
    with tf.device(self.token_device):
      tokens = tf1.FIFOQueue(-1, [tf.int32], shapes=[[]],
                             shared_name='sync_tokens', name='sync_tokens')
    if not self.cluster.is_chief:
      with tf.control_dependencies(pushes):
        return tf.group(tokens.dequeue(), count, name='sync_wait')
    means = []
    with tf.control_dependencies(pushes):
      for acc, (_, var) in zip(accumulators, grads_and_vars):
        with tf.device(var.device):
          means.append((acc.take_grad(num_workers), var))
    update = apply_fn(means)
    with tf.control_dependencies([update]):
      release = tokens.enqueue_many([tf.zeros([num_workers - 1], tf.int32)])
    return tf.group(update, release, count, name='sync_apply')


class _ClusterMixin:
  """Initialisation rules shared by the managers whose variables sit on ps."""

  cluster: base.ClusterDevices

  def initialized_variables(self):
    if self.cluster.is_chief:
      return tf1.global_variables()
    return [v for v in tf1.global_variables()
            if base.on_task(v, self.cluster.worker_device)]

  def shared_variables(self):
    return [v for v in tf1.global_variables()
            if not base.on_task(v, self.cluster.worker_device)]

  @property
  def workers_in_lockstep(self) -> bool:
    return self.cluster.cross_replica_sync

  def _apply(self, grads_and_vars, make_optimizer, global_step, clip_norm):
    if clip_norm is not None:
      grads_and_vars = base.clip_by_global_norm(grads_and_vars, clip_norm)
    return make_optimizer().apply_gradients(grads_and_vars,
                                            global_step=global_step)

  def _sync_or_async(self, grads_and_vars, make_optimizer, global_step,
                     clip_norm, *, bump_global_step=True, guard=None):
    """The update: averaged over workers (sync) or this worker's own.

    guard(grads_and_vars, apply) -> op wraps the apply in the loss-scale
    check; it runs where the apply runs (the chief, in sync mode).
    """
    def apply(gvs):
      return self._apply(gvs, make_optimizer,
                         global_step if bump_global_step else None, clip_norm)

    def apply_fn(gvs):
      return guard(gvs, apply) if guard else apply(gvs)
    if self.cluster.cross_replica_sync and self.cluster.num_workers > 1:
      return SyncAccumulators(self.cluster, self.ps_devices[0],
                              self.cpu_device).step(grads_and_vars, apply_fn)
    return apply_fn(grads_and_vars)

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
          lambda sites: [apply(sites[0][1])])
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
      out.append((base.mean_of([g for g, _ in grads_and_vars]),
                  grads_and_vars[0][1]))
  return out


@register_cluster_variant
class ClusterParameterServer(_ClusterMixin, local.ParameterServer):
  """parameter_server across workers: the variables on the ps tasks."""

  name = 'parameter_server'
  supports_cluster = True
  needs_ps = True

  def __init__(self, tower_devices, *, cluster: base.ClusterDevices,
               partition_threshold_bytes: int = 0, **kwargs):
    self.ps_devices = tuple(cluster.ps_devices)
    super().__init__(tower_devices, param_devices=self.ps_devices,
                     cpu_device=cluster.worker_device + '/device:CPU:0',
                     cluster=cluster, **kwargs)
    self.partition_threshold_bytes = partition_threshold_bytes
    self._parts = {}    # variable name -> its part variables

  @classmethod
  def from_params(cls, params, tower_devices, cluster=None):
    return cls(tower_devices, cluster=cluster,
               partition_threshold_bytes=params.ps_partition_threshold_bytes,
               use_resource_vars=params.use_resource_vars)

  @contextlib.contextmanager
  def tower_scope(self, index: int):
    getter = self._partitioning_getter if (
        self.partition_threshold_bytes and len(self.ps_devices) > 1) else None
    with tf1.name_scope('tower_%d' % index):
      with tf1.variable_scope('v', reuse=index > 0, custom_getter=getter,
                              use_resource=self.use_resource_vars,
                              auxiliary_name_scope=index == 0):
        with tf1.device(self.placer.device_fn(self.tower_devices[index])):
          yield

  def _partitioning_getter(self, getter, name, *args, **kwargs):
    """Splits a big trainable variable along axis 0 over the ps tasks.

    The parts are variables 'NAME/part_K' on ps task K; the model gets their
    concatenation (read on the tower's device), so it never knows.
    """
    initializer = kwargs.get('initializer')
    shape = kwargs.get('shape')
    if shape is None and hasattr(initializer, 'shape'):
      shape = initializer.shape
    shape = tf.TensorShape(shape)
    dtype = kwargs.get('dtype') or tf.float32
    num = min(len(self.ps_devices), shape[0] if shape.rank else 1)
    if (name not in self._parts and (
        not kwargs.get('trainable', True) or shape.rank is None or
        shape.rank < 1 or num < 2 or
        _bytes_of(shape, dtype) <= self.partition_threshold_bytes or
        not hasattr(initializer, 'shape'))):
      return getter(name, *args, **kwargs)
    if name not in self._parts:
      self._parts[name] = self._make_parts(getter, name, initializer, shape,
                                           num, kwargs)
    return tf.concat([p.read_value() for p in self._parts[name]], 0)

  def _make_parts(self, getter, name, initializer, shape, num, kwargs):
    rows = [shape[0] // num + (1 if k < shape[0] % num else 0)
            for k in range(num)]
    parts, start = [], 0
    for k, count in enumerate(rows):
      part_kwargs = dict(kwargs, shape=None,
                         initializer=initializer[start:start + count])
      # Not the byte-balancing placer: part K goes to ps task K.
      with tf1.device(None), tf.device(self.ps_devices[k]):
        parts.append(getter('%s/part_%d' % (name, k), **part_kwargs))
      start += count
    return parts

  @property
  def global_step_device(self) -> str:
    return self.ps_devices[0]

  def describe(self) -> str:
    split = (', variables > %d bytes split over the ps tasks'
             % self.partition_threshold_bytes
             if self.partition_threshold_bytes else '')
    return '%s (variables on %d ps task(s), %s%s)' % (
        self.name, len(self.ps_devices),
        'sync' if self.cluster.cross_replica_sync else 'async', split)

  def build_train_op(self, tower_grads, make_optimizer, global_step,
                     clip_norm=None, loss_scale=None):
    # Average this worker's towers locally, so each gradient crosses once.
    means = _local_means(tower_grads, self.cpu_device)
    with tf.control_dependencies(_all_grads(tower_grads)):
      return tf.group(self._sync_or_async(
          means, make_optimizer, global_step, clip_norm,
          guard=self._loss_scale_guard(loss_scale)), name='train_op')


@register
class DistributedReplicated(_ClusterMixin, local._PerTowerCopies):  # pylint: disable=protected-access
  """A copy per tower on each worker; the shared copy ('v/...') on the ps."""

  name = 'distributed_replicated'
  requires_cluster = True
  supports_cluster = True
  needs_ps = True

  def __init__(self, tower_devices, *, cluster: base.ClusterDevices,
               **kwargs):
    self.ps_devices = tuple(cluster.ps_devices)
    super().__init__(tower_devices,
                     cpu_device=cluster.worker_device + '/device:CPU:0',
                     cluster=cluster, **kwargs)
    self._placer = local.GreedyVariablePlacer(self.ps_devices)
    self._ps_copies = {}

  @classmethod
  def from_params(cls, params, tower_devices, cluster=None):
    return cls(tower_devices, cluster=cluster,
               use_resource_vars=params.use_resource_vars)

  @property
  def global_step_device(self) -> str:
    return self.ps_devices[0]

  def describe(self) -> str:
    return '%s (shared copy on %d ps task(s), %s)' % (
        self.name, len(self.ps_devices),
        'sync' if self.cluster.cross_replica_sync else 'async')

  def _ps_copy(self, v0):
    """The shared copy of tower 0's variable v0 (created once)."""
    rel = v0.op.name[len('v0/'):]
    if rel not in self._ps_copies:
      device = self._placer.device_fn(None)(v0.op)
      with tf.device(device), tf1.name_scope(None):
        self._ps_copies[rel] = tf1.Variable(
            v0.initial_value, trainable=False, name='v/' + rel,
            use_resource=self.use_resource_vars)
    return self._ps_copies[rel]

  def build_train_op(self, tower_grads, make_optimizer, global_step,
                     clip_norm=None, loss_scale=None):
    means = _local_means(tower_grads, self.cpu_device)
    shared = [(g, self._ps_copy(v)) for g, v in means]
    with tf.control_dependencies(_all_grads(tower_grads)):
      update = self._sync_or_async(
          shared, make_optimizer, global_step, clip_norm,
          guard=self._loss_scale_guard(loss_scale))
    with tf.control_dependencies([update]):
      copies = self._copy_back([v for _, v in means])
    return tf.group(update, *copies, name='train_op')

  def _copy_back(self, v0_vars):
    """Every tower's copy of each variable <- the shared copy."""
    ops = []
    for v0 in v0_vars:
      shared = self._ps_copies[v0.op.name[len('v0/'):]]
      with tf.device(self.cpu_device):
        value = tf.identity(shared.read_value())
      for i in range(self.num_towers):
        with tf.device(self.tower_devices[i]):
          target = v0 if i == 0 else self._tower_variable(i, v0)
          ops.append(target.assign(value))
    return ops

  def _tower_variable(self, index, v0):
    name = 'v%d/%s' % (index, v0.op.name[len('v0/'):])
    return [v for v in tf1.global_variables() if v.op.name == name][0]

  def post_init_ops(self):
    if not self._ps_copies:   # forward only: nothing shared to copy from
      return []
    v0_vars = [v for v in tf1.global_variables()
               if v.op.name[len('v0/'):] in self._ps_copies
               and v.op.name.startswith('v0/')]
    return self._copy_back(v0_vars)

  def savable_variables(self):
    # The ps copy (and its optimizer slots) is the variable; v0's is a cache.
    saved = super().savable_variables()
    saved.update(base.shared_copy_variables())
    return saved


@register
class DistributedAllReduce(local.Replicated):
  """Replicated over every tower of every worker, run by one controller."""

  name = 'distributed_all_reduce'
  requires_cluster = True
  supports_cluster = True
  needs_controller = True

  @classmethod
  def from_params(cls, params, tower_devices, cluster=None):
    sixteen_bit = (tf.float16 if params.use_fp16 else
                   tf.bfloat16 if params.use_bf16 else None)
    return cls(tower_devices,
               reducer=local.GradientReducer.from_params(params, sixteen_bit),
               relaxed=params.variable_consistency == 'relaxed',
               use_resource_vars=params.use_resource_vars,
               cpu_device=cluster.worker_devices[0] + '/device:CPU:0',
               cluster=cluster)


def collective_group(tower_devices, cluster: base.ClusterDevices) -> list:
  """Every worker's versions of this worker's tower devices, worker-major."""
  return [_device_of(w, d) for w in cluster.worker_devices
          for d in tower_devices]


def collective_reduce(tensors, tower_devices, group, keys, *,
                      merge_op: str = 'Add', final_op: str = 'Div') -> list:
  """CollectiveReduceV2 of `tensors` (one per local tower) over `group`.

  Defaults give the mean; merge_op='Min', final_op='Id' the minimum.
  """
  group_key = keys.get_group_key(group)
  instance_key = keys.get_instance_key()
  out = []
  for t, d in zip(tensors, tower_devices):
    with tf.device(d):
      out.append(tf.raw_ops.CollectiveReduceV2(
          input=t, group_size=len(group), group_key=group_key,
          instance_key=instance_key, ordering_token=[], merge_op=merge_op,
          final_op=final_op, timeout_seconds=COLLECTIVE_TIMEOUT_S))
  return out


def collective_broadcast(variables, tower_devices, group, keys, is_source):
  """Assign ops: every tower's copy <- the group's first device's value.

  variables[i] is tower i's copy; the source (worker 0, tower 0) sends.
  """
  group_key = keys.get_group_key(group)
  instance_key = keys.get_instance_key()
  ops = []
  for i, (var, device) in enumerate(zip(variables, tower_devices)):
    with tf.device(device):
      if is_source and i == 0:
        ops.append(tf.raw_ops.CollectiveBcastSendV2(
            input=var.read_value(), group_size=len(group),
            group_key=group_key, instance_key=instance_key,
            timeout_seconds=COLLECTIVE_TIMEOUT_S).op)
      else:
        value = tf.raw_ops.CollectiveBcastRecvV2(
            group_size=len(group), group_key=group_key,
            instance_key=instance_key, shape=var.shape.as_list(),
            T=var.dtype.base_dtype, timeout_seconds=COLLECTIVE_TIMEOUT_S)
        ops.append(var.assign(value))
  return ops


def collective_min(value, tower_devices, group) -> list:
  """Per tower device: the minimum of `value` over every tower of the group."""
  return collective_reduce([value] * len(tower_devices), tower_devices, group,
                           collective_keys.keys_for_graph(), merge_op='Min',
                           final_op='Id')


def collective_means_per_tower(tower_grads, tower_devices, group) -> list:
  """Every tower's (mean over all towers of all workers, variable) list."""
  keys = collective_keys.keys_for_graph()
  per_tower = [[] for _ in tower_grads]
  with tf1.name_scope('collective_allreduce'):
    for grads_and_vars in zip(*tower_grads):
      means = collective_reduce([g for g, _ in grads_and_vars],
                                tower_devices, group, keys)
      for i, (mean, (_, var)) in enumerate(zip(means, grads_and_vars)):
        per_tower[i].append((mean, var))
  return per_tower


@register
class CollectiveAllReduce(local._PerTowerCopies):  # pylint: disable=protected-access
  """Per-worker graphs; gradients averaged by collectives over all towers."""

  name = 'collective_all_reduce'
  requires_cluster = True
  supports_cluster = True
  talks_to_other_workers = True

  def __init__(self, tower_devices, *, cluster: base.ClusterDevices,
               **kwargs):
    tower_devices = [_device_of(cluster.worker_device, d)
                     for d in tower_devices]
    super().__init__(tower_devices,
                     cpu_device=cluster.worker_device + '/device:CPU:0',
                     cluster=cluster, **kwargs)
    self.group = collective_group(self.tower_devices, cluster)

  @classmethod
  def from_params(cls, params, tower_devices, cluster=None):
    return cls(tower_devices, cluster=cluster,
               use_resource_vars=params.use_resource_vars)

  def all_reduce_description(self):
    return 'CollectiveReduceV2 over %d device(s)' % len(self.group)

  def reduce_gradients(self, tower_grads):
    per_tower = collective_means_per_tower(tower_grads, self.tower_devices,
                                           self.group)
    return base.Reduction([(d, gv) for d, gv in
                           zip(self.tower_devices, per_tower)])

  def post_init_ops(self):
    return broadcast_tower_copies(self.num_towers, self.tower_devices,
                                  self.group, self.cluster.is_chief)


def broadcast_tower_copies(num_towers, tower_devices, group, is_source):
  """Every 'vI/name' of every worker <- worker 0's 'v0/name' (broadcast)."""
  keys = collective_keys.keys_for_graph()
  by_name = {v.op.name: v for v in tf1.global_variables()}
  ops = []
  with tf1.name_scope('broadcast_init'):
    for name in sorted(by_name):
      if not name.startswith('v0/'):
        continue
      copies = [by_name.get('v%d/%s' % (i, name[3:]))
                for i in range(num_towers)]
      if any(c is None for c in copies):
        continue
      ops.extend(collective_broadcast(copies, tower_devices, group, keys,
                                      is_source))
  return ops


def _bytes_of(shape, dtype) -> int:
  shape = tf.TensorShape(shape)
  elements = shape.num_elements() if shape.is_fully_defined() else 0
  return elements * tf.as_dtype(dtype).size


@register
class Hybrid(_ClusterMixin, local._PerTowerCopies):  # pylint: disable=protected-access
  """Big variables on the ps (synchronised), small ones all-reduced.

  A variable of more than `threshold_bytes` has one shared copy, 'v/name',
  on a ps task (balanced by bytes) that every tower reads; a smaller one has
  a copy per tower, 'vI/name', whose gradients are averaged with
  collectives over every tower of every worker.
  """

  name = 'hybrid'
  requires_cluster = True
  supports_cluster = True
  needs_ps = True
  talks_to_other_workers = True

  def __init__(self, tower_devices, *, cluster: base.ClusterDevices,
               threshold_bytes: int = 1 << 20, **kwargs):
    self.ps_devices = tuple(cluster.ps_devices)
    super().__init__(tower_devices,
                     cpu_device=cluster.worker_device + '/device:CPU:0',
                     cluster=cluster, **kwargs)
    self.threshold_bytes = threshold_bytes
    self.group = collective_group(self.tower_devices, cluster)
    self._placer = local.GreedyVariablePlacer(self.ps_devices)
    self._shared = {}                       # rel name -> ps variable
    self._tower_vars = [[] for _ in self.tower_devices]

  @classmethod
  def from_params(cls, params, tower_devices, cluster=None):
    return cls(tower_devices, cluster=cluster,
               threshold_bytes=params.hybrid_threshold_bytes,
               use_resource_vars=params.use_resource_vars)

  @property
  def global_step_device(self) -> str:
    # Each worker counts its own steps, as collective_all_reduce does: a
    # collective step that also updated a ps-held global step was aborted
    # ("Cleanup") on the ps. The workers run in lockstep, so every worker's
    # count is the step number the sync accumulators need as a stamp.
    return self.cpu_device

  @property
  def workers_in_lockstep(self) -> bool:
    return True

  def describe(self) -> str:
    return '%s (variables > %d bytes on %d ps task(s), the rest collective)' % (
        self.name, self.threshold_bytes, len(self.ps_devices))

  def all_reduce_description(self):
    return 'CollectiveReduceV2 over %d device(s)' % len(self.group)

  @contextlib.contextmanager
  def tower_scope(self, index: int):
    prefix = 'v%d/' % index

    def route(getter, name, *args, **kwargs):
      shape = kwargs.get('shape')
      initializer = kwargs.get('initializer')
      if shape is None and hasattr(initializer, 'shape'):
        shape = initializer.shape
      trainable = kwargs.get('trainable', True)
      var = None
      if (name.startswith(prefix) and trainable and shape is not None and
          _bytes_of(shape, kwargs.get('dtype') or tf.float32) >
          self.threshold_bytes):
        var = self._shared_variable(name[len(prefix):], getter, shape, args,
                                    kwargs)
      if var is None:
        var = getter(name, *args, **kwargs)
      if trainable:
        self._tower_vars[index].append(var)
      return var

    with tf1.variable_scope('v%d' % index, custom_getter=route,
                            use_resource=self.use_resource_vars):
      with tf1.device(self.tower_devices[index]):
        yield

  def _shared_variable(self, rel, getter, shape, args, kwargs):
    """The one ps copy 'v/REL' (created by the first tower that asks)."""
    if rel not in self._shared:
      k = min(range(len(self.ps_devices)),
              key=self._placer.bytes_on.__getitem__)
      self._placer.bytes_on[k] += _bytes_of(
          shape, kwargs.get('dtype') or tf.float32)
      with tf1.device(None), tf.device(self.ps_devices[k]):
        self._shared[rel] = getter('v/' + rel, *args, **kwargs)
    return self._shared[rel]

  def tower_trainable_variables(self, index: int) -> list:
    return list(self._tower_vars[index])

  def build_train_op(self, tower_grads, make_optimizer, global_step,
                     clip_norm=None, loss_scale=None):
    with tf.control_dependencies(_all_grads(tower_grads)):
      return self._build_updates(tower_grads, make_optimizer, global_step,
                                 clip_norm, loss_scale)

  def _build_updates(self, tower_grads, make_optimizer, global_step,
                     clip_norm, loss_scale):
    shared_ids = {id(v) for v in self._shared.values()}
    big = [[(g, v) for g, v in gv if id(v) in shared_ids] for gv in tower_grads]
    small = [[(g, v) for g, v in gv if id(v) not in shared_ids]
             for gv in tower_grads]
    sites = (collective_means_per_tower(small, self.tower_devices, self.group)
             if small[0] else [])
    means = _local_means(big, self.cpu_device) if big[0] else []
    if loss_scale is not None:
      # Every worker's scale is its own variable (on its step counter's
      # device) but moves identically: each worker sees the same decision.
      sites = [loss_scale.unscale(gv) for gv in sites]
      means = loss_scale.unscale(means)
    finite = (self._finite_everywhere(loss_scale, sites, means)
              if loss_scale is not None and loss_scale.config.auto else None)

    def guarded(make_updates):
      if finite is None:
        return make_updates()
      return [loss_scale.apply_if(finite, make_updates)]

    def small_updates():
      updates = []
      for i, gv in enumerate(sites):
        with tf.device(self.tower_devices[i]), self._apply_name_scope(i):
          updates.append(self._apply(gv, make_optimizer, None, clip_norm))
      return updates
    updates = guarded(small_updates) if sites else []
    if means:
      updates.append(self._sync_or_async(
          means, make_optimizer, global_step, clip_norm,
          bump_global_step=False,
          guard=lambda gvs, apply: tf.group(*guarded(lambda: [apply(gvs)]))))
    if means:
      updates.append(self._end_of_step_barrier(updates))
    with tf.device(self.global_step_device), \
        tf.control_dependencies(updates):
      if finite is None:
        bump = global_step.assign_add(1)
      else:
        bump = tf.group(global_step.assign_add(tf.cast(finite, tf.int64)),
                        loss_scale.adjust(finite))
    return tf.group(*updates, bump, name='train_op')

  def _finite_everywhere(self, loss_scale, sites, means) -> tf.Tensor:
    """True iff every worker's gradients of this step are finite.

    The all-reduced means are the same on every worker; the ps-bound means
    are this worker's own, so each worker's verdict is combined with a
    collective minimum: every worker then skips or applies together.
    """
    checked = list(sites) + [means]
    local_ok = loss_scale.all_finite(
        [(self.cpu_device, gv) for gv in checked if gv])
    verdicts = collective_min(tf.cast(local_ok, tf.float32),
                              self.tower_devices, self.group)
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
    return tf.group(*collective_min(done, self.tower_devices, self.group),
                    name='step_barrier')

  def post_init_ops(self):
    return broadcast_tower_copies(self.num_towers, self.tower_devices,
                                  self.group, self.cluster.is_chief)

  def savable_variables(self):
    saved = super().savable_variables()
    saved.update(base.shared_copy_variables())
    return saved
