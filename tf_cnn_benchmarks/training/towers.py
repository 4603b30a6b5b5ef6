"""One tower: forward pass, loss and gradients on one device."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable, Sequence

import tensorflow as tf

from models import builder

tf1 = tf.compat.v1

# The classic harness weighted the auxiliary head's loss (inception) by 0.4.
AUX_LOSS_WEIGHT = 0.4


@dataclasses.dataclass(frozen=True)
class Tower:
  """What the driver keeps of one tower."""

  loss: tf.Tensor  # float32 scalar: cross entropy + weight decay
  logits: tf.Tensor
  grads_and_vars: list  # [] when forward only
  update_ops: tuple  # batch-norm statistic updates
  base_loss: tf.Tensor | None = None  # the loss without the L2 term
  # (top-1, top-5) examples of the batch predicted right, float32; None
  # unless asked for (the classic harness built them only then).
  correct: tuple | None = None


def cross_entropy(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
  """Mean softmax cross entropy, in float32 whatever the logits' dtype."""
  return tf.reduce_mean(
    tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=tf.cast(logits, tf.float32)
    )
  )


def l2_penalty(
  variables: Sequence[tf.Variable],
  weight_decay: float,
  single_op: bool = False,
  values: Sequence[tf.Tensor] | None = None,
  decay_batch_norm: bool = False,
):
  """weight_decay * sum of l2_loss over the non-batch-norm variables.

  single_op: one l2_loss of the variables concatenated into one vector
  (classic --single_l2_loss_op) instead of one per variable.
  values: what the tower read of each variable (default: the variables);
  the names that pick the decayed ones are the variables'.
  decay_batch_norm: every variable, batch norm's too (a model's
  `l2_decays_batch_norm`).
  """
  values = variables if values is None else values
  decayed = [
    x
    for v, x in zip(variables, values)
    if decay_batch_norm or 'batchnorm' not in v.op.name
  ]
  if not weight_decay or not decayed:
    return tf.constant(0.0)
  as_float32 = [tf.cast(v, tf.float32) for v in decayed]
  if single_op:
    flat = tf.concat([tf.reshape(v, [-1]) for v in as_float32], axis=0)
    return weight_decay * tf.nn.l2_loss(flat)
  return weight_decay * tf.add_n([tf.nn.l2_loss(v) for v in as_float32])


def correct_predictions(logits: tf.Tensor, labels: tf.Tensor) -> tuple:
  """(top-1, top-5) numbers of examples whose label is in the top k, float32.

  As tf.nn.in_top_k: a label tied with the k-th largest logit counts, a
  non-finite logit never does.
  """
  logits = tf.cast(logits, tf.float32)
  return tuple(
    tf.reduce_sum(
      tf.cast(
        tf.nn.in_top_k(targets=labels, predictions=logits, k=k), tf.float32
      )
    )
    for k in (1, 5)
  )


@contextlib.contextmanager
def float16_variables():
  """Creates the model's float32 variables as float16 (batch norm's excepted).

  fused_batch_norm needs float32 scale, offset and statistics, so the
  batch-norm variables stay float32.
  """

  def float16_getter(getter, name, *args, **kwargs):
    if kwargs.get('dtype') == tf.float32 and 'batchnorm' not in name:
      kwargs['dtype'] = tf.float16
      if isinstance(kwargs.get('initializer'), tf.Tensor):
        kwargs['initializer'] = tf.cast(kwargs['initializer'], tf.float16)
    return getter(name, *args, **kwargs)

  with tf1.variable_scope(
    tf1.get_variable_scope(),
    custom_getter=float16_getter,
    auxiliary_name_scope=False,
  ):
    yield


