"""Every flag of the classic tf_cnn_benchmarks: its topic, default and status.

The classic harness (tensorflow/benchmarks, scripts/tf_cnn_benchmarks)
defined 137 flags in benchmark_cnn.py plus `ml_perf_compliance_logging` in
its entry script. A classic command line must never fail on an unknown flag,
so each one is here with what it does in this project:

  implemented: a `params.Params` field (or a reporting-only flag handled
    here) that does what the classic flag did.
  no effect: accepted with one warning line naming the flag and why it
    cannot exist on TF 2.21 or this build; the run goes on.

Flags that are not `Params` fields are defined here as absl flags with the
classic type and default, so every classic spelling parses
(`--flag=value`, `--flag value`, `--noflag`, `--flag=True/False`).
"""

from __future__ import annotations

import dataclasses
import textwrap
from typing import Any, Optional

from absl import flags

IMPLEMENTED = 'implemented'
NO_EFFECT = 'no effect'

# Help topics, in the order --help prints them.
MODEL_DATA = 'model and data'
STRATEGY = 'strategy and all-reduce'
PRECISION = 'precision'
CLUSTER = 'cluster'
CHECKPOINTS = 'checkpoints and evaluation'
OBSERVABILITY = 'observability'
PERFORMANCE = 'performance knobs'
TOPICS = (
  MODEL_DATA,
  STRATEGY,
  PRECISION,
  CLUSTER,
  CHECKPOINTS,
  OBSERVABILITY,
  PERFORMANCE,
)

_STAGING = 'the TF1 StagingArea input producer does not exist on TF 2.21'
_SSD = 'only used by the ssd300 model, which is not available here'


@dataclasses.dataclass(frozen=True)
class ClassicFlag:
  """One classic flag.

  kind: bool, int, float, string, list or enum (the classic absl type); only
    used for the flags defined here (not Params fields).
  default: the classic default.
  choices: the enum values.
  status: IMPLEMENTED or NO_EFFECT.
  note: the reason (no effect) or what the flag does (defined here).
  """

  name: str
  kind: str
  default: Any
  topic: str
  status: str
  note: str = ''
  choices: tuple = ()


def _f(name, kind, default, topic, status=IMPLEMENTED, note='', choices=()):
  return ClassicFlag(name, kind, default, topic, status, note, tuple(choices))


