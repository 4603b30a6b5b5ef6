"""The profiled step's graph: one tower, built by the harness's own code.

The profile measures one tower's step on one device with no communication:
the run's flags resolved into a RunPlan (config/params.py) with the
variable manager forced to parameter_server on one device, then the same
values the driver hands to training/step_graph.build (model spec, input
source, layout, manager). No driver object is made.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

import models
from tf_cnn_benchmarks.cluster import layout as layout_lib
from tf_cnn_benchmarks.config import datasets
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.platform import devices
from tf_cnn_benchmarks.training import graph as graph_lib
from tf_cnn_benchmarks.training import step_graph
from tf_cnn_benchmarks.training import tower_inputs
from variable_mgr import loss_scale as loss_scale_lib
from variable_mgr import sizes

tf1 = tf.compat.v1

# What the profile fixes, whatever the flags say: one local tower whose
# variables live beside it (the strategy's communication is modelled, not
# measured here).
PROFILE_OVERRIDES = {
  'variable_update': 'parameter_server',
  'num_gpus': 1,
  'job_name': None,
  'ps_hosts': None,
  'worker_hosts': None,
  'controller_host': None,
  'forward_only': False,
  'eval': False,
}


@dataclasses.dataclass(frozen=True)
class ProfiledStep:
  """The built step graph and what the profile reads of it."""

  plan: object  # the RunPlan
  built: step_graph.BuiltGraph
  grads_and_vars: tuple  # tower 0's (gradient, variable), model order
  loss: tf.Tensor  # tower 0's loss (the end of the forward pass)
  variable_prefix: str  # the manager's name prefix of the variables


def profile_plan(**overrides) -> params_lib.RunPlan:
  """The RunPlan of the profiled run: the flags with PROFILE_OVERRIDES.

  Raises:
    params_lib.ParamsError: a bad flag value (one line naming it).
  """
  return params_lib.make_plan(**dict(overrides, **PROFILE_OVERRIDES))


def build_step(plan: params_lib.RunPlan) -> ProfiledStep:
  """The training step graph of `plan` (one tower), from the plan's values."""
  p = plan.params
  model = models.create_model(p.model, p.data_name)
  dataset = datasets.get(p.data_name)
  traits = plan.manager_cls.traits
  layout = layout_lib.layout(
    None, traits, p.device, p.num_gpus, p.cross_replica_sync
  )
  manager = plan.manager_cls.from_settings(
    plan.manager_settings, layout.tower_devices, cluster=None
  )
  spec = graph_lib.ModelSpec(
    model,
    dataset.num_classes,
    p.data_format,
    p.compute_dtype,
    p.tf_random_seed,
    p.fp16_vars,
  )
  inputs = tower_inputs.InputSource(
    None,  # synthetic: the profile times compute, not the input pipeline
    model.image_size,
    dataset.depth,
    dataset.num_classes,
    p.data_format,
    p.tf_random_seed,
  )
  built = step_graph.build(_graph_plan(plan, spec, inputs, layout), manager)
  return ProfiledStep(
    plan,
    built,
    built.tower_grads[0],
    built.loss,
    manager.variable_prefix(0),
  )


def _graph_plan(plan, spec, inputs, layout) -> step_graph.StepGraphPlan:
  p = plan.params
  return step_graph.StepGraphPlan(
    params=p,
    spec=spec,
    inputs=inputs,
    layout=layout,
    training=True,
    loss_scale_config=loss_scale_lib.LossScaleConfig.from_params(p),
    images_per_global_step=p.batch_size,
    num_train_examples=datasets.get(p.data_name).num_train_examples,
    in_cluster=False,
    checkpoint_dir=None,
    writes_checkpoints=False,
  )


def session_config(plan: params_lib.RunPlan):
  """The session config the harness runs this plan's device with."""
  p = plan.params
  return devices.session_config(
    p.device,
    1,
    num_intra_threads=p.num_intra_threads,
    num_inter_threads=p.num_inter_threads,
  )


def variable_rows(step: ProfiledStep) -> list:
  """[(name, shape, dtype, bytes)] of the trainable variables, model order.

  Names are relative (the manager's replica prefix dropped), as in
  checkpoints.
  """
  rows = []
  for _, v in step.grads_and_vars:
    name = v.op.name
    if name.startswith(step.variable_prefix):
      name = name[len(step.variable_prefix) :]
    dtype = v.dtype.base_dtype
    shape = [int(n) for n in v.shape]
    rows.append((name, shape, dtype.name, sizes.num_bytes(shape, dtype)))
  return rows
