"""Each Params field says everything about its flag, in one place.

The absl flags, --help, the classic flag table and the cluster fingerprint
are generated from the field metadata (config/fields.py); these tests hold
that metadata complete. No TensorFlow is needed.
"""

import dataclasses
from typing import Optional

import pytest

from tf_cnn_benchmarks.cluster import fingerprint
from tf_cnn_benchmarks.config import classic_flags
from tf_cnn_benchmarks.config import fields
from tf_cnn_benchmarks.config import params_value

# Every flag of the classic tf_cnn_benchmarks: 137 in its benchmark_cnn.py,
# plus ml_perf_compliance_logging in its entry script.
CLASSIC_FLAG_NAMES = (
  'adam_beta1',
  'adam_beta2',
  'adam_epsilon',
  'agg_small_grads_max_bytes',
  'agg_small_grads_max_group',
  'all_reduce_spec',
  'allow_growth',
  'allreduce_merge_scope',
  'autotune_threshold',
  'backbone_model_path',
  'batch_group_size',
  'batch_size',
  'batchnorm_persistent',
  'benchmark_log_dir',
  'benchmark_test_id',
  'collect_eval_results_async',
  'compact_gradient_transfer',
  'compute_lr_on_cpu',
  'controller_host',
  'cross_replica_sync',
  'data_dir',
  'data_format',
  'data_name',
  'datasets_num_private_threads',
  'datasets_parallel_interleave_cycle_length',
  'datasets_parallel_interleave_prefetch',
  'datasets_prefetch_buffer_size',
  'datasets_repeat_cached_sample',
  'datasets_sloppy_parallel_interleave',
  'datasets_use_caching',
  'datasets_use_prefetch',
  'debugger',
  'device',
  'display_every',
  'display_perf_ewma',
  'distort_color_in_yiq',
  'distortions',
  'enable_optimizations',
  'eval',
  'eval_batch_size',
  'eval_dir',
  'eval_during_training_at_specified_epochs',
  'eval_during_training_at_specified_steps',
  'eval_during_training_every_n_epochs',
  'eval_during_training_every_n_steps',
  'eval_interval_secs',
  'force_gpu_compatible',
  'forward_only',
  'fp16_enable_auto_loss_scale',
  'fp16_inc_loss_scale_every_n',
  'fp16_loss_scale',
  'fp16_vars',
  'freeze_when_forward_only',
  'fuse_decode_and_crop',
  'gpu_indices',
  'gpu_kt_max_bytes',
  'gpu_kt_max_interval',
  'gpu_kt_max_pending',
  'gpu_memory_frac_for_testing',
  'gpu_thread_mode',
  'gradient_clip',
  'gradient_repacking',
  'graph_file',
  'hierarchical_copy',
  'horovod_device',
  'init_learning_rate',
  'input_preprocessor',
  'job_name',
  'kmp_affinity',
  'kmp_blocktime',
  'kmp_settings',
  'learning_rate_decay_factor',
  'local_parameter_device',
  'loss_type_to_report',
  'max_ckpts_to_keep',
  'minimum_learning_rate',
  'mkl',
  'ml_perf',
  'ml_perf_compliance_logging',
  'model',
  'momentum',
  'multi_device_iterator_max_buffer_size',
  'network_topology',
  'num_batches',
  'num_epochs',
  'num_epochs_per_decay',
  'num_eval_batches',
  'num_eval_epochs',
  'num_gpus',
  'num_inter_threads',
  'num_intra_threads',
  'num_learning_rate_warmup_epochs',
  'num_warmup_batches',
  'optimizer',
  'partitioned_graph_file_prefix',
  'per_gpu_thread_count',
  'piecewise_learning_rate_schedule',
  'print_training_accuracy',
  'ps_hosts',
  'resize_method',
  'resnet_base_lr',
  'rewriter_config',
  'rmsprop_decay',
  'rmsprop_epsilon',
  'rmsprop_momentum',
  'save_model_secs',
  'save_model_steps',
  'save_summaries_steps',
  'server_protocol',
  'single_l2_loss_op',
  'sparse_to_dense_grads',
  'staged_vars',
  'stop_at_top_1_accuracy',
  'summary_verbosity',
  'sync_on_finish',
  'task_index',
  'tf_random_seed',
  'tfprof_file',
  'timestamped_allocator',
  'trace_file',
  'train_dir',
  'trt_max_workspace_size_bytes',
  'trt_mode',
  'use_chrome_trace_format',
  'use_datasets',
  'use_fp16',
  'use_numa_affinity',
  'use_python32_barrier',
  'use_resource_vars',
  'use_tf_layers',
  'use_unified_memory',
  'variable_consistency',
  'variable_update',
  'weight_decay',
  'winograd_nonfused',
  'worker_hosts',
  'xla',
  'xla_compile',
)
# Graph-shaping flags the fingerprint missed before issue 26: workers started
# with different values of these were not caught.
ONCE_MISSING = (
  'allreduce_merge_scope',
  'hierarchical_copy',
  'network_topology',
  'staged_vars',
  'local_parameter_device',
  'pack_ps_transfers',
  'single_l2_loss_op',
  'xla_compile',
  'compute_lr_on_cpu',
)
FIELDS = list(dataclasses.fields(params_value.Params))