# Classic flags that are Params fields (their definitions come from Params).
_PARAMS_FLAGS = (
  _f('model', 'string', 'trivial', MODEL_DATA),
  _f('eval', 'bool', False, CHECKPOINTS),
  _f('eval_interval_secs', 'int', 0, CHECKPOINTS),
  _f('eval_during_training_every_n_steps', 'int', None, CHECKPOINTS),
  _f('forward_only', 'bool', False, MODEL_DATA),
  _f('freeze_when_forward_only', 'bool', False, MODEL_DATA),
  _f('batch_size', 'int', 0, MODEL_DATA),
  _f('num_batches', 'int', None, MODEL_DATA),
  _f('num_eval_batches', 'int', None, CHECKPOINTS),
  _f('num_eval_epochs', 'float', None, CHECKPOINTS),
  _f('eval_batch_size', 'int', 0, CHECKPOINTS),
  _f('eval_dir', 'string', '/tmp/tf_cnn_benchmarks/eval', CHECKPOINTS),
  _f('eval_during_training_every_n_epochs', 'float', None, CHECKPOINTS),
  _f('eval_during_training_at_specified_steps', 'list', [], CHECKPOINTS),
  _f('eval_during_training_at_specified_epochs', 'list', [], CHECKPOINTS),
  _f('stop_at_top_1_accuracy', 'float', None, CHECKPOINTS),
  _f('num_epochs', 'float', None, MODEL_DATA),
  _f('num_warmup_batches', 'int', None, MODEL_DATA),
  _f('num_gpus', 'int', 1, STRATEGY),
  _f('display_every', 'int', 10, OBSERVABILITY),
  _f('print_training_accuracy', 'bool', False, OBSERVABILITY),
  _f('loss_type_to_report', 'enum', 'total_loss', OBSERVABILITY),
  _f('display_perf_ewma', 'float', None, OBSERVABILITY),
  _f('data_dir', 'string', None, MODEL_DATA),
  _f('data_name', 'string', None, MODEL_DATA),
  _f('resize_method', 'string', 'bilinear', MODEL_DATA),
  _f('distortions', 'bool', False, MODEL_DATA),
  _f('input_preprocessor', 'string', 'default', MODEL_DATA),
  _f('ml_perf', 'bool', False, MODEL_DATA),
  _f('fuse_decode_and_crop', 'bool', True, MODEL_DATA),
  _f('distort_color_in_yiq', 'bool', True, MODEL_DATA),
  _f('gradient_repacking', 'int', 0, STRATEGY),
  _f('compact_gradient_transfer', 'bool', True, STRATEGY),
  _f('variable_consistency', 'enum', 'strong', STRATEGY),
  _f('datasets_repeat_cached_sample', 'bool', False, MODEL_DATA),
  _f('local_parameter_device', 'enum', 'gpu', STRATEGY),
  _f('device', 'enum', 'gpu', STRATEGY),
  _f('data_format', 'enum', 'NCHW', PERFORMANCE),
  _f('num_intra_threads', 'int', None, PERFORMANCE),
  _f('num_inter_threads', 'int', 0, PERFORMANCE),
  _f('use_numa_affinity', 'bool', False, PERFORMANCE),
  _f('enable_optimizations', 'bool', True, PERFORMANCE),
  _f('rewriter_config', 'string', None, PERFORMANCE),
  _f('xla', 'bool', False, PERFORMANCE),
  _f('xla_compile', 'bool', False, PERFORMANCE),
  _f('trace_file', 'string', '', OBSERVABILITY),
  _f('graph_file', 'string', None, OBSERVABILITY),
  _f('use_chrome_trace_format', 'bool', True, OBSERVABILITY),
  _f('tfprof_file', 'string', None, OBSERVABILITY),
  _f('partitioned_graph_file_prefix', 'string', None, OBSERVABILITY),
  _f('benchmark_log_dir', 'string', None, OBSERVABILITY),
  _f('benchmark_test_id', 'string', None, OBSERVABILITY),
  _f('optimizer', 'enum', 'sgd', MODEL_DATA),
  _f('init_learning_rate', 'float', None, MODEL_DATA),
  _f('num_epochs_per_decay', 'float', 0, MODEL_DATA),
  _f('learning_rate_decay_factor', 'float', 0, MODEL_DATA),
  _f('minimum_learning_rate', 'float', 0, MODEL_DATA),
  _f('piecewise_learning_rate_schedule', 'string', None, MODEL_DATA),
  _f('num_learning_rate_warmup_epochs', 'float', 0, MODEL_DATA),
  _f('resnet_base_lr', 'float', None, MODEL_DATA),
  _f('momentum', 'float', 0.9, MODEL_DATA),
  _f('rmsprop_decay', 'float', 0.9, MODEL_DATA),
  _f('rmsprop_momentum', 'float', 0.9, MODEL_DATA),
  _f('rmsprop_epsilon', 'float', 1.0, MODEL_DATA),
  _f('adam_beta1', 'float', 0.9, MODEL_DATA),
  _f('adam_beta2', 'float', 0.999, MODEL_DATA),
  _f('adam_epsilon', 'float', 1e-8, MODEL_DATA),
  _f('gradient_clip', 'float', None, MODEL_DATA),
  _f('weight_decay', 'float', 0.00004, MODEL_DATA),
  _f('single_l2_loss_op', 'bool', False, PERFORMANCE),
  _f('compute_lr_on_cpu', 'bool', False, PERFORMANCE),
  _f('tf_random_seed', 'int', 1234, MODEL_DATA),
  _f('datasets_prefetch_buffer_size', 'int', 1, PERFORMANCE),
  _f('datasets_num_private_threads', 'int', None, PERFORMANCE),
  _f('datasets_use_caching', 'bool', False, PERFORMANCE),
  _f('datasets_parallel_interleave_cycle_length', 'int', None, PERFORMANCE),
  _f('datasets_use_prefetch', 'bool', True, PERFORMANCE),
  _f('multi_device_iterator_max_buffer_size', 'int', 1, PERFORMANCE),
  _f('gpu_thread_mode', 'string', 'gpu_private', PERFORMANCE),
  _f('per_gpu_thread_count', 'int', 0, PERFORMANCE),
  _f('allow_growth', 'bool', None, PERFORMANCE),
  _f('gpu_memory_frac_for_testing', 'float', 0, PERFORMANCE),
  _f('use_unified_memory', 'bool', None, PERFORMANCE),
  _f('force_gpu_compatible', 'bool', False, PERFORMANCE),
  _f('timestamped_allocator', 'bool', False, PERFORMANCE),
  _f('gpu_kt_max_interval', 'int', 0, PERFORMANCE),
  _f('gpu_kt_max_bytes', 'int', 0, PERFORMANCE),
  _f('gpu_kt_max_pending', 'int', 0, PERFORMANCE),
  _f('winograd_nonfused', 'bool', True, PERFORMANCE),
  _f('batchnorm_persistent', 'bool', True, PERFORMANCE),
  _f('sync_on_finish', 'bool', False, PERFORMANCE),
  _f('autotune_threshold', 'int', None, PERFORMANCE),
  _f('mkl', 'bool', False, PERFORMANCE),
  _f('kmp_blocktime', 'int', 0, PERFORMANCE),
  _f(
    'kmp_affinity',
    'string',
    'granularity=fine,verbose,compact,1,0',
    PERFORMANCE,
  ),
  _f('kmp_settings', 'int', 1, PERFORMANCE),
  _f('datasets_sloppy_parallel_interleave', 'bool', False, PERFORMANCE),
  _f('datasets_parallel_interleave_prefetch', 'int', None, PERFORMANCE),
  _f('use_resource_vars', 'bool', False, STRATEGY),
  _f('staged_vars', 'bool', False, STRATEGY),
  _f('use_fp16', 'bool', False, PRECISION),
  _f('fp16_loss_scale', 'float', None, PRECISION),
  _f('fp16_vars', 'bool', False, PRECISION),
  _f('fp16_enable_auto_loss_scale', 'bool', False, PRECISION),
  _f('fp16_inc_loss_scale_every_n', 'int', 1000, PRECISION),
  _f('variable_update', 'enum', 'parameter_server', STRATEGY),
  _f('all_reduce_spec', 'string', None, STRATEGY),
  _f('agg_small_grads_max_bytes', 'int', 0, STRATEGY),
  _f('agg_small_grads_max_group', 'int', 10, STRATEGY),
  _f('allreduce_merge_scope', 'int', 1, STRATEGY),
  _f('hierarchical_copy', 'bool', False, STRATEGY),
  _f('network_topology', 'enum', 'dgx1', STRATEGY),
  _f('gpu_indices', 'string', '', STRATEGY),
  _f('job_name', 'enum', '', CLUSTER),
  _f('ps_hosts', 'string', '', CLUSTER),
  _f('worker_hosts', 'string', '', CLUSTER),
  _f('controller_host', 'string', None, CLUSTER),
  _f('task_index', 'int', 0, CLUSTER),
  _f('server_protocol', 'string', 'grpc', CLUSTER),
  _f('cross_replica_sync', 'bool', True, CLUSTER),
  _f('summary_verbosity', 'int', 0, OBSERVABILITY),
  _f('save_summaries_steps', 'int', 0, OBSERVABILITY),
  _f('save_model_secs', 'int', 0, CHECKPOINTS),
  _f('save_model_steps', 'int', None, CHECKPOINTS),
  _f('max_ckpts_to_keep', 'int', 5, CHECKPOINTS),
  _f('train_dir', 'string', None, CHECKPOINTS),
)

