"""What runs where: the model, devices, variable managers and the cluster.

The first group of `params.Params` fields (a base class of Params).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tf_cnn_benchmarks.config import datasets
from tf_cnn_benchmarks.config import fields

# The automatic run lengths' bounds and defaults (config/auto_lengths.py;
# the rules: reporting/run_length.py).
MAX_AUTO_WARMUP_STEPS = 1000  # --num_warmup_batches=auto discards at most
DEFAULT_TARGET_INTERVAL = 0.01
DEFAULT_MAX_RUN_SECONDS = 600.0
DEFAULT_MAX_AUTO_BATCHES = 10000

# Field makers for the runs of fields that share a topic and graph setting
# (classic=True unless a field says otherwise).
_cluster_field = fields.family(fields.CLUSTER)
_cluster_graph_field = fields.family(fields.CLUSTER, graph=True)
_model_data_graph_field = fields.family(fields.MODEL_DATA, graph=True)
_performance_field = fields.family(fields.PERFORMANCE)
_performance_graph_field = fields.family(fields.PERFORMANCE, graph=True)
_strategy_graph_field = fields.family(fields.STRATEGY, graph=True)


@dataclasses.dataclass(frozen=True)
class RunFields:
  """What to run, where it runs, how variables are kept, the cluster."""

  # What to run.
  model: str = _model_data_graph_field(
    'trivial', 'Model name; see --list_models.'
  )
  data_name: Optional[str] = _model_data_graph_field(
    None,
    'Dataset: imagenet or cifar10. Default: guessed from --data_dir '
    '(the name that appears in it), else imagenet.',
    datasets.names(),
  )
  batch_size: int = _model_data_graph_field(
    0, 'Batch size per device; 0 uses the model default.'
  )
  num_batches: Optional[int] = fields.field(
    None,
    'Number of timed batches (default 100 unless --num_epochs). auto: run '
    "until the timed steps' 95% interval (batch means) is within "
    '--target_interval of the mean, at most --max_run_seconds and '
    '--max_auto_batches (docs/performance.md#run-length); not in a cluster '
    'or with --eval.',
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
    auto=True,
  )
  num_epochs: Optional[float] = _model_data_graph_field(
    None,
    'Number of epochs to run instead of --num_batches; an epoch counts '
    "every worker's images (batch x towers x workers per step).",
  )
  num_warmup_batches: Optional[int] = fields.field(
    None,
    'Untimed batches run before the timed ones (default 10). auto: keep '
    'every step time and discard the start the MSER-5 rule finds '
    'transient, at most half of the steps and %d '
    '(docs/performance.md#run-length); not in a cluster or with --eval.'
    % MAX_AUTO_WARMUP_STEPS,
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
    auto=True,
  )
  target_interval: Optional[float] = fields.field(
    None,
    "--num_batches=auto: stop once the 95%% interval's half-width is at "
    'most this share of the mean step time (default %g; 0.01: +/- 1%%).'
    % DEFAULT_TARGET_INTERVAL,
    topic=fields.MODEL_DATA,
    classic=False,
  )
  max_run_seconds: Optional[float] = fields.field(
    None,
    '--num_batches=auto: stop after this many seconds of steps (warm-up '
    'included, start-up not) even if the target is not reached '
    '(default %g).' % DEFAULT_MAX_RUN_SECONDS,
    topic=fields.MODEL_DATA,
    classic=False,
  )
  max_auto_batches: Optional[int] = fields.field(
    None,
    '--num_batches=auto: stop after this many steps (warm-up included) '
    'even if the target is not reached (default %d).'
    % DEFAULT_MAX_AUTO_BATCHES,
    topic=fields.MODEL_DATA,
    classic=False,
  )
  forward_only: bool = _model_data_graph_field(
    False, 'Time inference (forward pass) only, no gradients or updates.'
  )
  freeze_when_forward_only: bool = fields.field(
    False,
    'With --forward_only: freeze the graph after initialisation (variables '
    'become constants), then time the frozen graph.',
    topic=fields.MODEL_DATA,
    classic=True,
  )
  compute_lr_on_cpu: bool = _performance_graph_field(
    False,
    "Compute the learning rate on this process's CPU (default: once, on "
    "the global step's device: the CPU in a local run, ps 0 with "
    'parameter servers).',
  )

  # Where it runs.
  num_gpus: int = _strategy_graph_field(
    1,
    'Number of towers (devices). With --device=cpu, that many logical '
    'CPU devices are made, one tower each.',
  )
  device: Optional[str] = _strategy_graph_field(
    None,
    'cpu or gpu. Default: gpu when TensorFlow sees one, else cpu.',
    ('cpu', 'gpu'),
  )
  data_format: Optional[str] = _performance_graph_field(
    None, 'NHWC or NCHW. Default: NCHW on gpu, NHWC on cpu.', ('NHWC', 'NCHW')
  )
  num_intra_threads: Optional[int] = _performance_field(
    None, 'Intra-op threads (None: TensorFlow picks).'
  )
  num_inter_threads: int = _performance_field(
    0, 'Inter-op threads (0: TensorFlow picks).'
  )
  xla: bool = _performance_field(
    False,
    'XLA auto-clustering for the whole session (global JIT; on CPU also '
    'TF_XLA_FLAGS=--tf_xla_cpu_global_jit, which the package sets).',
  )
  xla_compile: bool = _performance_graph_field(
    False,
    "Compile each tower's forward and backward pass with XLA "
    '(tf.xla.experimental.jit_scope over the tower).',
  )

  # How variables are kept and updated.
  variable_update: str = _strategy_graph_field(
    'parameter_server',
    'Variable manager; see variable_mgr.names(). auto: measure a short '
    'profile (or read --scaling_profile), predict every strategy for this '
    "run's towers and cluster, print the ranking and run the best "
    '(docs/predicting.md).',
  )
  scaling_profile: Optional[str] = fields.field(
    None,
    '--variable_update=auto: predict from this profile file '
    '(scripts/profile_host.py) instead of measuring one first; required in '
    'a hand-started cluster, so that every task makes the same choice.',
    topic=fields.STRATEGY,
    classic=False,
  )
  scaling_profile_any_model: bool = fields.field(
    False,
    '--variable_update=auto: rank the strategies from a --scaling_profile '
    'of another run than this one (another --model, --data_name, '
    '--batch_size, --data_format or --use_fp16; a warning line names what '
    'differs); without it such a profile is refused.',
    topic=fields.STRATEGY,
    classic=False,
  )
  auto_trials_measured: Optional[str] = fields.field(
    None,
    '--variable_update=auto: the strategies a launcher ran briefly because '
    'the prediction could not order them (a JSON list; '
    'scripts/launch_local_cluster.py --auto_trials sets it): run the one '
    'that measured fastest instead of the predicted best.',
    topic=fields.STRATEGY,
    classic=False,
  )
  link_mbits: Optional[float] = fields.field(
    None,
    "--variable_update=auto: bandwidth of each host's link, Mbit/s, for the "
    'prediction (default: a cluster on several hosts measures it between '
    "its tasks before they start; one host: the profile's loopback rate).",
    topic=fields.STRATEGY,
    classic=False,
  )
  link_topology: str = fields.field(
    'switch',
    '--variable_update=auto: shared: every host on one link; switch: a '
    'switch port per host.',
    ('shared', 'switch'),
    topic=fields.STRATEGY,
    classic=False,
  )
  tasks_colocated: Optional[bool] = _cluster_field(
    None,
    "Every task of the cluster shares one host's cores: "
    '--cluster_threads=auto splits them among all its tasks, and '
    '--variable_update=auto predicts for one host (default: when every '
    "task's address names the same host; the local launcher sets it).",
    classic=False,
  )
  local_parameter_device: Optional[str] = _strategy_graph_field(
    None,
    'Where parameter_server keeps variables: cpu, or gpu (spread over '
    'the tower devices by size). Default: the tower device kind.',
    ('cpu', 'gpu'),
  )
  use_resource_vars: Optional[bool] = _strategy_graph_field(
    None,
    'Use resource variables instead of reference variables. Default: '
    'false, but true with --fp16_enable_auto_loss_scale (the skipped update '
    'is a conditional branch, which only resource variables can enter).',
  )
  staged_vars: bool = _strategy_graph_field(
    False,
    'parameter_server only: stage the variables on each tower ahead of the '
    'step, and its gradients a step late (the classic pipeline; the forward '
    "pass reads last step's values; see variable_mgr/staged.py).",
  )

  # Multi-worker (see docs/multi-worker.md); without --job_name, the
  # TF_CONFIG environment variable is read when set.
  job_name: Optional[str] = _cluster_field(
    None,
    "This task's job in a cluster: ps, worker or controller; evaluator: "
    "follow the chief's checkpoints in --train_dir, evaluating each new "
    'one (--eval implied), outside the training cluster. Unset: a local '
    "run (or TF_CONFIG's task, when that is set).",
    ('ps', 'worker', 'controller', 'evaluator'),
  )
  ps_hosts: Optional[str] = _cluster_field(
    None, 'Comma-separated HOST:PORT of the ps tasks.'
  )
  worker_hosts: Optional[str] = _cluster_field(
    None, 'Comma-separated HOST:PORT of the worker tasks.'
  )
  controller_host: Optional[str] = _cluster_field(
    None, 'HOST:PORT of the controller (distributed_all_reduce).'
  )
  task_index: Optional[int] = _cluster_field(
    None, "Index of this task within its job (default 0, or TF_CONFIG's)."
  )
  server_protocol: str = _cluster_field(
    'grpc', 'Protocol of the tf.distribute.Server of each task.'
  )
  cluster_threads: str = _cluster_field(
    'auto',
    "Thread pools of each task's server. auto: the tasks sharing a host "
    'split its cores (workers evenly; a ps or controller beside them gets '
    'an even share of all its tasks); a task alone on its host keeps '
    "TensorFlow's defaults. tf_default: every task sizes its pools for all "
    'the cores. --num_intra_threads / --num_inter_threads win over both.',
    ('auto', 'tf_default'),
    classic=False,
  )
  # Slurm (docs/multi-worker.md#slurm); cluster/slurm.py.
  cluster_resolver: str = _cluster_field(
    'auto',
    'What describes the cluster. flags: --job_name and the host flags '
    '(TF_CONFIG ignored); tf_config: TF_CONFIG; slurm: the tasks of this '
    "srun step, each task's job and index from its Slurm rank. auto: the "
    'flags when any is given, else TF_CONFIG when set, else Slurm inside an '
    'srun step of several tasks, else a local run.',
    ('auto', 'flags', 'tf_config', 'slurm'),
    classic=False,
  )
  slurm_ps_tasks: int = _cluster_field(
    0,
    'Under Slurm: the first N ranks of the step are ps tasks, the rest '
    'workers.',
    classic=False,
  )
  slurm_port_base: int = _cluster_field(
    8888,
    'Under Slurm: the task at position k of the cluster (ps tasks first, '
    'then workers) listens on this port + k.',
    classic=False,
  )
  slurm_gpu_binding: str = _cluster_field(
    'resolver',
    "Under Slurm on GPUs. resolver: SlurmClusterResolver shares each node's "
    "GPUs among the node's tasks, --num_gpus each, by setting "
    'CUDA_VISIBLE_DEVICES. slurm: keep CUDA_VISIBLE_DEVICES as srun set it '
    '(srun --gpus-per-task=G).',
    ('resolver', 'slurm'),
    classic=False,
  )
  pack_ps_transfers: bool = _cluster_graph_field(
    True,
    'parameter_server, distributed_replicated and hybrid in a cluster: a '
    "worker's gradients for a ps task travel as one packed tensor, and "
    "the variables' values back as one per ps task (parameter_server's "
    "reads, distributed_replicated's copies), not one RPC per tensor.",
    classic=False,
  )
  cross_replica_sync: bool = _cluster_graph_field(
    True,
    'parameter_server / distributed_replicated in a cluster: average '
    "every worker's gradients of a step before one update (false: each "
    'worker updates the shared variables on its own, asynchronously).',
  )
  ps_partition_threshold_bytes: int = _cluster_graph_field(
    0,
    'parameter_server in a cluster: split each trainable variable of '
    'more bytes than this along its first axis over the ps tasks (0: off; '
    'the parts are saved as NAME/part_K).',
    classic=False,
  )
  hybrid_threshold_bytes: int = _cluster_graph_field(
    1 << 20,
    'hybrid: variables of more bytes than this live on the ps '
    'tasks; smaller ones are all-reduced across workers.',
    classic=False,
  )
