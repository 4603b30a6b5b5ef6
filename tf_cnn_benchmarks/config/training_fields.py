"""Precision, gradient reduction and optimisation fields of `params.Params`.

The second group of Params fields (a base class of Params).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tf_cnn_benchmarks.config import fields
from variable_mgr import collective_catalog
from variable_mgr.compression import catalog as compression_catalog

# momentum is Nesterov momentum, as in the classic harness; plain_momentum is
# the heavy-ball update (a new name for a new behaviour).
OPTIMIZERS = ('sgd', 'momentum', 'plain_momentum', 'rmsprop', 'adam')


# Field makers for the runs of fields that share a topic and graph setting
# (classic=True unless a field says otherwise).
_model_data_graph_field = fields.family(fields.MODEL_DATA, graph=True)
_precision_graph_field = fields.family(fields.PRECISION, graph=True)
_strategy_graph_field = fields.family(fields.STRATEGY, graph=True)


@dataclasses.dataclass(frozen=True)
class TrainingFields:
  """Precision, all-reduce and optimiser settings."""

  # Precision.
  use_fp16: bool = _precision_graph_field(
    False,
    'Compute in float16 (variables float32, cast when read; loss in '
    'float32), with loss scaling.',
  )
  fp16_vars: bool = _precision_graph_field(
    False,
    'With --use_fp16: store the variables in float16 too (batch-norm '
    'variables stay float32).',
  )
  fp16_loss_scale: Optional[float] = _precision_graph_field(
    None, 'Initial loss scale with --use_fp16 (default 128).'
  )
  fp16_enable_auto_loss_scale: bool = _precision_graph_field(
    False,
    'With --use_fp16: skip updates whose reduced gradients hold '
    'inf/nan and halve the loss scale; double it after '
    '--fp16_inc_loss_scale_every_n finite steps in a row.',
  )
  fp16_inc_loss_scale_every_n: int = _precision_graph_field(
    1000, 'Finite steps in a row before the auto loss scale doubles.'
  )
  use_bf16: bool = _precision_graph_field(
    False,
    'Compute in bfloat16 (variables float32); no loss scaling needed.',
    classic=False,
  )

  # How replicated gradients are all-reduced (variable_mgr/allreduce.py).
  all_reduce_spec: Optional[str] = _strategy_graph_field(
    None,
    'All-reduce algorithm(s): ALG[#N][/ALG[#N]] or '
    'ALG:LIMIT:ALG[:LIMIT:ALG...]; LIMIT counts tensor ELEMENTS (K/M/G/T '
    'suffixes are powers of two). Algorithms: copy, pscpu, psgpu, xring, '
    'rechd, shuffle, collective, nccl, hierarchical_copy. Default: copy.',
  )
  gradient_repacking: int = _strategy_graph_field(
    0,
    "Concatenate each tower's gradients and all-reduce them as this "
    'many packs (0: off).',
  )
  agg_small_grads_max_bytes: int = _strategy_graph_field(
    0,
    'Pack runs of gradients of at most this many bytes into one '
    'all-reduce (0: off).',
  )
  agg_small_grads_max_group: int = _strategy_graph_field(
    10, 'At most this many gradients per small-gradient pack.'
  )
  compact_gradient_transfer: bool = _strategy_graph_field(
    True, 'All-reduce gradients in 16 bits when computing in fp16/bf16.'
  )
  gradient_compression: str = _strategy_graph_field(
    'none',
    'How gradients travel in the reduction of every manager that reduces '
    'them: none; fp16, bf16 (float32 gradients sent in 16 bits); fp16_ef, '
    'bf16_ef (the same, each replica carrying its rounding error to the '
    'next step); powersgd (rank --powersgd_rank approximations, warm '
    'started, with error feedback; all-reduce managers only). Unlike '
    '--compact_gradient_transfer it applies whatever the compute precision.',
    compression_catalog.NAMES,
    classic=False,
  )
  powersgd_rank: int = _strategy_graph_field(
    compression_catalog.DEFAULT_POWERSGD_RANK,
    'Rank of the approximations of --gradient_compression=powersgd.',
    classic=False,
  )
  gradient_accumulation_steps: int = _strategy_graph_field(
    1,
    'Micro-steps per update: each of the first K-1 adds its gradients to '
    'buffers; the K-th reduces the sum / K and applies it. A step (global '
    'step, --num_batches, images/sec, epochs) is one update of K x '
    '--batch_size images per device. 1: every step updates.',
    classic=False,
  )
  variable_consistency: str = _strategy_graph_field(
    'strong',
    'strong: each step applies its own gradients. relaxed: the '
    'reduced gradients are applied one step late, so the update overlaps '
    'the next step (replicated only).',
    ('strong', 'relaxed'),
  )
  allreduce_merge_scope: int = _strategy_graph_field(
    1,
    'All-reduce gradients in groups of this many under one name scope. '
    "With collective_all_reduce and hybrid, > 1 also turns on grappler's "
    'scoped allocator for CollectiveReduce, which merges the collectives '
    'of a scope into one (as classic).',
  )
  collective_implementation: str = _strategy_graph_field(
    'auto',
    'How collective ops communicate (their communication_hint): ring '
    "(TensorFlow's ring; over gRPC between workers), nccl (NCCL; GPU "
    "runs only; also sets the session's collective_nccl), auto (nccl when "
    'every device of a collective is a GPU, else ring). For '
    'collective_all_reduce, hybrid and --all_reduce_spec=collective.',
    collective_catalog.IMPLEMENTATIONS,
    classic=False,
  )
  collective_bytes_per_pack: int = _strategy_graph_field(
    0,
    'Concatenate gradients of one dtype into packs of at most this many '
    'bytes, one collective per pack (after --gradient_compression), as '
    "tf.distribute's CommunicationOptions(bytes_per_pack); 0: one "
    'collective per gradient. For collective_all_reduce, hybrid and '
    '--all_reduce_spec=collective.',
    classic=False,
  )
  hierarchical_copy: bool = _strategy_graph_field(
    False,
    'replicated without --all_reduce_spec: reduce each gradient in two '
    'halves of the towers, then across the halves (--network_topology).',
  )
  network_topology: str = _strategy_graph_field(
    'dgx1',
    'Tower interconnect for --hierarchical_copy: dgx1 (any even number of '
    'towers) or gcp_v100 (8 towers).',
    ('dgx1', 'gcp_v100'),
  )

  # Optimisation.
  optimizer: str = _model_data_graph_field(
    'sgd',
    'Optimizer. momentum is Nesterov momentum (as in the classic '
    'harness); plain_momentum is the heavy-ball update.',
    OPTIMIZERS,
  )
  init_learning_rate: Optional[float] = _model_data_graph_field(
    None, "Initial learning rate; default: the model's own schedule."
  )
  num_epochs_per_decay: float = _model_data_graph_field(
    0, 'Epochs between exponential learning-rate decays (0: none).'
  )
  learning_rate_decay_factor: float = _model_data_graph_field(
    0, 'Factor of each exponential learning-rate decay.'
  )
  minimum_learning_rate: float = _model_data_graph_field(
    0, 'Floor of the learning rate, whatever the schedule (0: none).'
  )
  piecewise_learning_rate_schedule: Optional[str] = _model_data_graph_field(
    None,
    'LR0;E1;LR1;...;En;LRn: LR0 until epoch E1, LR1 from E1, ..., LRn '
    'from En on.',
  )
  num_learning_rate_warmup_epochs: float = _model_data_graph_field(
    0,
    'Ramp the learning rate linearly from 0 to --init_learning_rate (or '
    "the piecewise schedule's LR0) over this many epochs.",
  )
  resnet_base_lr: Optional[float] = _model_data_graph_field(
    None,
    "Base of the ImageNet ResNets' own schedule: the learning rate at a "
    'global batch of 256 (default 0.128).',
  )
  momentum: float = _model_data_graph_field(
    0.9, 'Momentum of the momentum and plain_momentum optimizers.'
  )
  rmsprop_decay: float = _model_data_graph_field(0.9, 'RMSProp decay.')
  rmsprop_momentum: float = _model_data_graph_field(0.9, 'RMSProp momentum.')
  rmsprop_epsilon: float = _model_data_graph_field(1.0, 'RMSProp epsilon.')
  adam_beta1: float = _model_data_graph_field(0.9, 'Adam beta1.')
  adam_beta2: float = _model_data_graph_field(0.999, 'Adam beta2.')
  adam_epsilon: float = _model_data_graph_field(1e-8, 'Adam epsilon.')
  weight_decay: float = _model_data_graph_field(
    0.00004,
    'L2 weight decay factor (batch-norm variables excluded, except for the '
    'official_resnet* models, as in the classic harness).',
  )
  single_l2_loss_op: bool = fields.field(
    False,
    'Compute the L2 term as one l2_loss of the concatenated variables '
    '(same value, fewer ops).',
    topic=fields.PERFORMANCE,
    classic=True,
    graph=True,
  )
  gradient_clip: Optional[float] = _model_data_graph_field(
    None,
    'Clip each element of the reduced gradients to [-c, c] (the '
    'classic meaning).',
  )
  gradient_clip_norm: Optional[float] = _model_data_graph_field(
    None, 'Clip the reduced gradients to this global norm.', classic=False
  )
  tf_random_seed: int = _model_data_graph_field(
    1234, 'Seed of the synthetic data and of the variable initializers.'
  )
