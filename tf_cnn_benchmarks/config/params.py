"""Run parameters: one frozen `Params` value, the absl flags generated from it.

Every field of `Params` is a command-line flag with the same name. The flag
definitions are generated from the dataclass fields (type, default, help), so
the two cannot drift apart. `make_params(**overrides)` builds a validated,
resolved `Params` without touching absl, for tests and scripts;
`make_plan(**overrides)` also returns what they resolve to (cluster, manager
class, mode), decided once.

"Resolved" means every automatic default is replaced by the concrete value
the run will use (device kind, data format, batch size, number of batches,
...), so the value recorded in a results line says exactly what ran. The
checks and the defaults themselves are in resolve.py.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from typing import Any, Optional

from absl import flags

from tf_cnn_benchmarks.cluster import spec as cluster_spec
from tf_cnn_benchmarks.config import datasets
from tf_cnn_benchmarks.config import input_settings
from tf_cnn_benchmarks.platform import gpu_runtime
from tf_cnn_benchmarks.platform import runtime_knobs


class ParamsError(ValueError):
  """A bad flag value or combination; the message is one line naming it."""


def _field(default: Any, help_text: str, choices: tuple = ()) -> Any:
  return dataclasses.field(
    default=default, metadata={'help': help_text, 'choices': choices}
  )


# momentum is Nesterov momentum, as in the classic harness; plain_momentum is
# the heavy-ball update (a new name for a new behaviour).
OPTIMIZERS = ('sgd', 'momentum', 'plain_momentum', 'rmsprop', 'adam')

# Classic model names that are not CNNs, or not available yet: one line each.
NOT_CNN_MODELS = {
  'ncf': 'ncf is a recommendation model, not a CNN; this harness runs CNNs',
  'deepspeech2': 'deepspeech2 is a speech model, not a CNN; this harness '
  'runs CNNs',
  'ssd300': 'ssd300 (coco) is not available yet',
}
# Classic --variable_update=horovod (issue 15, item 7): Horovod is a C++
# extension built from source against the installed TensorFlow. Its last
# release (0.28.1) does not compile against TF 2.21: the wheel's XLA headers
# include highwayhash/arch_specific.h, which the wheel does not ship.
HOROVOD_UNAVAILABLE = (
  '--variable_update=horovod: Horovod is not available here (horovod 0.28.1 '
  'does not compile against TensorFlow 2.21); '
  'use --variable_update=collective_all_reduce, the ring all-reduce across '
  'worker processes (--worker_hosts)'
)


@dataclasses.dataclass(frozen=True)
class Params(
  gpu_runtime.RuntimeSettings,
  runtime_knobs.KnobSettings,
  input_settings.InputSettings,
):
  """Everything a benchmark run depends on. Field name == flag name.

  The GPU / MKL runtime fields are inherited from gpu_runtime.RuntimeSettings,
  the input, runtime and profiling knobs from runtime_knobs.KnobSettings,
  the ImageNet preprocessing flags from input_settings.InputSettings.
  """

  # What to run.
  model: str = _field('trivial', 'Model name; see --list_models.')
  data_name: Optional[str] = _field(
    None,
    'Dataset: imagenet or cifar10. Default: guessed from --data_dir '
    '(the name that appears in it), else imagenet.',
    datasets.names(),
  )
  batch_size: int = _field(
    0, 'Batch size per device; 0 uses the model default.'
  )
  num_batches: Optional[int] = _field(
    None, 'Number of timed batches (default 100 unless --num_epochs).'
  )
  num_epochs: Optional[float] = _field(
    None,
    'Number of epochs to run instead of --num_batches; an epoch counts '
    "every worker's images (batch x towers x workers per step).",
  )
  num_warmup_batches: Optional[int] = _field(
    None, 'Untimed batches run before the timed ones (default 10).'
  )
  forward_only: bool = _field(
    False, 'Time inference (forward pass) only, no gradients or updates.'
  )
  freeze_when_forward_only: bool = _field(
    False,
    'With --forward_only: freeze the graph after initialisation (variables '
    'become constants), then time the frozen graph.',
  )
  compute_lr_on_cpu: bool = _field(
    False,
    "Compute the learning rate on this process's CPU (default: once, on "
    "the global step's device: the CPU in a local run, ps 0 with "
    'parameter servers).',
  )

  # Where it runs.
  num_gpus: int = _field(
    1,
    'Number of towers (devices). With --device=cpu, that many logical '
    'CPU devices are made, one tower each.',
  )
  device: Optional[str] = _field(
    None,
    'cpu or gpu. Default: gpu when TensorFlow sees one, else cpu.',
    ('cpu', 'gpu'),
  )
  data_format: Optional[str] = _field(
    None, 'NHWC or NCHW. Default: NCHW on gpu, NHWC on cpu.', ('NHWC', 'NCHW')
  )
  num_intra_threads: Optional[int] = _field(
    None, 'Intra-op threads (None: TensorFlow picks).'
  )
  num_inter_threads: int = _field(0, 'Inter-op threads (0: TensorFlow picks).')
  xla: bool = _field(
    False,
    'XLA auto-clustering for the whole session (global JIT; on CPU also '
    'TF_XLA_FLAGS=--tf_xla_cpu_global_jit, which the package sets).',
  )
  xla_compile: bool = _field(
    False,
    "Compile each tower's forward and backward pass with XLA "
    '(tf.xla.experimental.jit_scope over the tower).',
  )

  # How variables are kept and updated.
  variable_update: str = _field(
    'parameter_server', 'Variable manager; see variable_mgr.names().'
  )
  local_parameter_device: Optional[str] = _field(
    None,
    'Where parameter_server keeps variables: cpu, or gpu (spread over '
    'the tower devices by size). Default: the tower device kind.',
    ('cpu', 'gpu'),
  )
  use_resource_vars: Optional[bool] = _field(
    None,
    'Use resource variables instead of reference variables. Default: '
    'false, but true with --fp16_enable_auto_loss_scale (the skipped update '
    'is a conditional branch, which only resource variables can enter).',
  )
  staged_vars: bool = _field(
    False,
    'parameter_server only: stage the variables on each tower ahead of the '
    'step, and its gradients a step late (the classic pipeline; the forward '
    "pass reads last step's values; see variable_mgr/staged.py).",
  )

  # Multi-worker (see README "Multi-worker"); without --job_name, the
  # TF_CONFIG environment variable is read when set.
  job_name: Optional[str] = _field(
    None,
    "This task's job in a cluster: ps, worker or controller. Unset: "
    "a local run (or TF_CONFIG's task, when that is set).",
    ('ps', 'worker', 'controller'),
  )
  ps_hosts: Optional[str] = _field(
    None, 'Comma-separated HOST:PORT of the ps tasks.'
  )
  worker_hosts: Optional[str] = _field(
    None, 'Comma-separated HOST:PORT of the worker tasks.'
  )
  controller_host: Optional[str] = _field(
    None, 'HOST:PORT of the controller (distributed_all_reduce).'
  )
  task_index: Optional[int] = _field(
    None, "Index of this task within its job (default 0, or TF_CONFIG's)."
  )
  server_protocol: str = _field(
    'grpc', 'Protocol of the tf.distribute.Server of each task.'
  )
  cluster_threads: str = _field(
    'auto',
    "Thread pools of each task's server. auto: the tasks sharing a host "
    'split its cores (workers evenly; a ps or controller beside them gets '
    'an even share of all its tasks); a task alone on its host keeps '
    "TensorFlow's defaults. tf_default: every task sizes its pools for all "
    'the cores. --num_intra_threads / --num_inter_threads win over both.',
    ('auto', 'tf_default'),
  )
  pack_ps_transfers: bool = _field(
    True,
    'parameter_server, distributed_replicated and hybrid in a cluster: a '
    "worker's gradients for a ps task travel as one packed tensor, and "
    "the variables' values back as one per ps task (parameter_server's "
    "reads, distributed_replicated's copies), not one RPC per tensor.",
  )
  cross_replica_sync: bool = _field(
    True,
    'parameter_server / distributed_replicated in a cluster: average '
    "every worker's gradients of a step before one update (false: each "
    'worker updates the shared variables on its own, asynchronously).',
  )
  ps_partition_threshold_bytes: int = _field(
    0,
    'parameter_server in a cluster: split each trainable variable of '
    'more bytes than this along its first axis over the ps tasks (0: off; '
    'the parts are saved as NAME/part_K).',
  )
  hybrid_threshold_bytes: int = _field(
    1 << 20,
    'hybrid: variables of more bytes than this live on the ps '
    'tasks; smaller ones are all-reduced across workers.',
  )

  # Precision.
  use_fp16: bool = _field(
    False,
    'Compute in float16 (variables float32, cast when read; loss in '
    'float32), with loss scaling.',
  )
  fp16_vars: bool = _field(
    False,
    'With --use_fp16: store the variables in float16 too (batch-norm '
    'variables stay float32).',
  )
  fp16_loss_scale: Optional[float] = _field(
    None, 'Initial loss scale with --use_fp16 (default 128).'
  )
  fp16_enable_auto_loss_scale: bool = _field(
    False,
    'With --use_fp16: skip updates whose reduced gradients hold '
    'inf/nan and halve the loss scale; double it after '
    '--fp16_inc_loss_scale_every_n finite steps in a row.',
  )
  fp16_inc_loss_scale_every_n: int = _field(
    1000, 'Finite steps in a row before the auto loss scale doubles.'
  )
  use_bf16: bool = _field(
    False, 'Compute in bfloat16 (variables float32); no loss scaling needed.'
  )

  # How replicated gradients are all-reduced (variable_mgr/allreduce.py).
  all_reduce_spec: Optional[str] = _field(
    None,
    'All-reduce algorithm(s): ALG[#N][/ALG[#N]] or '
    'ALG:LIMIT:ALG[:LIMIT:ALG...]; LIMIT counts tensor ELEMENTS (K/M/G/T '
    'suffixes are powers of two). Algorithms: copy, pscpu, psgpu, xring, '
    'rechd, shuffle, collective, nccl, hierarchical_copy. Default: copy.',
  )
  gradient_repacking: int = _field(
    0,
    "Concatenate each tower's gradients and all-reduce them as this "
    'many packs (0: off).',
  )
  agg_small_grads_max_bytes: int = _field(
    0,
    'Pack runs of gradients of at most this many bytes into one '
    'all-reduce (0: off).',
  )
  agg_small_grads_max_group: int = _field(
    10, 'At most this many gradients per small-gradient pack.'
  )
  compact_gradient_transfer: bool = _field(
    True, 'All-reduce gradients in 16 bits when computing in fp16/bf16.'
  )
  variable_consistency: str = _field(
    'strong',
    'strong: each step applies its own gradients. relaxed: the '
    'reduced gradients are applied one step late, so the update overlaps '
    'the next step (replicated only).',
    ('strong', 'relaxed'),
  )
  allreduce_merge_scope: int = _field(
    1, 'All-reduce gradients in groups of this many under one name scope.'
  )
  hierarchical_copy: bool = _field(
    False,
    'replicated without --all_reduce_spec: reduce each gradient in two '
    'halves of the towers, then across the halves (--network_topology).',
  )
  network_topology: str = _field(
    'dgx1',
    'Tower interconnect for --hierarchical_copy: dgx1 (any even number of '
    'towers) or gcp_v100 (8 towers).',
    ('dgx1', 'gcp_v100'),
  )

  # Optimisation.
  optimizer: str = _field(
    'sgd',
    'Optimizer. momentum is Nesterov momentum (as in the classic '
    'harness); plain_momentum is the heavy-ball update.',
    OPTIMIZERS,
  )
  init_learning_rate: Optional[float] = _field(
    None, "Initial learning rate; default: the model's own schedule."
  )
  num_epochs_per_decay: float = _field(
    0, 'Epochs between exponential learning-rate decays (0: none).'
  )
  learning_rate_decay_factor: float = _field(
    0, 'Factor of each exponential learning-rate decay.'
  )
  minimum_learning_rate: float = _field(
    0, 'Floor of the learning rate, whatever the schedule (0: none).'
  )
  piecewise_learning_rate_schedule: Optional[str] = _field(
    None,
    'LR0;E1;LR1;...;En;LRn: LR0 until epoch E1, LR1 from E1, ..., LRn '
    'from En on.',
  )
  num_learning_rate_warmup_epochs: float = _field(
    0,
    'Ramp the learning rate linearly from 0 to --init_learning_rate (or '
    "the piecewise schedule's LR0) over this many epochs.",
  )
  resnet_base_lr: Optional[float] = _field(
    None,
    "Base of the ImageNet ResNets' own schedule: the learning rate at a "
    'global batch of 256 (default 0.128).',
  )
  momentum: float = _field(
    0.9, 'Momentum of the momentum and plain_momentum optimizers.'
  )
  rmsprop_decay: float = _field(0.9, 'RMSProp decay.')
  rmsprop_momentum: float = _field(0.9, 'RMSProp momentum.')
  rmsprop_epsilon: float = _field(1.0, 'RMSProp epsilon.')
  adam_beta1: float = _field(0.9, 'Adam beta1.')
  adam_beta2: float = _field(0.999, 'Adam beta2.')
  adam_epsilon: float = _field(1e-8, 'Adam epsilon.')
  weight_decay: float = _field(
    0.00004, 'L2 weight decay factor (batch-norm variables excluded).'
  )
  single_l2_loss_op: bool = _field(
    False,
    'Compute the L2 term as one l2_loss of the concatenated variables '
    '(same value, fewer ops).',
  )
  gradient_clip: Optional[float] = _field(
    None,
    'Clip each element of the reduced gradients to [-c, c] (the '
    'classic meaning).',
  )
  gradient_clip_norm: Optional[float] = _field(
    None, 'Clip the reduced gradients to this global norm.'
  )
  tf_random_seed: int = _field(
    1234, 'Seed of the synthetic data and of the variable initializers.'
  )

  # Real data (unset --data_dir: synthetic data).
  data_dir: Optional[str] = _field(
    None,
    'Directory of the real dataset: ImageNet TFRecords '
    '(train-*-of-*, validation-*-of-*) or the CIFAR-10 python batches '
    '(data_batch_1..5, test_batch). Unset: synthetic data.',
  )
  distortions: bool = _field(
    False,
    'Training: ImageNet colour distortion on top of the random '
    'bounding-box crop and flip; CIFAR-10 random crop and flip.',
  )
  resize_method: str = _field(
    'bilinear',
    'How ImageNet images are resized to the model size; '
    'round_robin cycles through the methods per image.',
    ('crop', 'nearest', 'bilinear', 'bicubic', 'area', 'round_robin'),
  )
  datasets_num_private_threads: Optional[int] = _field(
    None,
    'Threads of a private thread pool for the input pipeline '
    '(None: the shared pool).',
  )
  datasets_prefetch_buffer_size: int = _field(
    1, "Batches each tower's input stream prefetches."
  )
  datasets_use_caching: bool = _field(
    False, 'Cache the decoded examples in memory after the first pass.'
  )
  datasets_parallel_interleave_cycle_length: Optional[int] = _field(
    None, 'Files read in parallel per input stream (None: 10).'
  )
  datasets_repeat_cached_sample: bool = _field(
    False,
    'Repeat the first raw record forever (no I/O; decoding and '
    'preprocessing still done per example), as the classic harness.',
  )
  datasets_use_prefetch: bool = _field(
    True,
    "Real data on GPU runs: copy each tower's batches onto its GPU ahead "
    'of use (tf.data prefetch_to_device); CPU towers read from the host.',
  )
  multi_device_iterator_max_buffer_size: int = _field(
    1,
    "With --datasets_use_prefetch: batches held on each tower's device "
    "(classic: the multi-device iterator's host buffer per device).",
  )

  # Checkpoints and evaluation.
  train_dir: Optional[str] = _field(
    None,
    'Checkpoint directory: the run resumes from its latest '
    'checkpoint and saves there (and at the end).',
  )
  save_model_steps: Optional[int] = _field(
    None, 'Save a checkpoint every N steps (needs --train_dir).'
  )
  save_model_secs: int = _field(
    0, 'Save a checkpoint every N seconds (0: off; needs --train_dir).'
  )
  max_ckpts_to_keep: int = _field(5, 'Checkpoints kept in --train_dir.')
  eval: bool = _field(
    False,
    'Evaluate the latest checkpoint of --train_dir on the '
    'validation split: top-1/top-5 accuracy and examples/sec.',
  )
  eval_interval_secs: int = _field(
    0,
    'With --eval: keep evaluating each new checkpoint, polling every '
    'N seconds (0: evaluate the latest once).',
  )
  eval_timeout_secs: int = _field(
    600,
    'With --eval_interval_secs: stop after N seconds without a new checkpoint.',
  )
  eval_during_training_every_n_steps: Optional[int] = _field(
    None,
    'While training, evaluate the current variables after every N timed '
    'steps (and at the end).',
  )
  num_eval_batches: Optional[int] = _field(
    None,
    'Batches per evaluation. Default: from --num_eval_epochs, else as '
    'training: --num_epochs (of the validation split) or --num_batches. A '
    'validation pass that ends first starts again.',
  )
  num_eval_epochs: Optional[float] = _field(
    None,
    'Passes over the validation split per evaluation (batches rounded up).',
  )
  eval_batch_size: int = _field(
    0, 'Evaluation batch size per device (0: --batch_size).'
  )
  eval_dir: Optional[str] = _field(
    '/tmp/tf_cnn_benchmarks/eval',
    'TensorBoard events of the evaluations (eval/Accuracy@1, '
    "eval/Accuracy@5 at the checkpoint's global step); '' writes none.",
  )
  eval_during_training_every_n_epochs: Optional[float] = _field(
    None, 'While training, evaluate after every N epochs (and at the end).'
  )
  eval_during_training_at_specified_steps: tuple = _field(
    (), 'While training, evaluate after these timed steps (and at the end).'
  )
  eval_during_training_at_specified_epochs: tuple = _field(
    (), 'While training, evaluate after these epochs (and at the end).'
  )
  stop_at_top_1_accuracy: Optional[float] = _field(
    None,
    'With an --eval_during_training_* flag: stop training at the first '
    'evaluation whose top-1 accuracy is at least this; report the time '
    'and steps it took.',
  )

  # Observability.
  summary_verbosity: int = _field(
    0,
    'TensorBoard summaries: 0 none, 1 loss/learning rate/loss scale, '
    '2 + gradient and variable norms, 3 + variable histograms.',
  )
  save_summaries_steps: int = _field(
    0, 'Write summaries every N steps into --train_dir (0: never).'
  )
  trace_file: Optional[str] = _field(
    None, 'Write a Chrome trace (chrome://tracing) of one timed step here.'
  )
  graph_file: Optional[str] = _field(
    None,
    'Write the training graph (GraphDef, text if the name ends in '
    '.pbtxt) here.',
  )
  build_only: bool = _field(
    False,
    'Build the graph the other flags describe (any --device and '
    "--num_gpus, cluster flags included: this task's graph), print its "
    'placement report and check that every GPU op has a GPU kernel in this '
    'TensorFlow build; run nothing (no server, session or step). Works on '
    'a machine without a GPU.',
  )
  placement_file: Optional[str] = _field(
    None,
    'Write the placement report here (JSON: every op with its device and '
    'dtypes; where variables live, where gradients are reduced, the bytes '
    'crossing devices per step, ops per device, the GPU kernel check).',
  )

  # Output.
  display_every: int = _field(10, 'Print a table row every N steps.')
  print_training_accuracy: bool = _field(
    False,
    "Add the training batch's top_1_accuracy and top_5_accuracy to the "
    'step table and the results line.',
  )
  loss_type_to_report: str = _field(
    'total_loss',
    'Loss of the step table, summaries and results line: total_loss '
    '(with the L2 term) or base_loss (without it).',
    ('base_loss', 'total_loss'),
  )
  display_perf_ewma: Optional[float] = _field(
    None,
    "The step table's images/sec as an exponentially weighted moving "
    'average of the step times with this weight in (0, 1] for the newest '
    'step.',
  )
  result_file: Optional[str] = _field(
    None, 'Append one JSON line describing the run to this file.'
  )
  peak_tflops_per_device: str = _field(
    'auto',
    'Peak TFLOP/s of one device, for MFU: auto (the dense matmul peak of '
    'the compute dtype, measured once per machine and cached), none (no '
    'MFU), or a number.',
  )

  def _replace(self, **changes: Any) -> 'Params':
    """A copy with some fields changed (the classic namedtuple API)."""
    return dataclasses.replace(self, **changes)

  @property
  def compute_dtype(self):
    """The tf.DType the towers compute in (float16, bfloat16 or float32)."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    if self.use_fp16:
      return tf.float16
    if self.use_bf16:
      return tf.bfloat16
    return tf.float32


