"""The graph of a training or forward-only run's step, from explicit values.

build() makes, in a fresh graph: the global step, the towers (graph.py), the
reported loss, the update (or the forward-only statistics), the step table's
tensors, the summaries, the checkpointer and the init ops. The driver gives
it a StepGraphPlan and the variable manager; it returns a BuiltGraph.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

import models
from tf_cnn_benchmarks.cluster import layout as layout_lib
from tf_cnn_benchmarks.observability import summaries
from tf_cnn_benchmarks.reporting import step_report
from tf_cnn_benchmarks.training import checkpoints
from tf_cnn_benchmarks.training import graph as graph_lib
from tf_cnn_benchmarks.training import learning_rates
from tf_cnn_benchmarks.training import optimizers
from tf_cnn_benchmarks.training import tower_inputs
from tf_cnn_benchmarks.training import worker_saves
from variable_mgr import accumulation as accumulation_lib
from variable_mgr import base
from variable_mgr import loss_scale as loss_scale_lib
from variable_mgr import traits as traits_lib

tf1 = tf.compat.v1


@dataclasses.dataclass(frozen=True)
class BuiltGraph:
  """The ops a run needs, all in `graph`."""

  graph: tf.Graph
  step_op: tf.Operation  # train op, or a no-op when forward only
  loss: tf.Tensor  # mean over the towers of --loss_type_to_report's loss
  init_ops: tuple
  shared_ready: (
    tf.Tensor | None
  )  # names of shared variables not yet initialised
  post_init_ops: tuple
  global_step: tf.Variable
  report: dict  # name -> tensor, fetched once at the end
  checkpointer: checkpoints.Checkpointer | None
  summary_op: tf.Tensor | None
  # A cluster run: this process's own loss (`loss` is the cluster's where
  # the manager averages it); None in a local run.
  worker_loss: tf.Tensor | None = None
  # Fetched with every step for the step table and the results line.
  learning_rate: tf.Tensor | None = None
  # step_report.accuracy_tensors: this worker's; in a cluster also the
  # cluster's, under CLUSTER_ACCURACY_KEYS.
  accuracy: dict | None = None
  # For the placement report: every tower's (gradient, variable) pairs and
  # (images, labels).
  tower_grads: tuple = ()
  tower_inputs: tuple = ()
  input_init: tuple = ()  # the input ops among init_ops (freezing.py)
  # Tower 0's forward FLOPs per image, counted in this graph (None: not
  # static); the results' TFLOP/s and MFU need no graph of their own.
  flops_per_image: int | None = None
  # --gradient_accumulation_steps=K > 1: step_op is the update (the K-th
  # micro-step); micro_step_op one of the K-1 before it, which only adds
  # the towers' gradients to buffers; micro_steps_done the count of those
  # since the last update (a checkpoint between micro-steps holds it).
  accumulation_steps: int = 1
  micro_step_op: tf.Operation | None = None
  micro_steps_done: tf.Tensor | None = None


@dataclasses.dataclass(frozen=True)
class StepGraphPlan:
  """What a run's step graph is built from (values the driver resolved)."""

  params: object  # the resolved Params
  spec: graph_lib.ModelSpec
  inputs: tower_inputs.InputSource
  layout: layout_lib.Layout
  training: bool  # else forward passes only
  loss_scale_config: loss_scale_lib.LossScaleConfig | None
  images_per_global_step: int  # the learning-rate schedule's epoch unit
  num_train_examples: int
  in_cluster: bool
  # --train_dir, or a scratch dir for evaluations during training.
  checkpoint_dir: str | None
  writes_checkpoints: bool  # this process saves them (a training chief)


def images_per_global_step(params, traits, layout, in_cluster: bool) -> int:
  """Images one global step stands for: the schedule's epoch unit.

  Every worker's batch, except where each worker moves the shared step
  alone (asynchronous ps training: one worker's batch).
  """
  alone = in_cluster and not (
    traits.one_graph
    or traits_lib.workers_in_lockstep(traits, params.cross_replica_sync)
  )
  return learning_rates.images_per_global_step(
    params.batch_size * params.gradient_accumulation_steps,
    len(layout.tower_devices),
    layout.num_graphs,
    each_worker_moves_step=alone,
  )


