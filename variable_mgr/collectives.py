"""Collective ops across workers: reductions, broadcasts, device groups.

The building blocks of the cluster managers that talk to other workers
(collective_all_reduce, hybrid): each worker's graph holds its own towers'
ops, and a group key names every tower of every worker that takes part.
"""

from __future__ import annotations

import tensorflow as tf

from variable_mgr import base
from variable_mgr import collective_keys
from variable_mgr import collective_options
from variable_mgr import naming
from variable_mgr.compression import base as compression_base
from variable_mgr.compression import registry as compression_registry

tf1 = tf.compat.v1

# Collectives of one step wait at most this long for their peers; a lost peer
# is normally reported sooner by the cluster watchdog.
COLLECTIVE_TIMEOUT_S = 50.0
# The per-step reductions have no timeout: TensorFlow arms a collective's
# timeout with Env::SchedClosureAfter, which starts one OS thread per op
# that sleeps out the whole timeout, so at hundreds of steps a second a
# worker held thousands of threads and died (issue 17, item 1). The cluster
# watchdog bounds the wait on a lost peer instead.
STEP_COLLECTIVE_TIMEOUT_S = 0.0


def device_on_task(task_prefix: str, tower_device: str) -> str:
  """`tower_device` (e.g. /cpu:1) moved onto the task `task_prefix`."""
  spec = tf.DeviceSpec.from_string(tower_device)
  task = tf.DeviceSpec.from_string(task_prefix)
  return spec.replace(job=task.job, replica=0, task=task.task).to_string()


def collective_group(tower_devices, cluster: base.ClusterDevices) -> list:
  """Every worker's versions of this worker's tower devices, worker-major."""
  return [
    device_on_task(w, d) for w in cluster.worker_devices for d in tower_devices
  ]


def collective_reduce(
  tensors,
  tower_devices,
  group,
  keys,
  *,
  merge_op: str = 'Add',
  final_op: str = 'Div',
  max_subdivs_per_device: int = -1,
  communication_hint: str = 'auto',
  mergeable: bool = False,
) -> list:
  """A collective reduction of `tensors` (one per local tower) over `group`.

  Defaults give the mean; merge_op='Min', final_op='Id' the minimum.
  max_subdivs_per_device: ring subdivisions (-1: TensorFlow picks).
  communication_hint: 'ring', 'nccl' or 'auto' (TensorFlow picks).
  mergeable: the V1 op (keys as attributes), which grappler's scoped
    allocator can merge with the others of its name scope; else V2.
  """
  group_key = keys.get_group_key(group)
  instance_key = keys.get_instance_key()
  out = []
  for t, d in zip(tensors, tower_devices):
    with tf.device(d):
      if mergeable:
        out.append(
          tf.raw_ops.CollectiveReduce(
            input=t,
            group_size=len(group),
            group_key=group_key,
            instance_key=instance_key,
            merge_op=merge_op,
            final_op=final_op,
            subdiv_offsets=_subdiv_offsets(max_subdivs_per_device, group),
            communication_hint=communication_hint,
            timeout_seconds=STEP_COLLECTIVE_TIMEOUT_S,
          )
        )
        continue
      out.append(
        tf.raw_ops.CollectiveReduceV2(
          input=t,
          group_size=len(group),
          group_key=group_key,
          instance_key=instance_key,
          ordering_token=[],
          merge_op=merge_op,
          final_op=final_op,
          communication_hint=communication_hint,
          timeout_seconds=STEP_COLLECTIVE_TIMEOUT_S,
          max_subdivs_per_device=max_subdivs_per_device,
        )
      )
  return out


def _subdiv_offsets(subdivs, group) -> list:
  """The V1 op's ring subdivisions: N rank offsets; [] lets TF pick (-1)."""
  if subdivs < 1:
    return []
  return list(range(min(subdivs, len(group))))


def collective_broadcast(
  variables, tower_devices, group, keys, is_source, hint='auto'
):
  """Assign ops: every tower's copy <- the group's first device's value.

  variables[i] is tower i's copy; the source (worker 0, tower 0) sends.
  hint: the ops' communication_hint.
  """
  group_key = keys.get_group_key(group)
  instance_key = keys.get_instance_key()
  ops = []
  for i, (var, device) in enumerate(zip(variables, tower_devices)):
    with tf.device(device):
      if is_source and i == 0:
        ops.append(
          tf.raw_ops.CollectiveBcastSendV2(
            input=var.read_value(),
            group_size=len(group),
            group_key=group_key,
            instance_key=instance_key,
            communication_hint=hint,
            timeout_seconds=COLLECTIVE_TIMEOUT_S,
          ).op
        )
      else:
        value = tf.raw_ops.CollectiveBcastRecvV2(
          group_size=len(group),
          group_key=group_key,
          instance_key=instance_key,
          shape=var.shape.as_list(),
          T=var.dtype.base_dtype,
          communication_hint=hint,
          timeout_seconds=COLLECTIVE_TIMEOUT_S,
        )
        ops.append(var.assign(value))
  return ops


