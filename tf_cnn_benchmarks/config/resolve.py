"""Validation and resolution of Params: one clear message per bad value.

`resolve` checks the combination of flags (each rule names the flag and what
is allowed, raising ParamsError) and fills in every automatic default
(device kind, data format, batch size, number of batches, ...), returning a
`Resolution` that params.make_plan makes the run plan of. params.make_plan
calls it; nothing else should.

This module imports the Params value (params_value.py) and the pure checks
of config/, never params.py (which imports this module).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import numbers
import os
import typing
from typing import Optional

import tensorflow as tf

import models
from models import resnet
from tf_cnn_benchmarks.cluster import slurm
from tf_cnn_benchmarks.cluster import spec as cluster_spec
from tf_cnn_benchmarks.config import accumulation_checks
from tf_cnn_benchmarks.config import auto_lengths
from tf_cnn_benchmarks.config import datasets
from tf_cnn_benchmarks.config import fields
from tf_cnn_benchmarks.config import input_settings
from tf_cnn_benchmarks.config import limits
from tf_cnn_benchmarks.config import params_value as params_lib
from tf_cnn_benchmarks.config import schedules
from tf_cnn_benchmarks.platform import gpu_runtime
from tf_cnn_benchmarks.platform import runtime_knobs
import variable_mgr
from variable_mgr import allreduce
from variable_mgr import catalog
from variable_mgr import collective_catalog
from variable_mgr import topology
from variable_mgr.compression import catalog as compression_catalog

# Classic model names that are not CNNs, or not available yet: one line each.
NOT_CNN_MODELS = {
  'ncf': 'ncf is a recommendation model, not a CNN; this harness runs CNNs',
  'deepspeech2': 'deepspeech2 is a speech model, not a CNN; this harness '
  'runs CNNs',
  'ssd300': 'ssd300 (coco) is not available yet',
}
# --variable_update=auto is resolved before the plan, above this layer
# (tf_cnn_benchmarks/scaling/auto/auto.py); a plan made directly gets this line.
AUTO_UNRESOLVED = (
  '--variable_update=auto: resolved by `python -m tf_cnn_benchmarks`; from '
  'Python, tf_cnn_benchmarks.scaling.auto.auto.make_auto_plan(**flags)'
)
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
class Resolution:
  """What resolve decided: params.make_plan makes it a RunPlan.

  params: the validated Params, every automatic default filled in.
  cluster: the cluster.spec.Cluster of a multi-worker run, else None.
  manager_cls: the VariableMgr class that runs it.
  device_was_auto: --device was not given.
  warnings: lines the entry point prints once on stderr.
  """

  params: params_lib.Params
  cluster: Optional[cluster_spec.Cluster]
  manager_cls: type
  device_was_auto: bool
  warnings: tuple


# What each declared field type accepts from a Python caller, and how the
# message says it. A flag parsed from the command line always has its type;
# the Python API (make_params, _replace after setup) can pass anything.
_TYPE_RULES = {
  bool: (lambda v: isinstance(v, bool), 'True or False (bool)'),
  int: (
    lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool),
    'a whole number (int)',
  ),
  float: (
    lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool),
    'a number (float)',
  ),
  str: (lambda v: isinstance(v, str), 'a string (str)'),
  # A list flag: a Python caller's list, tuple or '100,200' string.
  tuple: (
    lambda v: isinstance(v, (tuple, list, str)),
    'a list, tuple or comma-separated string',
  ),
}
_HINTS = typing.get_type_hints(params_lib.Params)


def _declared_type(name: str) -> tuple:
  """(the field's base type, whether None is allowed) from its declaration."""
  hint = _HINTS[name]
  args = typing.get_args(hint)
  if not args:
    return hint, False
  return next(a for a in args if a is not type(None)), type(None) in args


def check_types(p: params_lib.Params) -> None:
  """Each field holds a value of its declared type (None where Optional).

  The command line cannot give a wrong type; a Python caller can
  (use_fp16='False' would otherwise run float16, as the string is true).
  """
  for name in params_lib.FIELDS:
    value = getattr(p, name)
    base, optional = _declared_type(name)
    accepts, what = _TYPE_RULES[base]
    if (value is None and optional) or (value is not None and accepts(value)):
      continue
    if params_lib.FIELDS[name].metadata.get('auto'):
      if value == fields.AUTO:
        continue
      what += " or '%s'" % fields.AUTO
    raise params_lib.ParamsError(
      '--%s=%r: must be %s%s, not %s'
      % (
        name,
        value,
        what,
        ' or None' if optional else '',
        type(value).__name__,
      )
    )


def check_choices(p: params_lib.Params) -> None:
  """Each field has its declared type and holds one of its choices if any."""
  check_types(p)
  for name, field in params_lib.FIELDS.items():
    value = getattr(p, name)
    choices = field.metadata['choices']
    if choices and value is not None and value not in choices:
      raise params_lib.ParamsError(
        '--%s=%s: must be one of %s' % (name, value, ', '.join(choices))
      )


def _require(condition: bool, message: str) -> None:
  if not condition:
    raise params_lib.ParamsError(message)


def resolve(p: params_lib.Params) -> Resolution:
  """Validates the combination and fills in every automatic default."""
  p = dataclasses.replace(
    p, **schedules.parsed_eval_lists(p, params_lib.ParamsError)
  )
  p = _as_evaluator(p)
  data_name = p.data_name or guess_data_name(p.data_dir)
  model = _checked_model(p, data_name)
  _check_counts(p)
  try:
    schedule_warnings = schedules.check_learning_rate(
      p, _uses_resnet_base_lr(model)
    )
  except schedules.ScheduleError as e:
    raise params_lib.ParamsError(str(e)) from None
  device, data_format = _device_and_format(p)
  cluster, manager_cls = cluster_and_manager(p)
  _check_manager_and_flags(p, cluster, manager_cls, device)
  auto_lengths.check(p, cluster, params_lib.ParamsError)
  input_warnings = input_settings.check(p, data_name, params_lib.ParamsError)
  input_warnings += schedules.check_freezing(p, cluster, params_lib.ParamsError)
  limits.check(p, data_name, model, cluster, params_lib.ParamsError)
  schedules.check_eval_interval(
    p, datasets.get(data_name).num_train_examples, params_lib.ParamsError
  )
  gpu_runtime.check(p, params_lib.ParamsError)
  runtime_knobs.check(p, params_lib.ParamsError)
  resolved = _with_defaults(
    p, model, data_name, cluster, device=device, data_format=data_format
  )
  return Resolution(
    resolved,
    cluster,
    manager_cls,
    device_was_auto=p.device is None,
    warnings=tuple(schedule_warnings) + tuple(input_warnings),
  )


def revalidate(p: params_lib.Params) -> Resolution:
  """The checks of `resolve`, again, for Params a caller resolved earlier.

  A Python caller may change resolved Params (`setup(params)._replace(
  num_batches=-5)`) before BenchmarkCNN(params): the same rules and
  messages as the command line apply. Returns the Resolution of `p` as it
  is (its values are not re-resolved).
  """
  check_choices(p)
  check = p
  if p.num_batches is not None and p.num_epochs is not None:
    # Resolution turned --num_epochs into num_batches; the run uses that.
    _require(
      p.num_batches >= 1, '--num_batches=%s: must be >= 1' % p.num_batches
    )
    check = dataclasses.replace(p, num_epochs=None)
  resolution = resolve(check)
  return dataclasses.replace(resolution, params=p, warnings=())


def _as_evaluator(p: params_lib.Params) -> params_lib.Params:
  """An evaluator task's Params: --eval of each new checkpoint of train_dir.

  --job_name=evaluator or TF_CONFIG's task type "evaluator"
  (cluster/spec.py); it polls every --eval_interval_secs (default
  spec.EVALUATOR_POLL_SECS). Other Params are returned as they are.
  """
  if not cluster_spec.is_evaluator(p.job_name):
    return p
  _require(
    p.train_dir,
    "--job_name=evaluator: needs --train_dir (the chief's checkpoints to "
    'follow)',
  )
  return dataclasses.replace(
    p,
    job_name=cluster_spec.EVALUATOR,
    eval=True,
    eval_interval_secs=(
      p.eval_interval_secs or cluster_spec.EVALUATOR_POLL_SECS
    ),
  )


def _uses_resnet_base_lr(model) -> bool:
  """Whether the model's own schedule is built on --resnet_base_lr."""
  return isinstance(model, resnet.ResNet)


def _check_manager_and_flags(p, cluster, manager_cls, device: str) -> None:
  """The manager fits the run; the flags that depend on it are usable."""
  _require(
    cluster is not None or manager_cls.traits.runs_local,
    '--variable_update=%s: needs a cluster (--job_name, --ps_hosts, '
    '--worker_hosts); local modes: %s'
    % (p.variable_update, ', '.join(variable_mgr.local_names())),
  )
  _check_setting_variants(p, cluster)
  if cluster is not None:
    _check_cluster(p, cluster, manager_cls)
  _check_all_reduce(p, manager_cls, device)
  _check_compression(p, manager_cls)
  accumulation_checks.check(p, params_lib.ParamsError)
  _check_collectives(p, manager_cls, device)
  _check_gpu_all_reduce_in_cluster(p, cluster)
  _check_precision(p)
  _check_data_and_outputs(p, cluster)
  _check_build_only(p)


def _with_defaults(p, model, data_name, cluster, *, device, data_format):
  """p with every automatic default replaced by the value the run uses."""
  batch_size = p.batch_size or model.default_batch_size
  num_batches = p.num_batches
  if num_batches is None:
    if p.num_epochs is not None:
      # As in the classic harness, one step consumes every worker's batches.
      examples = datasets.get(data_name).num_train_examples
      workers = cluster.num_workers if cluster is not None else 1
      global_batch = (
        batch_size * p.gradient_accumulation_steps * p.num_gpus * workers
      )
      # Classic's rounding, not ceil: the fractional example is dropped
      # before rounding up (128.4 examples in 64s are 2 steps, not 3).
      num_batches = max(
        1, int(p.num_epochs * examples + global_batch - 1) // global_batch
      )
    else:
      num_batches = 100
  return dataclasses.replace(
    auto_lengths.with_defaults(p),
    data_name=data_name,
    device=device,
    data_format=data_format,
    local_parameter_device=p.local_parameter_device or device,
    use_resource_vars=(
      p.fp16_enable_auto_loss_scale
      if p.use_resource_vars is None
      else p.use_resource_vars
    ),
    batch_size=batch_size,
    num_batches=num_batches,
    num_warmup_batches=(
      10 if p.num_warmup_batches is None else p.num_warmup_batches
    ),
    **gpu_runtime.resolved_threads(p, device),
  )


def guess_data_name(data_dir: Optional[str]) -> str:
  """The dataset named in --data_dir (classic rule), else imagenet."""
  for name in datasets.names():
    if data_dir and name in data_dir:
      return name
  return 'imagenet'


def _checked_model(p: params_lib.Params, data_name: str):
  """The model --model names for the dataset; the manager name is known."""
  if p.model in NOT_CNN_MODELS:
    raise params_lib.ParamsError(
      '--model=%s: %s' % (p.model, NOT_CNN_MODELS[p.model])
    )
  if p.model not in models.names(data_name):
    raise params_lib.ParamsError(
      '--model=%s: no such model for --data_name=%s; one of %s'
      % (p.model, data_name, ', '.join(models.names(data_name)))
    )
  _require(p.variable_update != 'horovod', HOROVOD_UNAVAILABLE)
  _require(p.variable_update != 'auto', AUTO_UNRESOLVED)
  if p.variable_update not in variable_mgr.names():
    raise params_lib.ParamsError(
      '--variable_update=%s: must be one of %s'
      % (p.variable_update, ', '.join(variable_mgr.names()))
    )
  return models.create_model(p.model, data_name)


def _check_counts(p: params_lib.Params) -> None:
  """Counts, sizes and rates that have a valid range of their own."""
  _require(p.num_gpus >= 1, '--num_gpus=%d: must be >= 1' % p.num_gpus)
  _require(
    p.batch_size >= 0,
    '--batch_size=%d: must be >= 1 (or 0 for the model default)' % p.batch_size,
  )
  _require(
    p.display_every >= 1, '--display_every=%d: must be >= 1' % p.display_every
  )
  _require(
    p.num_batches is None
    or auto_lengths.is_auto(p.num_batches)
    or p.num_batches >= 1,
    '--num_batches=%s: must be >= 1 (or auto)' % p.num_batches,
  )
  _require(
    p.num_epochs is None or p.num_epochs > 0,
    '--num_epochs=%s: must be > 0' % p.num_epochs,
  )
  _require(
    p.num_batches is None or p.num_epochs is None,
    '--num_batches and --num_epochs: give at most one of them',
  )
  _require(
    p.num_warmup_batches is None
    or auto_lengths.is_auto(p.num_warmup_batches)
    or p.num_warmup_batches >= 0,
    '--num_warmup_batches=%s: must be >= 0 (or auto)' % p.num_warmup_batches,
  )
  for name in ('gradient_clip', 'gradient_clip_norm'):
    value = getattr(p, name)
    _require(value is None or value > 0, '--%s=%s: must be > 0' % (name, value))
  _require(
    p.gradient_clip is None or p.gradient_clip_norm is None,
    '--gradient_clip and --gradient_clip_norm: use one clipping, not both',
  )
  for name in ('num_epochs_per_decay', 'learning_rate_decay_factor'):
    # Classic rule: a decay needs the rate it decays from.
    _require(
      not getattr(p, name) or p.init_learning_rate is not None,
      '--%s: needs --init_learning_rate' % name,
    )
  _require(
    p.init_learning_rate is None or p.init_learning_rate > 0,
    '--init_learning_rate=%s: must be > 0' % p.init_learning_rate,
  )
  _require(
    p.weight_decay >= 0, '--weight_decay=%s: must be >= 0' % p.weight_decay
  )


def _device_and_format(p: params_lib.Params) -> tuple:
  """(device kind, data format) the run uses, checked against this build."""
  device = p.device or ('gpu' if gpu_available() else 'cpu')
  if device == 'gpu' and not p.build_only:  # a built graph needs no GPU
    _require(
      gpu_available(),
      '--device=gpu: this TensorFlow build sees no GPU; '
      'use --device=cpu (towers become logical CPU devices)',
    )
  data_format = p.data_format or ('NCHW' if device == 'gpu' else 'NHWC')
  if device == 'cpu' and data_format == 'NCHW':
    _require(
      os.environ.get('TF_ENABLE_ONEDNN_OPTS', '1') != '0',
      '--data_format=NCHW on cpu needs oneDNN ops; unset '
      'TF_ENABLE_ONEDNN_OPTS=0 or use --data_format=NHWC',
    )
    # TensorFlow's CPU max pooling has no float16 NCHW kernel (float32 and
    # bfloat16 NCHW run through oneDNN): refused here, not in warm-up.
    _require(
      not p.use_fp16 or p.build_only,
      '--use_fp16 with --data_format=NCHW on --device=cpu: TensorFlow has '
      'no float16 NCHW pooling on CPU; use --data_format=NHWC with '
      '--use_fp16, or NCHW with float32 or --use_bf16',
    )
  return device, data_format


def gpu_available() -> bool:
  """Whether this TensorFlow build sees a GPU."""
  return bool(tf.config.list_physical_devices('GPU'))


def cluster_and_manager(p: params_lib.Params) -> tuple:
  """(the Cluster the flags or TF_CONFIG describe or None, manager class)."""
  try:
    cluster = slurm.resolve_cluster(slurm.ClusterOptions.of(p))
  except cluster_spec.ClusterError as e:
    raise params_lib.ParamsError(str(e)) from None
  if p.job_name == cluster_spec.EVALUATOR:
    # Whatever manager trained them, checkpoints are evaluated with the
    # variables held once (evaluation.EVAL_LAYOUT).
    return None, variable_mgr.select('parameter_server')
  return cluster, variable_mgr.select(
    p.variable_update, p, in_cluster=cluster is not None
  )


def _check_cluster(p: params_lib.Params, cluster, manager_cls) -> None:
  """The variable manager fits the cluster's jobs."""
  traits = manager_cls.traits
  _require(
    traits.runs_in_cluster,
    '--variable_update=%s: does not run in a cluster; one of %s'
    % (p.variable_update, ', '.join(variable_mgr.cluster_names())),
  )
  _require(
    not traits.needs_ps or cluster.num_ps > 0,
    '--ps_hosts: required with --variable_update=%s' % p.variable_update,
  )
  _require(
    traits.needs_ps or cluster.num_ps == 0,
    '--ps_hosts: not used by --variable_update=%s; drop it' % p.variable_update,
  )
  _require(
    not traits.one_graph or cluster.controller_host,
    '--controller_host: required with --variable_update=%s' % p.variable_update,
  )
  _require(
    traits.one_graph or not cluster.controller_host,
    '--controller_host: only with --variable_update=%s'
    % ', '.join(
      n
      for n in variable_mgr.names()
      if variable_mgr.get(n, in_cluster=True).traits.one_graph
    ),
  )
  _require(
    p.ps_partition_threshold_bytes >= 0,
    '--ps_partition_threshold_bytes=%d: must be >= 0'
    % p.ps_partition_threshold_bytes,
  )
  _require(
    p.hybrid_threshold_bytes >= 0,
    '--hybrid_threshold_bytes=%d: must be >= 0' % p.hybrid_threshold_bytes,
  )


def _check_gpu_all_reduce_in_cluster(p: params_lib.Params, cluster) -> None:
  """GPU-only algorithms (NCCL) reduce the GPUs of one worker process.

  A graph spanning workers (distributed_all_reduce) may use them only as
  the intra-worker part of ALG/ALG: NcclAllReduce ops of one reduction in
  two processes never meet (the build-only report showed such a graph).
  """
  if p.all_reduce_spec is None or cluster is None or cluster.num_workers < 2:
    return
  spec = allreduce.parse_all_reduce_spec(p.all_reduce_spec)
  gpu_only = set(allreduce.algorithm_names()) - set(
    allreduce.algorithm_names(cpu_only=True)
  )
  for r in spec.ranges:
    across = r.alg.intra if r.alg.inter is None else r.alg.inter
    _require(
      across not in gpu_only,
      '--all_reduce_spec=%s: %s reduces the GPUs of one worker only; across '
      '%d workers use it within each worker, e.g. %s/xring'
      % (p.all_reduce_spec, across, cluster.num_workers, across),
    )


def _check_all_reduce(p: params_lib.Params, manager_cls, device: str) -> None:
  """The all-reduce flags: a parsable spec, used by the manager, runnable."""
  _check_packing_counts(p)
  reduces = manager_cls.traits.all_reduce
  collective = manager_cls.traits.collective_spec
  for name, default in (
    ('all_reduce_spec', None),
    ('gradient_repacking', 0),
    ('agg_small_grads_max_bytes', 0),
    ('variable_consistency', 'strong'),
    ('hierarchical_copy', False),
  ):
    _require(
      reduces
      or getattr(p, name) == default
      or (collective and name == 'all_reduce_spec'),
      '--%s: only used by the managers that all-reduce (%s), not '
      '--variable_update=%s'
      % (name, ', '.join(variable_mgr.all_reduce_names()), p.variable_update),
    )
  try:
    topology.check(p.hierarchical_copy, p.network_topology, p.num_gpus)
  except ValueError as e:
    raise params_lib.ParamsError(str(e)) from None
  _require(
    not (p.hierarchical_copy and p.all_reduce_spec),
    '--hierarchical_copy and --all_reduce_spec: give one reduction, not both',
  )
  if p.all_reduce_spec is not None:
    _check_spec_runs_here(p, reduces, device)


def _check_compression(p: params_lib.Params, manager_cls) -> None:
  """--gradient_compression fits the manager; --powersgd_rank is usable."""
  name = p.gradient_compression
  if name == 'none':
    _require(
      p.powersgd_rank == compression_catalog.DEFAULT_POWERSGD_RANK,
      '--powersgd_rank: only with --gradient_compression=powersgd',
    )
    return
  _require(
    catalog.MANAGERS[manager_cls.name].shares_gradients,
    '--gradient_compression=%s: --variable_update=%s reduces no gradients; '
    'use none' % (name, p.variable_update),
  )
  if compression_catalog.declared(name).two_phase:
    _require(
      catalog.takes_spec(manager_cls.traits),
      '--gradient_compression=%s: needs a manager that all-reduces every '
      'gradient (%s), not --variable_update=%s; a cast (fp16, bf16, '
      'fp16_ef, bf16_ef) applies to its pushes'
      % (name, ', '.join(_all_reducing_names()), p.variable_update),
    )
    _require(
      p.powersgd_rank >= 1, '--powersgd_rank=%d: must be >= 1' % p.powersgd_rank
    )
  else:
    _require(
      p.powersgd_rank == compression_catalog.DEFAULT_POWERSGD_RANK,
      '--powersgd_rank: only with --gradient_compression=powersgd',
    )


def _check_collectives(p: params_lib.Params, manager_cls, device) -> None:
  """--collective_implementation / --collective_bytes_per_pack fit the run
  (after _check_all_reduce: the spec parses)."""
  spec = p.all_reduce_spec and allreduce.parse_all_reduce_spec(
    p.all_reduce_spec
  )
  uses = collective_catalog.runs_collectives(
    manager_cls.name, manager_cls.traits.all_reduce, spec or None
  )
  try:
    collective_catalog.check_flags(p, uses_collectives=uses, device=device)
  except ValueError as e:
    raise params_lib.ParamsError(str(e)) from None


def _all_reducing_names() -> list:
  """The managers that all-reduce every gradient (locally or across
  workers)."""
  return [n for n in catalog.MANAGERS if catalog.any_of(n, catalog.takes_spec)]


def _check_packing_counts(p: params_lib.Params) -> None:
  """The packing and merge counts are in range; one packing at a time."""
  for name in ('gradient_repacking', 'agg_small_grads_max_bytes'):
    _require(
      getattr(p, name) >= 0, '--%s=%d: must be >= 0' % (name, getattr(p, name))
    )
  for name in ('agg_small_grads_max_group', 'allreduce_merge_scope'):
    _require(
      getattr(p, name) >= 1, '--%s=%d: must be >= 1' % (name, getattr(p, name))
    )
  _require(
    not (p.gradient_repacking and p.agg_small_grads_max_bytes),
    '--gradient_repacking and --agg_small_grads_max_bytes: use one '
    'packing, not both',
  )


def _check_spec_runs_here(p: params_lib.Params, reduces, device: str) -> None:
  """--all_reduce_spec parses, fits the manager and runs on this device."""
  try:
    spec = allreduce.parse_all_reduce_spec(p.all_reduce_spec)
  except allreduce.AllReduceSpecError as e:
    raise params_lib.ParamsError(str(e)) from None
  _require(
    reduces or (spec.algorithms == {'collective'} and not spec.is_hybrid),
    '--all_reduce_spec=%s: --variable_update=%s takes only collective or '
    'collective#N' % (p.all_reduce_spec, p.variable_update),
  )
  gpu_only = sorted(
    spec.algorithms - set(allreduce.algorithm_names(cpu_only=True))
  )
  _require(
    device == 'gpu' or not gpu_only,
    '--all_reduce_spec=%s: %s needs GPUs; on cpu use one of %s'
    % (
      p.all_reduce_spec,
      ', '.join(gpu_only),
      ', '.join(allreduce.algorithm_names(cpu_only=True)),
    ),
  )


def _check_setting_variants(p: params_lib.Params, cluster) -> None:
  """A manager setting (--staged_vars) fits its mode, cluster and run."""
  for setting, cls in variable_mgr.setting_variants().items():
    if not getattr(p, setting):
      continue
    _require(
      p.variable_update == cls.name,
      '--%s: only with --variable_update=%s' % (setting, cls.name),
    )
    _require(
      cluster is None or cls.traits.runs_in_cluster,
      '--%s: local runs only (not built for a cluster)' % setting,
    )
    _require(
      not (p.forward_only or p.eval or schedules.eval_enabled(p)),
      '--%s: training runs only (not --forward_only, --eval or '
      '--eval_during_training_*)' % setting,
    )
    _require(
      not p.fp16_enable_auto_loss_scale,
      '--%s: not with --fp16_enable_auto_loss_scale (as classic)' % setting,
    )


def _check_precision(p: params_lib.Params) -> None:
  """fp16 / bf16 flags: one precision, fp16-only flags only with fp16."""
  _require(
    not (p.use_fp16 and p.use_bf16),
    '--use_fp16 and --use_bf16: choose one compute precision',
  )
  for name in ('fp16_vars', 'fp16_enable_auto_loss_scale'):
    _require(
      p.use_fp16 or not getattr(p, name), '--%s: only with --use_fp16' % name
    )
  _require(
    p.use_fp16 or p.fp16_loss_scale is None,
    '--fp16_loss_scale: only with --use_fp16',
  )
  _require(
    p.fp16_loss_scale is None or p.fp16_loss_scale > 0,
    '--fp16_loss_scale=%s: must be > 0' % p.fp16_loss_scale,
  )
  _require(
    p.fp16_inc_loss_scale_every_n >= 1,
    '--fp16_inc_loss_scale_every_n=%d: must be >= 1'
    % p.fp16_inc_loss_scale_every_n,
  )
  _require(
    not (p.fp16_enable_auto_loss_scale and p.use_resource_vars is False),
    '--fp16_enable_auto_loss_scale needs resource variables; drop '
    '--nouse_resource_vars',
  )


def _check_build_only(p: params_lib.Params) -> None:
  """--build_only: a training or inference graph, and nothing measured."""
  if not p.build_only:
    return
  _require(
    not p.eval,
    '--build_only: builds a training or --forward_only graph, not --eval',
  )
  _require(
    p.result_file is None,
    '--result_file: a --build_only run measures nothing; use '
    '--placement_file for its report',
  )


def _check_data_and_outputs(p: params_lib.Params, cluster) -> None:
  """Real data, checkpoint, evaluation and observability flags."""
  _check_output_ranges(p)
  _check_checkpoints_and_summaries(p)
  _check_eval(p, cluster)
  _require(
    not p.datasets_repeat_cached_sample or p.data_dir,
    '--datasets_repeat_cached_sample: only with --data_dir',
  )
  for name in ('train_dir', 'data_dir'):
    value = getattr(p, name)
    _require(value is None or value.strip(), '--%s: empty path' % name)


def _check_output_ranges(p: params_lib.Params) -> None:
  """Counts of the data, checkpoint and output flags in their ranges."""
  for name in (
    'save_model_steps',
    'eval_during_training_every_n_steps',
    'num_eval_batches',
    'datasets_parallel_interleave_cycle_length',
    'datasets_num_private_threads',
    'multi_device_iterator_max_buffer_size',
  ):
    value = getattr(p, name)
    _require(
      value is None or value >= 1, '--%s=%s: must be >= 1' % (name, value)
    )
  for name in (
    'save_model_secs',
    'eval_interval_secs',
    'eval_timeout_secs',
    'save_summaries_steps',
    'datasets_prefetch_buffer_size',
  ):
    _require(
      getattr(p, name) >= 0, '--%s=%s: must be >= 0' % (name, getattr(p, name))
    )
  _require(
    p.max_ckpts_to_keep >= 1,
    '--max_ckpts_to_keep=%d: must be >= 1' % p.max_ckpts_to_keep,
  )
  _require(
    0 <= p.summary_verbosity <= 3,
    '--summary_verbosity=%d: must be 0, 1, 2 or 3' % p.summary_verbosity,
  )


def _check_checkpoints_and_summaries(p: params_lib.Params) -> None:
  """Checkpoints and summaries need --train_dir and each other's flags;
  the MLPerf log's flags need each other and their package."""
  for name in ('save_model_steps', 'save_model_secs', 'save_summaries_steps'):
    _require(
      not getattr(p, name) or p.train_dir,
      '--%s: needs --train_dir (where checkpoints and summaries go)' % name,
    )
  _require(
    not (p.summary_verbosity and not p.save_summaries_steps),
    '--summary_verbosity=%d: give --save_summaries_steps=N (and '
    '--train_dir) to write them' % p.summary_verbosity,
  )
  _require(
    not (p.save_summaries_steps and not p.summary_verbosity),
    '--save_summaries_steps: give --summary_verbosity=1, 2 or 3',
  )
  _require(
    not p.ml_perf_log_file or p.ml_perf_compliance_logging,
    '--ml_perf_log_file: needs --ml_perf_compliance_logging',
  )
  _require(
    not p.ml_perf_compliance_logging
    or importlib.util.find_spec('mlperf_logging') is not None,
    '--ml_perf_compliance_logging: needs the mlperf-logging package '
    '(pip install mlperf-logging)',
  )


def _check_eval(p: params_lib.Params, cluster) -> None:
  """--eval and the evaluation-during-training flags."""
  _require(
    not p.eval or p.train_dir,
    '--eval: needs --train_dir (the checkpoints to evaluate)',
  )
  _require(
    not (p.eval and p.forward_only),
    '--eval and --forward_only: choose one (--eval is inference on '
    'the validation split of a checkpoint)',
  )
  _require(
    not (p.eval and cluster is not None),
    '--eval: runs in one process; drop the cluster flags',
  )
  _require(
    not p.eval_interval_secs or p.eval, '--eval_interval_secs: only with --eval'
  )
  schedules.check_eval(p, params_lib.ParamsError)