def build(plan: StepGraphPlan, manager) -> BuiltGraph:
  """Builds towers, update, init and checkpoint ops in a fresh graph."""
  graph = tf.Graph()
  with graph.as_default():
    with tf.device(manager.global_step_device):
      global_step = tf1.train.get_or_create_global_step()
    loss_scale = _loss_scale(plan, manager)
    accumulation = _accumulation(plan, manager)
    batches, input_init = _inputs(plan, manager, accumulation)
    built_towers = graph_lib.build_towers(
      plan.spec, manager, batches, _tower_options(plan, loss_scale)
    )
    loss = _mean_loss(plan, manager, built_towers)
    step, loss = _Step.of(built_towers, loss, accumulation, manager)
    accuracy = step_report.accuracy_tensors(built_towers, manager.cpu_device)
    step_op, learning_rate, micro_op = _build_step(
      plan,
      manager,
      step,
      global_step,
      loss_scale,
      _worker_means(plan, manager, loss, accuracy),
    )
    # In a cluster: the loss of every worker's towers where the manager
    # averages it; this process's own stays under worker_losses.
    worker_loss = loss if plan.in_cluster else None
    loss = _cluster_loss(manager, loss)
    report = loss_scale.report() if loss_scale else {}
    # The summaries keep this worker's accuracies (classic's meaning).
    summary_op = _summaries(
      plan, manager, built_towers, loss, learning_rate, accuracy, report
    )
    accuracy = _with_cluster_accuracy(plan, manager, accuracy)
    checkpointer, init_ops, shared_ready, post_init = _saved_and_init(
      plan, manager, input_init, accumulation
    )
  return BuiltGraph(
    graph,
    step_op,
    loss,
    init_ops,
    shared_ready,
    post_init,
    global_step,
    report,
    checkpointer,
    summary_op,
    worker_loss,
    learning_rate,
    accuracy,
    tower_grads=tuple(tuple(t.grads_and_vars) for t in built_towers),
    tower_inputs=tuple(batches),
    input_init=tuple(input_init),
    flops_per_image=models.flops_per_image_of(built_towers[0].logits),
    accumulation_steps=accumulation.steps if accumulation else 1,
    micro_step_op=micro_op,
    micro_steps_done=step.micro_steps_done,
  )


@dataclasses.dataclass(frozen=True)
class _Step:
  """What a training step is built from besides the manager.

  grads: per tower, what the manager reduces (the towers' own gradients,
  or with accumulation the mean of the update's micro-steps').
  """

  towers: list
  grads: list
  accumulation: accumulation_lib.GradientAccumulation | None = None
  accumulated: accumulation_lib.AccumulatedStep | None = None
  micro_steps_done: tf.Tensor | None = None

  @classmethod
  def of(cls, towers, loss, accumulation, manager) -> tuple:
    """(the _Step, the loss the update reports: `loss`, or with
    accumulation the mean of the update's micro-steps' losses)."""
    grads = [t.grads_and_vars for t in towers]
    if accumulation is None:
      return cls(towers, grads), loss
    # Each tower's buffers on its device.
    accumulated = accumulation.build(grads, loss, manager.tower_devices)
    step = cls(
      towers,
      accumulated.tower_grads,
      accumulation,
      accumulated,
      accumulation.micro_steps_done(),
    )
    return step, accumulated.loss


def _loss_scale(plan: StepGraphPlan, manager):
  """The graph's LossScale (fp16 training), or None."""
  if not (plan.loss_scale_config and plan.training):
    return None
  return loss_scale_lib.LossScale(
    plan.loss_scale_config, manager.global_step_device
  )


def _accumulation(plan: StepGraphPlan, manager):
  """The run's GradientAccumulation, or None (K = 1, or no training)."""
  steps = plan.params.gradient_accumulation_steps
  if steps == 1 or not plan.training:
    return None
  # Workers with a graph each share a checkpoint: buffers per worker.
  cluster = manager.cluster
  worker = cluster.task_index if cluster is not None else None
  return accumulation_lib.GradientAccumulation(
    steps, manager.cpu_device, worker
  )


def _inputs(plan: StepGraphPlan, manager, accumulation) -> tuple:
  """The training split's (images, labels) per tower and their init ops."""
  micro_steps = None
  if accumulation is not None:
    micro_steps = (accumulation.steps, accumulation.micro_index())
  return tower_inputs.tower_batches(
    plan.inputs,
    plan.layout.tower_devices,
    subset='train',
    train=plan.training,
    first_stream=plan.layout.first_tower_index,
    num_streams=plan.layout.num_step_towers,
    batch_size=plan.params.batch_size,
    host_device=manager.cpu_device,
    micro_steps=micro_steps,
  )


