"""The towers of a graph: one public function for training and evaluation.

build_towers builds every tower's forward pass (and, when training, its
gradients) in the variable manager's tower scopes. The training step graph
(step_graph.py) and the evaluation graph (evaluation/evaluation.py) both
build their towers with it.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import tensorflow as tf

from tf_cnn_benchmarks.training import towers
from tf_cnn_benchmarks.training import xla

tf1 = tf.compat.v1


@dataclasses.dataclass(frozen=True)
class ModelSpec:
  """The model a tower builds and how (no device, no manager)."""

  model: object  # a models.Model
  num_classes: int
  data_format: str
  compute_dtype: tf.DType
  seed: int
  float16_vars: bool = False


@dataclasses.dataclass(frozen=True)
class TowerOptions:
  """How the towers of one graph are built (training or forward only)."""

  training: bool  # gradients and training-mode layers; else forward only
  weight_decay: float = 0.0
  # Global index of this graph's first tower (picks the dropout masks).
  first_tower_index: int = 0
  scale_loss: Callable | None = None  # fp16 loss scaling of the gradients
  single_l2_loss_op: bool = False
  accuracy: bool = False  # count each batch's right predictions
  xla_compile: bool = False  # each tower's passes as one XLA cluster


def build_towers(
  spec: ModelSpec,
  manager,
  batches: Sequence[tuple],
  options: TowerOptions,
) -> list[towers.Tower]:
  """One towers.Tower per (images, labels) of `batches`, in `manager`'s scopes.

  The manager may first build one forward pass on stand-in inputs to create
  every variable (see VariableMgr.prepare_towers).
  """
  manager.prepare_towers(
    lambda: _forward_pass_for_variables(spec, options, batches[0][0])
  )
  return [
    _build_tower(spec, manager, options, index, images, labels)
    for index, (images, labels) in enumerate(batches)
  ]


def _forward_pass_for_variables(
  spec: ModelSpec, options: TowerOptions, images
) -> None:
  """Tower 0's forward pass on stand-in inputs (see prepare_towers).

  Only its variables matter: nothing fetches its ops, so they never run.
  """
  towers.forward_pass(
    spec.model,
    tf1.placeholder(images.dtype, images.shape, name='stand_in_images'),
    num_classes=spec.num_classes,
    data_format=spec.data_format,
    compute_dtype=spec.compute_dtype,
    seed=spec.seed,
    is_training=options.training,
    float16_vars=spec.float16_vars,
    tower_index=options.first_tower_index,
  )


def _build_tower(
  spec: ModelSpec, manager, options: TowerOptions, index: int, images, labels
) -> towers.Tower:
  # --xla_compile: the forward and backward pass as one XLA cluster.
  with manager.tower_scope(index), xla.tower_scope(options.xla_compile):
    return towers.build_tower(
      spec.model,
      images,
      labels,
      num_classes=spec.num_classes,
      data_format=spec.data_format,
      compute_dtype=spec.compute_dtype,
      seed=spec.seed,
      weight_decay=options.weight_decay * manager.weight_decay_share(index),
      trainable_variables=lambda: manager.tower_trainable_variables(index),
      as_read=lambda variables: manager.tower_weights(index, variables),
      forward_only=not options.training,
      float16_vars=spec.float16_vars,
      scale_loss=options.scale_loss,
      tower_index=options.first_tower_index + index,
      single_l2_loss_op=options.single_l2_loss_op,
      accuracy=options.accuracy,
      initial_values=not manager.overwritten_after_init(index),
    )