@pytest.mark.parametrize('field', FIELDS, ids=lambda f: f.name)
def test_every_field_has_help_topic_and_kinds(field):
  meta = field.metadata
  assert meta['help'].strip(), field.name
  assert meta['topic'] in fields.TOPICS, field.name
  assert isinstance(meta['classic'], bool), field.name
  assert isinstance(meta['graph'], bool), field.name


def test_fingerprint_hashes_exactly_the_graph_shaping_fields():
  hashed = [name for name, _ in fingerprint.run_flags(params_value.Params())]
  assert hashed == list(fields.graph_field_names(params_value.Params))
  assert set(ONCE_MISSING) <= set(hashed)


def test_a_new_graph_shaping_field_is_fingerprinted_without_other_edits():
  @dataclasses.dataclass(frozen=True)
  class WithNewFlag(params_value.Params):
    new_reduction_knob: Optional[int] = fields.field(
      None,
      'A flag that changes the reduction.',
      topic=fields.STRATEGY,
      classic=False,
      graph=True,
    )

  hashed = dict(fingerprint.run_flags(WithNewFlag(new_reduction_knob=3)))
  assert hashed['new_reduction_knob'] == 3


def test_the_classic_list_is_the_classic_harness_flags():
  assert len(CLASSIC_FLAG_NAMES) == len(set(CLASSIC_FLAG_NAMES)) == 138
  assert set(classic_flags.CLASSIC_FLAGS) == set(CLASSIC_FLAG_NAMES)


@pytest.mark.parametrize('name', CLASSIC_FLAG_NAMES)
def test_every_classic_flag_is_a_field_or_a_declared_no_op(name):
  if name in params_value.FIELDS:
    assert params_value.FIELDS[name].metadata['classic'], name
    assert name not in classic_flags.EXTRA_FLAGS, name
    assert classic_flags.CLASSIC_FLAGS[name].status == classic_flags.IMPLEMENTED
  else:
    extra = classic_flags.EXTRA_FLAGS[name]
    assert extra.status == classic_flags.NO_EFFECT, name
    assert extra.note, name


def test_fields_marked_classic_are_classic_flags():
  marked = {f.name for f in FIELDS if f.metadata['classic']}
  assert marked <= set(CLASSIC_FLAG_NAMES)


def test_extra_classic_flags_are_not_fields():
  assert not set(classic_flags.EXTRA_FLAGS) & set(params_value.FIELDS)


def test_flags_are_generated_with_the_field_defaults():
  from absl import flags

  values = flags.FlagValues()
  params_value.define_flags(values)
  for field in FIELDS:
    default = field.default
    if isinstance(default, tuple):
      default = list(default)
    assert values[field.name].default == default, field.name
    assert values[field.name].help.startswith(field.metadata['help'])


def _imports(path):
  """Module names a Python file imports (any level, lazy ones included)."""
  import ast  # pylint: disable=g-import-not-at-top

  tree = ast.parse(path.read_text())
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      yield from (a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module:
      yield from ('%s.%s' % (node.module, a.name) for a in node.names)


def test_config_imports_no_room_above_it_and_no_circle():
  import pathlib  # pylint: disable=g-import-not-at-top

  config = pathlib.Path(params_value.__file__).parent
  above = tuple(
    'tf_cnn_benchmarks.%s' % room
    for room in (
      'training',
      'evaluation',
      'inputs',
      'reporting',
      'observability',
      'benchmark_cnn',
    )
  )
  for path in config.glob('*.py'):
    bad = [m for m in _imports(path) if m.startswith(above)]
    assert not bad, (path.name, bad)
  resolve_imports = set(_imports(config / 'resolve.py'))
  assert 'tf_cnn_benchmarks.config.params' not in resolve_imports