def _tower_options(plan: StepGraphPlan, loss_scale) -> graph_lib.TowerOptions:
  p = plan.params
  return graph_lib.TowerOptions(
    training=plan.training,
    weight_decay=p.weight_decay,
    first_tower_index=plan.layout.first_tower_index,
    scale_loss=loss_scale.scale_loss if loss_scale else None,
    single_l2_loss_op=p.single_l2_loss_op,
    accuracy=step_report.wants_accuracy(p),
    xla_compile=p.xla_compile,
  )


def _mean_loss(plan: StepGraphPlan, manager, built_towers) -> tf.Tensor:
  """The mean over the towers of --loss_type_to_report's loss."""
  with tf.device(manager.cpu_device):
    return tf.add_n(
      [
        step_report.reported_loss(t, plan.params.loss_type_to_report)
        for t in built_towers
      ]
    ) / len(built_towers)


# Where the cluster's accuracies go in the accuracy dict, beside this
# worker's own (step_report.StepRecorder.report reads them).
CLUSTER_ACCURACY_KEYS = {
  'top_1_accuracy': 'cluster_top_1_accuracy',
  'top_5_accuracy': 'cluster_top_5_accuracy',
}


def _worker_means(plan: StepGraphPlan, manager, loss, accuracy):
  """What the manager averages over the workers with the step: the loss,
  and in a cluster that counts them the top-1 and top-5 accuracies too
  (a vector [loss, top1, top5], riding on the same reduction)."""
  if not (plan.in_cluster and accuracy):
    return loss
  with tf.device(manager.cpu_device):
    return tf.stack(
      [
        tf.cast(loss, tf.float32),
        accuracy['top_1_accuracy'],
        accuracy['top_5_accuracy'],
      ]
    )


def _cluster_loss(manager, loss):
  """The cluster's loss where the manager averaged it, else `loss`."""
  means = manager.cluster_loss
  if means is None:
    return loss
  return means if means.shape.rank == 0 else means[0]


def _with_cluster_accuracy(plan: StepGraphPlan, manager, accuracy):
  """`accuracy` plus, in a cluster, the CLUSTER_ACCURACY_KEYS: the mean
  over every worker's towers where the manager averages it (every worker
  has as many towers of the same batch, so the mean of the workers'
  fractions is the cluster's), else this worker's own, as `losses`."""
  if not (plan.in_cluster and accuracy):
    return accuracy
  means = manager.cluster_loss
  out = dict(accuracy)
  for k, key in enumerate(('top_1_accuracy', 'top_5_accuracy')):
    own = accuracy[key]
    averaged = means is not None and means.shape.rank == 1
    out[CLUSTER_ACCURACY_KEYS[key]] = means[k + 1] if averaged else own
  return out


def _summaries(
  plan: StepGraphPlan,
  manager,
  built_towers,
  loss,
  learning_rate,
  accuracy,
  report,
):
  """The --summary_verbosity summary op (None: no summaries)."""
  scalars = dict(accuracy or {})  # classic: summarised at verbosity 1
  if report:
    scalars['loss_scale'] = report['loss_scale']
  return summaries.build_summaries(
    plan.params.summary_verbosity,
    loss=loss,
    loss_name=plan.params.loss_type_to_report,
    learning_rate=learning_rate,
    extra_scalars=scalars,
    grads_and_vars=built_towers[0].grads_and_vars,
    device=manager.cpu_device,
    gradient_norm=manager.applied_gradient_norm,
  )


def _build_step(
  plan: StepGraphPlan, manager, step: _Step, global_step, loss_scale, loss
) -> tuple:
  """(the op of one step (an update), the learning rate or None when not
  training, the micro-step op or None without accumulation)."""
  stat_updates = manager.stat_update_ops([t.update_ops for t in step.towers])
  if not plan.training:
    return tf.group(*stat_updates, name='forward_only'), None, None
  train_op, lr = _build_update(
    plan, manager, step, global_step, stat_updates, loss_scale, loss
  )
  if step.accumulation is None:
    return train_op, lr, None
  return train_op, lr, _micro_step(step, stat_updates, loss_scale)


def _micro_step(step: _Step, stat_updates, loss_scale) -> tf.Operation:
  """One of the K-1 micro-steps before an update: the towers' gradients
  added to the buffers, the batch-norm statistics moved. With automatic
  loss scaling a micro-step whose own gradients are not finite moves no
  statistic (its inf/nan reaches the update's check through the buffers)."""
  if loss_scale is not None and stat_updates:
    finite = loss_scale.all_finite(
      [
        (loss_scale.device, gv)
        for gv in (t.grads_and_vars for t in step.towers)
      ]
    )
    stat_updates = loss_scale.guard_statistics(stat_updates, finite)
  return tf.group(*step.accumulated.micro_ops, *stat_updates, name='micro_step')


