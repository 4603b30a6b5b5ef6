"""Precision, gradient reduction and optimisation fields of `params.Params`.

The second group of Params fields (a base class of Params).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tf_cnn_benchmarks.config import fields

# momentum is Nesterov momentum, as in the classic harness; plain_momentum is
# the heavy-ball update (a new name for a new behaviour).
OPTIMIZERS = ('sgd', 'momentum', 'plain_momentum', 'rmsprop', 'adam')


@dataclasses.dataclass(frozen=True)
class TrainingFields:
  """Precision, all-reduce and optimiser settings."""

  # Precision.
  use_fp16: bool = fields.field(
    False,
    'Compute in float16 (variables float32, cast when read; loss in '
    'float32), with loss scaling.',
    topic=fields.PRECISION,
    classic=True,
    graph=True,
  )
  fp16_vars: bool = fields.field(
    False,
    'With --use_fp16: store the variables in float16 too (batch-norm '
    'variables stay float32).',
    topic=fields.PRECISION,
    classic=True,
    graph=True,
  )
  fp16_loss_scale: Optional[float] = fields.field(
    None,
    'Initial loss scale with --use_fp16 (default 128).',
    topic=fields.PRECISION,
    classic=True,
    graph=True,
  )
  fp16_enable_auto_loss_scale: bool = fields.field(
    False,
    'With --use_fp16: skip updates whose reduced gradients hold '
    'inf/nan and halve the loss scale; double it after '
    '--fp16_inc_loss_scale_every_n finite steps in a row.',
    topic=fields.PRECISION,
    classic=True,
    graph=True,
  )
  fp16_inc_loss_scale_every_n: int = fields.field(
    1000,
    'Finite steps in a row before the auto loss scale doubles.',
    topic=fields.PRECISION,
    classic=True,
    graph=True,
  )
  use_bf16: bool = fields.field(
    False,
    'Compute in bfloat16 (variables float32); no loss scaling needed.',
    topic=fields.PRECISION,
    classic=False,
    graph=True,
  )

  # How replicated gradients are all-reduced (variable_mgr/allreduce.py).
  all_reduce_spec: Optional[str] = fields.field(
    None,
    'All-reduce algorithm(s): ALG[#N][/ALG[#N]] or '
    'ALG:LIMIT:ALG[:LIMIT:ALG...]; LIMIT counts tensor ELEMENTS (K/M/G/T '
    'suffixes are powers of two). Algorithms: copy, pscpu, psgpu, xring, '
    'rechd, shuffle, collective, nccl, hierarchical_copy. Default: copy.',
    topic=fields.STRATEGY,
    classic=True,
    graph=True,
  )
  gradient_repacking: int = fields.field(
    0,
    "Concatenate each tower's gradients and all-reduce them as this "
    'many packs (0: off).',
    topic=fields.STRATEGY,
    classic=True,
    graph=True,
  )
  agg_small_grads_max_bytes: int = fields.field(
    0,
    'Pack runs of gradients of at most this many bytes into one '
    'all-reduce (0: off).',
    topic=fields.STRATEGY,
    classic=True,
    graph=True,
  )
  agg_small_grads_max_group: int = fields.field(
    10,
    'At most this many gradients per small-gradient pack.',
    topic=fields.STRATEGY,
    classic=True,
    graph=True,
  )
  compact_gradient_transfer: bool = fields.field(
    True,
    'All-reduce gradients in 16 bits when computing in fp16/bf16.',
    topic=fields.STRATEGY,
    classic=True,
    graph=True,
  )
  variable_consistency: str = fields.field(
    'strong',
    'strong: each step applies its own gradients. relaxed: the '
    'reduced gradients are applied one step late, so the update overlaps '
    'the next step (replicated only).',
    ('strong', 'relaxed'),
    topic=fields.STRATEGY,
    classic=True,
    graph=True,
  )
  allreduce_merge_scope: int = fields.field(
    1,
    'All-reduce gradients in groups of this many under one name scope.',
    topic=fields.STRATEGY,
    classic=True,
    graph=True,
  )
  hierarchical_copy: bool = fields.field(
    False,
    'replicated without --all_reduce_spec: reduce each gradient in two '
    'halves of the towers, then across the halves (--network_topology).',
    topic=fields.STRATEGY,
    classic=True,
    graph=True,
  )
  network_topology: str = fields.field(
    'dgx1',
    'Tower interconnect for --hierarchical_copy: dgx1 (any even number of '
    'towers) or gcp_v100 (8 towers).',
    ('dgx1', 'gcp_v100'),
    topic=fields.STRATEGY,
    classic=True,
    graph=True,
  )

  # Optimisation.
  optimizer: str = fields.field(
    'sgd',
    'Optimizer. momentum is Nesterov momentum (as in the classic '
    'harness); plain_momentum is the heavy-ball update.',
    OPTIMIZERS,
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  init_learning_rate: Optional[float] = fields.field(
    None,
    "Initial learning rate; default: the model's own schedule.",
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  num_epochs_per_decay: float = fields.field(
    0,
    'Epochs between exponential learning-rate decays (0: none).',
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  learning_rate_decay_factor: float = fields.field(
    0,
    'Factor of each exponential learning-rate decay.',
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  minimum_learning_rate: float = fields.field(
    0,
    'Floor of the learning rate, whatever the schedule (0: none).',
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  piecewise_learning_rate_schedule: Optional[str] = fields.field(
    None,
    'LR0;E1;LR1;...;En;LRn: LR0 until epoch E1, LR1 from E1, ..., LRn '
    'from En on.',
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  num_learning_rate_warmup_epochs: float = fields.field(
    0,
    'Ramp the learning rate linearly from 0 to --init_learning_rate (or '
    "the piecewise schedule's LR0) over this many epochs.",
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  resnet_base_lr: Optional[float] = fields.field(
    None,
    "Base of the ImageNet ResNets' own schedule: the learning rate at a "
    'global batch of 256 (default 0.128).',
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  momentum: float = fields.field(
    0.9,
    'Momentum of the momentum and plain_momentum optimizers.',
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  rmsprop_decay: float = fields.field(
    0.9, 'RMSProp decay.', topic=fields.MODEL_DATA, classic=True, graph=True
  )
  rmsprop_momentum: float = fields.field(
    0.9, 'RMSProp momentum.', topic=fields.MODEL_DATA, classic=True, graph=True
  )
  rmsprop_epsilon: float = fields.field(
    1.0, 'RMSProp epsilon.', topic=fields.MODEL_DATA, classic=True, graph=True
  )
  adam_beta1: float = fields.field(
    0.9, 'Adam beta1.', topic=fields.MODEL_DATA, classic=True, graph=True
  )
  adam_beta2: float = fields.field(
    0.999, 'Adam beta2.', topic=fields.MODEL_DATA, classic=True, graph=True
  )
  adam_epsilon: float = fields.field(
    1e-8, 'Adam epsilon.', topic=fields.MODEL_DATA, classic=True, graph=True
  )
  weight_decay: float = fields.field(
    0.00004,
    'L2 weight decay factor (batch-norm variables excluded).',
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  single_l2_loss_op: bool = fields.field(
    False,
    'Compute the L2 term as one l2_loss of the concatenated variables '
    '(same value, fewer ops).',
    topic=fields.PERFORMANCE,
    classic=True,
    graph=True,
  )
  gradient_clip: Optional[float] = fields.field(
    None,
    'Clip each element of the reduced gradients to [-c, c] (the '
    'classic meaning).',
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  gradient_clip_norm: Optional[float] = fields.field(
    None,
    'Clip the reduced gradients to this global norm.',
    topic=fields.MODEL_DATA,
    classic=False,
    graph=True,
  )
  tf_random_seed: int = fields.field(
    1234,
    'Seed of the synthetic data and of the variable initializers.',
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
