"""What runs where: the model, devices, variable managers and the cluster.

The first group of `params.Params` fields (a base class of Params).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tf_cnn_benchmarks.config import datasets
from tf_cnn_benchmarks.config import fields


@dataclasses.dataclass(frozen=True)
class RunFields:
  """What to run, where it runs, how variables are kept, the cluster."""

  # What to run.
  model: str = fields.field(
    'trivial',
    'Model name; see --list_models.',
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  data_name: Optional[str] = fields.field(
    None,
    'Dataset: imagenet or cifar10. Default: guessed from --data_dir '
    '(the name that appears in it), else imagenet.',
    datasets.names(),
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  batch_size: int = fields.field(
    0,
    'Batch size per device; 0 uses the model default.',
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  num_batches: Optional[int] = fields.field(
    None,
    'Number of timed batches (default 100 unless --num_epochs).',
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  num_epochs: Optional[float] = fields.field(
    None,
    'Number of epochs to run instead of --num_batches; an epoch counts '
    "every worker's images (batch x towers x workers per step).",
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  num_warmup_batches: Optional[int] = fields.field(
    None,
    'Untimed batches run before the timed ones (default 10).',
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  forward_only: bool = fields.field(
    False,
    'Time inference (forward pass) only, no gradients or updates.',
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  freeze_when_forward_only: bool = fields.field(
    False,
    'With --forward_only: freeze the graph after initialisation (variables '
    'become constants), then time the frozen graph.',
    topic=fields.MODEL_DATA,
    classic=True,
  )
  compute_lr_on_cpu: bool = fields.field(
    False,
    "Compute the learning rate on this process's CPU (default: once, on "
    "the global step's device: the CPU in a local run, ps 0 with "
    'parameter servers).',
    topic=fields.PERFORMANCE,
    classic=True,
    graph=True,
  )

  # Where it runs.
  num_gpus: int = fields.field(
    1,
    'Number of towers (devices). With --device=cpu, that many logical '
    'CPU devices are made, one tower each.',
    topic=fields.STRATEGY,
    classic=True,
    graph=True,
  )
  device: Optional[str] = fields.field(
    None,
    'cpu or gpu. Default: gpu when TensorFlow sees one, else cpu.',
    ('cpu', 'gpu'),
    topic=fields.STRATEGY,
    classic=True,
    graph=True,
  )
  data_format: Optional[str] = fields.field(
    None,
    'NHWC or NCHW. Default: NCHW on gpu, NHWC on cpu.',
    ('NHWC', 'NCHW'),
    topic=fields.PERFORMANCE,
    classic=True,
    graph=True,
  )
  num_intra_threads: Optional[int] = fields.field(
    None,
    'Intra-op threads (None: TensorFlow picks).',
    topic=fields.PERFORMANCE,
    classic=True,
  )
  num_inter_threads: int = fields.field(
    0,
    'Inter-op threads (0: TensorFlow picks).',
    topic=fields.PERFORMANCE,
    classic=True,
  )
  xla: bool = fields.field(
    False,
    'XLA auto-clustering for the whole session (global JIT; on CPU also '
    'TF_XLA_FLAGS=--tf_xla_cpu_global_jit, which the package sets).',
    topic=fields.PERFORMANCE,
    classic=True,
  )
  xla_compile: bool = fields.field(
    False,
    "Compile each tower's forward and backward pass with XLA "
    '(tf.xla.experimental.jit_scope over the tower).',
    topic=fields.PERFORMANCE,
    classic=True,
    graph=True,
  )

  # How variables are kept and updated.
  variable_update: str = fields.field(
    'parameter_server',
    'Variable manager; see variable_mgr.names().',
    topic=fields.STRATEGY,
    classic=True,
    graph=True,
  )
  local_parameter_device: Optional[str] = fields.field(
    None,
    'Where parameter_server keeps variables: cpu, or gpu (spread over '
    'the tower devices by size). Default: the tower device kind.',
    ('cpu', 'gpu'),
    topic=fields.STRATEGY,
    classic=True,
    graph=True,
  )
  use_resource_vars: Optional[bool] = fields.field(
    None,
    'Use resource variables instead of reference variables. Default: '
    'false, but true with --fp16_enable_auto_loss_scale (the skipped update '
    'is a conditional branch, which only resource variables can enter).',
    topic=fields.STRATEGY,
    classic=True,
    graph=True,
  )
  staged_vars: bool = fields.field(
    False,
    'parameter_server only: stage the variables on each tower ahead of the '
    'step, and its gradients a step late (the classic pipeline; the forward '
    "pass reads last step's values; see variable_mgr/staged.py).",
    topic=fields.STRATEGY,
    classic=True,
    graph=True,
  )

  # Multi-worker (see docs/multi-worker.md); without --job_name, the
  # TF_CONFIG environment variable is read when set.
  job_name: Optional[str] = fields.field(
    None,
    "This task's job in a cluster: ps, worker or controller. Unset: "
    "a local run (or TF_CONFIG's task, when that is set).",
    ('ps', 'worker', 'controller'),
    topic=fields.CLUSTER,
    classic=True,
  )
  ps_hosts: Optional[str] = fields.field(
    None,
    'Comma-separated HOST:PORT of the ps tasks.',
    topic=fields.CLUSTER,
    classic=True,
  )
  worker_hosts: Optional[str] = fields.field(
    None,
    'Comma-separated HOST:PORT of the worker tasks.',
    topic=fields.CLUSTER,
    classic=True,
  )
  controller_host: Optional[str] = fields.field(
    None,
    'HOST:PORT of the controller (distributed_all_reduce).',
    topic=fields.CLUSTER,
    classic=True,
  )
  task_index: Optional[int] = fields.field(
    None,
    "Index of this task within its job (default 0, or TF_CONFIG's).",
    topic=fields.CLUSTER,
    classic=True,
  )
  server_protocol: str = fields.field(
    'grpc',
    'Protocol of the tf.distribute.Server of each task.',
    topic=fields.CLUSTER,
    classic=True,
  )
  cluster_threads: str = fields.field(
    'auto',
    "Thread pools of each task's server. auto: the tasks sharing a host "
    'split its cores (workers evenly; a ps or controller beside them gets '
    'an even share of all its tasks); a task alone on its host keeps '
    "TensorFlow's defaults. tf_default: every task sizes its pools for all "
    'the cores. --num_intra_threads / --num_inter_threads win over both.',
    ('auto', 'tf_default'),
    topic=fields.CLUSTER,
    classic=False,
  )
  pack_ps_transfers: bool = fields.field(
    True,
    'parameter_server, distributed_replicated and hybrid in a cluster: a '
    "worker's gradients for a ps task travel as one packed tensor, and "
    "the variables' values back as one per ps task (parameter_server's "
    "reads, distributed_replicated's copies), not one RPC per tensor.",
    topic=fields.CLUSTER,
    classic=False,
    graph=True,
  )
  cross_replica_sync: bool = fields.field(
    True,
    'parameter_server / distributed_replicated in a cluster: average '
    "every worker's gradients of a step before one update (false: each "
    'worker updates the shared variables on its own, asynchronously).',
    topic=fields.CLUSTER,
    classic=True,
    graph=True,
  )
  ps_partition_threshold_bytes: int = fields.field(
    0,
    'parameter_server in a cluster: split each trainable variable of '
    'more bytes than this along its first axis over the ps tasks (0: off; '
    'the parts are saved as NAME/part_K).',
    topic=fields.CLUSTER,
    classic=False,
    graph=True,
  )
  hybrid_threshold_bytes: int = fields.field(
    1 << 20,
    'hybrid: variables of more bytes than this live on the ps '
    'tasks; smaller ones are all-reduced across workers.',
    topic=fields.CLUSTER,
    classic=False,
    graph=True,
  )