def _build_update(
  plan: StepGraphPlan,
  manager,
  step: _Step,
  global_step,
  stat_updates,
  loss_scale,
  loss,
) -> tuple:
  """(the training step op, the learning rate)."""
  p = plan.params
  # Classic --compute_lr_on_cpu: on this process's CPU, not the step's.
  lr_device = (
    manager.cpu_device if p.compute_lr_on_cpu else manager.global_step_device
  )
  with tf.device(lr_device):
    lr = optimizers.learning_rate(
      p,
      plan.spec.model,
      global_step,
      plan.images_per_global_step,
      plan.num_train_examples,
    )
  make_optimizer = optimizers.optimizer_factory(
    optimizers.OptimizerConfig.from_params(p), lr
  )
  # The reported loss must be that of the values the step started from;
  # parts of it (the L2 term) feed no gradient, so nothing else orders
  # them before the in-place updates.
  with tf.control_dependencies(
    base.all_done([t.loss for t in step.towers], 'losses_ready')
  ):
    train_op = manager.build_train_op(
      step.grads,
      base.StepUpdate(
        make_optimizer,
        global_step,
        clip_norm=optimizers.gradient_clip(p),
        loss_scale=loss_scale,
        loss=loss,
        learning_rate=lr,
      ),
    )
  if loss_scale is not None:  # a skipped step moves no statistic either
    stat_updates = loss_scale.guard_statistics(stat_updates)
  if step.accumulation is not None:  # after the update read them
    reads = [g for gv in step.grads for g, _ in gv] + [loss, train_op]
    train_op = step.accumulation.reset(reads)
  return tf.group(train_op, *stat_updates, name='step'), lr


def _saved_and_init(plan, manager, input_init, accumulation) -> tuple:
  """(checkpointer, init ops, shared-ready report, post-init ops); the
  accumulation's variables are this process's own to save and initialise."""
  extra = accumulation.variables() if accumulation else []
  checkpointer = _checkpointer(plan, manager, extra)
  return (checkpointer, *_build_init(manager, checkpointer, input_init, extra))


def _build_init(manager, checkpointer, input_init, extra=()) -> tuple:
  """(init ops, report of shared variables not yet ready, post-init ops).

  extra: variables of this process's own beside the manager's (the
  gradient accumulation's).
  """
  restored = set(checkpointer.restored_variables if checkpointer else ())
  mine = list(manager.initialized_variables())
  mine += [v for v in extra if v not in set(mine)]
  init_ops = (
    tf1.variables_initializer([v for v in mine if v not in restored]),
    tf1.local_variables_initializer(),
    *input_init,
  )
  shared = manager.shared_variables()
  # identity: a process whose run stops early must not warn that the
  # (should-use wrapped) report was never used.
  shared_ready = (
    tf.identity(tf1.report_uninitialized_variables(shared)) if shared else None
  )
  return init_ops, shared_ready, tuple(manager.post_init_ops())


def _checkpointer(
  plan: StepGraphPlan, manager, extra=()
) -> checkpoints.Checkpointer | None:
  """Saver ops for --train_dir (or a scratch dir for evals in training).

  extra: variables of this process's own saved under their own names
  beside the manager's (the gradient accumulation's).
  """
  p = plan.params
  train_dir = plan.checkpoint_dir
  # Classic: --forward_only with --train_dir infers with the checkpoint.
  if train_dir is None or not (plan.training or p.train_dir):
    return None
  saved = manager.savable_variables()
  # The other workers' own state: saved by the chief, restored by each.
  for v in list(extra) + worker_saves.other_workers_state(manager):
    base.add_savable(saved, v.op.name, v)
  latest = checkpoints.latest_checkpoint(p.train_dir)
  mine = set(manager.initialized_variables()) | set(extra)
  restore = {}
  if latest:
    model = manager.tower_trainable_variables(0)
    # Only the process that restores the weights can miss them.
    required = (
      checkpoints.model_names(model)
      if all(v in mine for v in model)
      else frozenset()
    )
    restore = checkpoints.restorable(
      latest, {k: v for k, v in saved.items() if v in mine}, required
    )
  return checkpoints.Checkpointer(
    train_dir,
    saved,
    tf1.train.get_global_step(),
    restore_from=latest,
    restore_variables=restore,
    max_to_keep=p.max_ckpts_to_keep,
    policy=checkpoints.SavePolicy(p.save_model_steps, p.save_model_secs),
    writes=plan.writes_checkpoints,
    barrier=worker_saves.save_barrier(manager),
  )