def collective_min(value, tower_devices, group, implementation='auto') -> list:
  """Per tower device: the minimum of `value` over every tower of the group."""
  return collective_reduce(
    [value] * len(tower_devices),
    tower_devices,
    group,
    collective_keys.keys_for_graph(),
    merge_op='Min',
    final_op='Id',
    communication_hint=collective_options.hint_for(implementation, group),
  )


def collective_min_value(
  value, tower_devices, group, device, implementation='auto'
) -> tf.Tensor:
  """The minimum of `value` over the group, as ONE tensor on `device`.

  Every local tower is a member of the collective, and a member whose op
  is not run leaves its peers waiting for good: the result depends on every
  tower's op (they all hold the same value), so running it runs them all.
  """
  mins = collective_min(value, tower_devices, group, implementation)
  with tf.device(device), tf.control_dependencies(mins[1:]):
    return tf.identity(mins[0])


def collective_means_per_tower(
  tower_grads,
  tower_devices,
  group,
  *,
  options=None,
  compressor=None,
  first_replica=0,
  tower_prefixes=None,
) -> list:
  """Every tower's (mean over all towers of all workers, variable) list.

  options: a collective_options.ReduceOptions (merge scope, subdivisions,
    pack size, implementation; None: the defaults).
  compressor: a compression.base.Compressor around the collectives (None:
    none); first_replica (the run-wide index of this worker's tower 0) and
    tower_prefixes (the manager's variable_prefix per tower) name its state.
    Packing happens inside it: what is packed is what travels.
  """
  keys = collective_keys.keys_for_graph()
  variables = [v for _, v in tower_grads[0]]
  options = options or collective_options.ReduceOptions()

  def means(sent):
    return _collective_means(sent, tower_devices, group, keys, options)

  wire = compression_base.Wire(
    devices=tuple(tower_devices),
    reduce=means,
    mean=True,
    num_replicas=len(group),
    first_replica=first_replica,
    names=tuple(naming.strip_replica_prefix(v.op.name) for v in variables),
    tower_prefixes=tuple(tower_prefixes) if tower_prefixes else None,
  )
  compressor = compressor or compression_registry.create('none')
  with tf1.name_scope('collective_allreduce'):
    reduced = compressor.reduce(
      [[g for g, _ in gv] for gv in tower_grads], wire
    )
  return [
    list(zip(tower, [v for _, v in gv]))
    for tower, gv in zip(reduced, tower_grads)
  ]


def _collective_means(sent, tower_devices, group, keys, options):
  """out[i][k]: the mean of tensor k over the group, on tower i's device.

  The tensors travel in packs (options.bytes_per_pack), options.merge_scope
  packs per 'allreduce' name scope.
  """
  packs = collective_options.tensor_packs(sent[0], options.bytes_per_pack)
  hint = collective_options.hint_for(options.implementation, group)

  def reduce_unit(unit):
    return collective_reduce(
      unit,
      tower_devices,
      group,
      keys,
      max_subdivs_per_device=options.subdivs,
      communication_hint=hint,
      mergeable=options.merge_scope > 1,
    )

  out = [[None] * len(sent[0]) for _ in sent]
  step = max(1, options.merge_scope)
  for start in range(0, len(packs), step):
    with tf1.name_scope('allreduce'):
      part = collective_options.reduce_packed(
        sent, tower_devices, packs[start : start + step], reduce_unit
      )
    for i, row in enumerate(part):
      for j, value in enumerate(row):
        if value is not None:
          out[i][j] = value
  return out


def collective_mean_loss(
  loss, tower_devices, group, implementation='auto'
) -> list:
  """The mean of every worker's `loss` (one scalar collective per step).

  Each worker's loss is the mean over its towers and every worker has as
  many towers, so this is the mean over every tower of the cluster. Returns
  one result per local tower: run them all (each is a member of the
  collective), read any.
  """
  with tf1.name_scope('cluster_loss'):
    return collective_reduce(
      [tf.cast(loss, tf.float32)] * len(tower_devices),
      tower_devices,
      group,
      collective_keys.keys_for_graph(),
      communication_hint=collective_options.hint_for(implementation, group),
    )


def broadcast_tower_copies(
  num_towers, tower_devices, group, is_source, implementation='auto'
):
  """Every tower's copy on every worker <- worker 0's tower 0 copy."""
  keys = collective_keys.keys_for_graph()
  hint = collective_options.hint_for(implementation, group)
  ops = []
  with tf1.name_scope('broadcast_init'):
    for copies in base.tower_copies(
      tf1.global_variables(), num_towers
    ).values():
      if any(c is None for c in copies):
        continue
      ops.extend(
        collective_broadcast(
          copies, tower_devices, group, keys, is_source, hint
        )
      )
  return ops