# Classic flags that are not Params fields: defined here.
_EXTRA_FLAGS = (
  _f('batch_group_size', 'int', 1, PERFORMANCE, NO_EFFECT, _STAGING),
  _f('collect_eval_results_async', 'bool', False, CHECKPOINTS, NO_EFFECT, _SSD),
  _f(
    'use_datasets',
    'bool',
    True,
    PERFORMANCE,
    NO_EFFECT,
    'input is always tf.data; ' + _STAGING,
  ),
  _f(
    'use_tf_layers',
    'bool',
    True,
    MODEL_DATA,
    NO_EFFECT,
    'tf.layers does not exist on TF 2.21; the models build the same '
    'layers from tf ops either way',
  ),
  _f(
    'debugger',
    'string',
    None,
    OBSERVABILITY,
    NO_EFFECT,
    'tfdbg (tf_debug sessions) does not exist on TF 2.21',
  ),
  _f(
    'use_python32_barrier',
    'bool',
    False,
    PERFORMANCE,
    NO_EFFECT,
    'no Python thread barrier is used (one session.run per step); ' + _STAGING,
  ),
  _f(
    'sparse_to_dense_grads',
    'bool',
    False,
    STRATEGY,
    NO_EFFECT,
    'only the NCF model had sparse gradients; ncf is not a CNN',
  ),
  _f(
    'horovod_device',
    'string',
    '',
    STRATEGY,
    NO_EFFECT,
    'Horovod is not part of this build (no --variable_update=horovod)',
  ),
  _f('backbone_model_path', 'string', None, CHECKPOINTS, NO_EFFECT, _SSD),
  _f(
    'trt_mode',
    'enum',
    '',
    PERFORMANCE,
    NO_EFFECT,
    'TensorRT (TF-TRT) is not part of this TF 2.21 build',
    ('', 'FP32', 'FP16', 'INT8'),
  ),
  _f(
    'trt_max_workspace_size_bytes',
    'int',
    4 << 30,
    PERFORMANCE,
    NO_EFFECT,
    'TensorRT (TF-TRT) is not part of this TF 2.21 build',
  ),
  _f(
    'ml_perf_compliance_logging',
    'bool',
    False,
    OBSERVABILITY,
    NO_EFFECT,
    'the mlperf_compliance logging package is not available for TF 2.21',
  ),
)