FIELDS = {f.name: f for f in dataclasses.fields(Params)}
_HINTS = typing.get_type_hints(Params)


def _base_type(name: str) -> type:
  hint = _HINTS[name]
  args = [a for a in typing.get_args(hint) if a is not type(None)]
  return args[0] if args else hint


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines one absl flag per Params field (idempotent per FlagValues)."""
  definers = {
    bool: flags.DEFINE_bool,
    int: flags.DEFINE_integer,
    float: flags.DEFINE_float,
    str: flags.DEFINE_string,
    tuple: flags.DEFINE_list,  # comma-separated, as the classic list flags
  }
  for name, field in FIELDS.items():
    if name in flag_values:
      continue
    help_text = field.metadata['help']
    if field.metadata['choices']:
      help_text += ' One of: %s.' % ', '.join(field.metadata['choices'])
    default = field.default
    definers[_base_type(name)](
      name,
      list(default) if isinstance(default, tuple) else default,
      help_text,
      flag_values=flag_values,
    )


class Mode(enum.Enum):
  """What a run does with the model."""

  TRAIN = 'train'
  FORWARD_ONLY = 'forward_only'  # inference timing, no gradients
  EVAL = 'eval'  # accuracy of checkpoints (--eval)


@dataclasses.dataclass(frozen=True)
class RunPlan:
  """Params and what they resolve to, decided once at the top level.

  params: the validated, resolved Params.
  cluster: the cluster.spec.Cluster of a multi-worker run, else None.
  manager_cls: the VariableMgr class that runs it (the cluster variant in a
    cluster).
  mode: train, forward only or eval.
  device_was_auto: --device was not given (the header says so).
  warnings: lines the entry point prints once on stderr (flags the run
    ignores, as the classic harness did silently).
  manager_settings: the variable_mgr.ManagerSettings the manager is built
    from (the parsed --all_reduce_spec included); made from params when
    not given.
  """

  params: Params
  cluster: Optional[cluster_spec.Cluster]
  manager_cls: type
  mode: Mode
  device_was_auto: bool = False
  warnings: tuple = ()
  manager_settings: Any = None

  def __post_init__(self):
    if self.manager_settings is None:
      import variable_mgr  # pylint: disable=g-import-not-at-top

      settings = variable_mgr.ManagerSettings.from_params(self.params)
      object.__setattr__(self, 'manager_settings', settings)


def plan_from_flags(flag_values: flags.FlagValues = flags.FLAGS) -> RunPlan:
  """Builds the run plan from parsed flags."""
  return make_plan(**{name: flag_values[name].value for name in FIELDS})


def params_from_flags(flag_values: flags.FlagValues = flags.FLAGS) -> Params:
  """Builds validated, resolved Params from parsed flags."""
  return plan_from_flags(flag_values).params


def make_plan(**overrides: Any) -> RunPlan:
  """Validates and resolves keyword arguments (flag names) into a RunPlan."""
  unknown = sorted(set(overrides) - set(FIELDS))
  if unknown:
    raise ParamsError('unknown parameter(s): %s' % ', '.join(unknown))
  # resolve.py imports this module: imported when first called.
  from tf_cnn_benchmarks.config import resolve  # pylint: disable=g-import-not-at-top

  raw = Params(**classic_spellings(overrides))
  resolve.check_choices(raw)
  return resolve.resolve(raw)


# String flags whose classic default was '' (unset).
_EMPTY_IS_UNSET = (
  'job_name',
  'ps_hosts',
  'worker_hosts',
  'controller_host',
  'trace_file',
  'eval_dir',
  *runtime_knobs.EMPTY_IS_UNSET,
)


def classic_spellings(overrides: dict) -> dict:
  """The classic spellings made ours: '' for unset, CPU/GPU for cpu/gpu."""
  out = dict(overrides)
  for name in _EMPTY_IS_UNSET:
    if out.get(name) == '':
      out[name] = None
  for name in ('device', 'local_parameter_device'):
    if out.get(name) in ('CPU', 'GPU'):
      out[name] = out[name].lower()
  return out


def make_params(**overrides: Any) -> Params:
  """Builds validated, resolved Params from keyword arguments (flag names)."""
  return make_plan(**overrides).params


def as_plan(params_or_plan) -> RunPlan:
  """A RunPlan as it is; Params (Python callers) made into one.

  Resolved Params are taken as they are; Params with automatic defaults
  still unset (the classic API's make_params) are validated and resolved.
  """
  if isinstance(params_or_plan, RunPlan):
    return params_or_plan
  p = params_or_plan
  if not is_resolved(p):
    return make_plan(**dataclasses.asdict(p))
  from tf_cnn_benchmarks.config import resolve  # pylint: disable=g-import-not-at-top

  cluster, manager_cls = resolve.cluster_and_manager(p)
  return RunPlan(p, cluster, manager_cls, mode_of(p))


def is_resolved(p: Params) -> bool:
  """Whether every automatic default of p has its concrete value."""
  return (
    p.data_name is not None
    and p.device is not None
    and p.data_format is not None
    and p.batch_size > 0
    and p.num_batches is not None
    and p.num_warmup_batches is not None
    and p.use_resource_vars is not None
  )


def mode_of(p: Params) -> Mode:
  """The run mode the --eval / --forward_only flags ask for."""
  if p.eval:
    return Mode.EVAL
  return Mode.FORWARD_ONLY if p.forward_only else Mode.TRAIN


def gpu_available() -> bool:
  """Whether this TensorFlow build sees a GPU."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  return bool(tf.config.list_physical_devices('GPU'))


def as_dict(p: Params) -> dict:
  """Params as a plain dict (flag name -> value), for the results line."""
  return dataclasses.asdict(p)