def forward_pass(
  model,
  images,
  *,
  num_classes: int,
  data_format: str,
  compute_dtype: tf.DType,
  seed: int,
  is_training: bool,
  float16_vars: bool = False,
  tower_index: int = 0,
  initial_values: bool = True,
):
  """The model's forward pass on `images` (its variables made or reused).

  Returns what model.build returns. Alone (not through build_tower) it serves
  a manager that must create every variable before the towers read them (see
  VariableMgr.prepare_towers). initial_values=False: the variables start at
  zeros (the manager overwrites them after initialisation).
  """
  storage = float16_variables() if float16_vars else contextlib.nullcontext()
  placeholders = (
    contextlib.nullcontext()
    if initial_values
    else builder.placeholder_initial_values()
  )
  with storage, placeholders, builder.random_stream(tower_index):
    return model.build(
      images,
      num_classes,
      is_training=is_training,
      data_format=data_format,
      compute_dtype=compute_dtype,
      seed=seed,
    )


def build_tower(
  model,
  images,
  labels,
  *,
  num_classes: int,
  data_format: str,
  compute_dtype: tf.DType,
  seed: int,
  weight_decay: float,
  trainable_variables: Callable[[], list],
  as_read: Callable[[list], list] = list,
  forward_only: bool = False,
  float16_vars: bool = False,
  scale_loss: Callable | None = None,
  tower_index: int = 0,
  single_l2_loss_op: bool = False,
  accuracy: bool = False,
  initial_values: bool = True,
) -> Tower:
  """Builds the model on `images`, its loss and (unless forward_only) grads.

  Call inside the variable manager's tower scope; `trainable_variables` is
  called after the model is built and returns the variables to differentiate;
  `as_read` maps them to what the tower read of them (the manager's
  tower_weights), the tensors the L2 term and the gradients are taken of.
  With `scale_loss`, the gradients are those of scale_loss(loss) (fp16 loss
  scaling); the returned loss is unscaled. `tower_index` is the tower's
  global index (worker w's tower t: w*T+t); it picks its dropout masks.
  With `accuracy`, the tower also counts its batch's right predictions.
  initial_values: see forward_pass.
  """
  out = forward_pass(
    model,
    images,
    num_classes=num_classes,
    data_format=data_format,
    compute_dtype=compute_dtype,
    seed=seed,
    is_training=not forward_only,
    float16_vars=float16_vars,
    tower_index=tower_index,
    initial_values=initial_values,
  )
  with tf1.name_scope('loss'):
    base_loss = _base_loss(out, labels)
    variables = trainable_variables()
    weights = as_read(variables)
    # A model outside models.Model (a test's) may not say: not decayed.
    decay_bn = getattr(model, 'l2_decays_batch_norm', False)
    loss = base_loss + l2_penalty(
      variables, weight_decay, single_l2_loss_op, weights, decay_bn
    )
  correct = _counted_right(out.logits, labels) if accuracy else None
  grads_and_vars = []
  if not forward_only:
    grads_and_vars = _gradients(model, loss, variables, weights, scale_loss)
  update_ops = tuple(out.update_ops)
  return Tower(loss, out.logits, grads_and_vars, update_ops, base_loss, correct)


def _counted_right(logits, labels) -> tuple:
  with tf1.name_scope('accuracy'):
    return correct_predictions(logits, labels)


def _base_loss(out, labels) -> tf.Tensor:
  """Cross entropy of the logits (plus the weighted auxiliary head's)."""
  base_loss = cross_entropy(out.logits, labels)
  if out.aux_logits is not None:
    base_loss += AUX_LOSS_WEIGHT * cross_entropy(out.aux_logits, labels)
  return base_loss


def _gradients(model, loss, variables, weights, scale_loss) -> list:
  """[(gradient, variable)]: of scale_loss(loss) when given, else of loss."""
  with tf1.name_scope('gradients'):
    grads = tf1.gradients(scale_loss(loss) if scale_loss else loss, weights)
  missing = [v.op.name for g, v in zip(grads, variables) if g is None]
  if missing:
    raise ValueError('model %s: no gradient for %s' % (model.name, missing[:3]))
  return list(zip(grads, variables))