CLASSIC_FLAGS = {f.name: f for f in _PARAMS_FLAGS + _EXTRA_FLAGS}
EXTRA_FLAGS = {f.name: f for f in _EXTRA_FLAGS}

# Topics of this project's own flags (not classic).
_OWN_TOPICS = {
  'use_bf16': PRECISION,
  'ps_partition_threshold_bytes': CLUSTER,
  'hybrid_threshold_bytes': CLUSTER,
  'cluster_threads': CLUSTER,
  'pack_ps_transfers': CLUSTER,
  'gradient_clip_norm': MODEL_DATA,
  'eval_timeout_secs': CHECKPOINTS,
  'result_file': OBSERVABILITY,
  'peak_tflops_per_device': OBSERVABILITY,
  'build_only': OBSERVABILITY,
  'placement_file': OBSERVABILITY,
  'list_models': MODEL_DATA,
}


def topic_of(name: str) -> Optional[str]:
  """The help topic of a flag, or None for a flag not grouped here."""
  if name in CLASSIC_FLAGS:
    return CLASSIC_FLAGS[name].topic
  return _OWN_TOPICS.get(name)


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the classic flags that are not Params fields (idempotent)."""
  for f in _EXTRA_FLAGS:
    if f.name in flag_values:
      continue
    help_text = f.note
    if f.status == NO_EFFECT:
      help_text = 'No effect here: %s.' % f.note
    if f.kind == 'enum':
      flags.DEFINE_enum(
        f.name, f.default, list(f.choices), help_text, flag_values=flag_values
      )
      continue
    definer = {
      'bool': flags.DEFINE_bool,
      'int': flags.DEFINE_integer,
      'float': flags.DEFINE_float,
      'string': flags.DEFINE_string,
      'list': flags.DEFINE_list,
    }[f.kind]
    definer(f.name, f.default, help_text, flag_values=flag_values)


class ClassicFlagError(ValueError):
  """A classic flag this run cannot honour; the message is one line."""


def check_extra_flags(values: dict) -> list[str]:
  """Checks the non-Params classic flags a run was given.

  Args:
    values: flag name -> parsed value, for the names in EXTRA_FLAGS.

  Returns:
    The warning lines to print (one per flag set that has no effect).
  """
  warnings = []
  for name, value in sorted(values.items()):
    f = EXTRA_FLAGS[name]
    if value == f.default or f.status == IMPLEMENTED:
      continue
    warnings.append('warning: --%s has no effect: %s' % (name, f.note))
  return warnings


# absl.app's flags (defined once TensorFlow imports absl.app): this harness
# does not run under absl.app.run, so it honours --only_check_args itself and
# does not offer the debugger and profiler switches.
ABSL_APP_FLAGS_NOT_OFFERED = (
  'run_with_pdb',
  'pdb_post_mortem',
  'pdb',
  'run_with_profiling',
  'profile_file',
  'use_cprofile_for_profiling',
)
HELP_SWITCHES = ('-h', '--help', '-help', '--helpshort', '--helpfull', '-?')


def help_requested(argv: list[str]) -> Optional[str]:
  """'short' or 'full' when argv asks for help, else None."""
  for arg in argv[1:]:
    if arg == '--':
      return None
    if arg in ('--helpfull', '-helpfull'):
      return 'full'
    if arg in HELP_SWITCHES or arg in ('-helpshort',):
      return 'short'
  return None


def render_help(
  flag_values: flags.FlagValues, own: list[str], program: str, full: bool
) -> str:
  """absl-style help: the harness flags grouped by topic.

  Args:
    flag_values: the parsed-or-not FlagValues holding every flag.
    own: names of the harness's flags (Params fields and --list_models).
    program: how the harness was started, for the usage line.
    full: also list the other flags in flag_values (absl logging,
      TensorFlow's), as --helpfull does.
  """
  lines = ['USAGE: %s [flags]' % program, '']
  names = sorted(set(own) | set(EXTRA_FLAGS))
  for topic in TOPICS + (None,):
    group = [n for n in names if topic_of(n) == topic]
    if not group:
      continue
    lines.append('%s:' % (topic or 'other harness flags'))
    lines.extend(_describe(flag_values[n]) for n in group)
    lines.append('')
  if full:
    rest = sorted(
      n
      for n in flag_values
      if n not in names
      and n not in ABSL_APP_FLAGS_NOT_OFFERED
      and len(n) > 1  # absl's one-letter aliases (-v) print with the long name
    )
    lines.append('absl and TensorFlow flags:')
    lines.extend(_describe(flag_values[n]) for n in rest)
    lines.append('')
  lines.append(
    'Help: -h, --help, --helpshort (harness flags), --helpfull (all flags). '
    '--only_check_args: check the flags, then exit.'
  )
  return '\n'.join(lines)


def _describe(flag) -> str:
  text = '  --%s: %s' % (flag.name, flag.help or '')
  body = textwrap.fill(text, 80, subsequent_indent='    ')
  return '%s\n    (default: %r)' % (body, flag.default)


def check_command_line(flag_values: flags.FlagValues) -> list:
  """Checks the parsed flags that are not Params fields.

  Returns the warning lines to print; raises ClassicFlagError (one line) for
  an absl app flag this harness does not offer.
  """
  for name in ABSL_APP_FLAGS_NOT_OFFERED:
    if name in flag_values and flag_values[name].present:
      raise ClassicFlagError(
        "--%s: absl.app's debugger/profiler flags are not offered by "
        'this harness' % name
      )
  values = {n: flag_values[n].value for n in EXTRA_FLAGS if n in flag_values}
  return check_extra_flags(values)
