"""The input, runtime and profiling fields of `params.Params` (its bases).

Declared here, in the configuration room, with the same `fields.field`
helper as every other Params field; what they do lives where they take
effect:

  InputSettings: the classic ImageNet preprocessing flags (issue 14), used
    by inputs/preprocessing.py (`imagenet_style`).
  KnobSettings: grappler, NUMA, interleave and profiling knobs, used by
    platform/runtime_knobs.py (session config), inputs/data_sources.py and
    observability/profiling.py.
  RuntimeSettings: the classic GPU and MKL runtime settings, used by
    platform/gpu_runtime.py (ConfigProto fields and environment).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tf_cnn_benchmarks.config import fields

GPU_THREAD_MODES = ('gpu_private', 'gpu_shared', 'global')
# The classic --kmp_affinity default.
CLASSIC_KMP_AFFINITY = 'granularity=fine,verbose,compact,1,0'


# Field makers for the runs of fields that share a topic and graph setting
# (classic=True unless a field says otherwise).
_model_data_graph_field = fields.family(fields.MODEL_DATA, graph=True)
_observability_field = fields.family(fields.OBSERVABILITY)
_performance_field = fields.family(fields.PERFORMANCE)


@dataclasses.dataclass(frozen=True)
class InputSettings:
  """The ImageNet preprocessing flags (ImageNet real data only)."""

  fuse_decode_and_crop: bool = _model_data_graph_field(
    True,
    'ImageNet real data: decode only the crop window of each JPEG '
    '(decode_and_crop_jpeg); false decodes the whole image, then crops.',
  )
  distort_color_in_yiq: bool = _model_data_graph_field(
    True,
    'With --distortions (ImageNet real data): random hue and saturation '
    'as one transform in YIQ space, as classic; false: tf.image saturation '
    'then hue.',
  )
  ml_perf: bool = _model_data_graph_field(
    False,
    'ImageNet real data, MLPerf-compliant input as classic: the training '
    'crop ignores the bounding boxes, and images are pixels in [0, 255] '
    'minus the channel means (no scaling to [-1, 1]).',
  )
  input_preprocessor: str = _model_data_graph_field(
    'default',
    "Input preprocessor: 'default', or with ImageNet "
    "'official_models_imagenet' (the model garden's ResNet preprocessing: "
    'no colour distortion, aspect-preserving evaluation resize, '
    'channel means subtracted).',
  )


@dataclasses.dataclass(frozen=True)
class KnobSettings:
  """The input, runtime and profiling knobs of the classic harness."""

  datasets_sloppy_parallel_interleave: bool = _performance_field(
    False,
    'Real data (ImageNet TFRecords): let the parallel file interleave '
    'depart from deterministic order (tf.data deterministic=False), '
    'skipping files whose records are not ready yet.',
  )
  datasets_parallel_interleave_prefetch: Optional[int] = _performance_field(
    None,
    'Real data (ImageNet TFRecords): files the interleave opens ahead of '
    "their turn (the classic parallel_interleave's prefetch_input_elements; "
    'unset: tf.data autotunes it).',
  )
  use_numa_affinity: bool = _performance_field(
    False,
    'NUMA affinity for the CPU devices (ConfigProto use_numa_affinity: '
    'logical CPU device i allocates on NUMA node i mod the node count).',
  )
  enable_optimizations: bool = _performance_field(
    True,
    'Graph optimisations (grappler and the classic optimizer options); '
    'false turns them off.',
  )
  rewriter_config: Optional[str] = _performance_field(
    None,
    'A RewriterConfig text proto (e.g. "constant_folding: OFF") that '
    'replaces the grappler settings; it wins over --enable_optimizations.',
  )
  tfprof_file: Optional[str] = _observability_field(
    None,
    'Profile the first 10 steps after warm-up (extra, untimed steps) with '
    'tfprof, write the ProfileProto here and print the 20 ops that take '
    'the most time.',
  )
  partitioned_graph_file_prefix: Optional[str] = _observability_field(
    None,
    'Write the partitioned, optimised graph of each device of one step '
    '(after warm-up) to PREFIX<device>[.ext] (text if the name ends in txt).',
  )
  use_chrome_trace_format: bool = _observability_field(
    True,
    'With --trace_file: a Chrome trace; false: the raw StepStats text proto.',
  )
  benchmark_log_dir: Optional[str] = _observability_field(
    None,
    # reporting/outputs.BENCHMARK_LOG_NAME (config imports no reporting).
    "Also append the run's results line(s) to benchmark_run.log in this "
    'directory.',
  )
  benchmark_test_id: Optional[str] = _observability_field(
    None,
    'A free-form label of the run, written into its results line '
    '(benchmark_test_id); it changes nothing else.',
  )


@dataclasses.dataclass(frozen=True)
class RuntimeSettings:
  """The classic GPU and MKL runtime settings."""

  gpu_thread_mode: str = _performance_field(
    'gpu_private',
    'GPU host threads: gpu_private (a thread pool per GPU), gpu_shared (one '
    'pool for all GPUs), global (the shared inter-op pool); '
    'TF_GPU_THREAD_MODE.',
    GPU_THREAD_MODES,
  )
  per_gpu_thread_count: int = _performance_field(
    0,
    'Threads per GPU with gpu_private / gpu_shared (0: 2); '
    'TF_GPU_THREAD_COUNT.',
  )
  allow_growth: Optional[bool] = _performance_field(
    None, "GPUOptions.allow_growth (unset: TensorFlow's default, false)."
  )
  gpu_memory_frac_for_testing: float = _performance_field(
    0.0,
    'If > 0: GPUOptions.per_process_gpu_memory_fraction (e.g. to run '
    'several tasks on one GPU).',
  )
  use_unified_memory: Optional[bool] = _performance_field(
    None, 'GPUOptions.experimental.use_unified_memory.'
  )
  force_gpu_compatible: bool = _performance_field(
    False, 'GPUOptions.force_gpu_compatible (pinned host tensors).'
  )
  timestamped_allocator: bool = _performance_field(
    False, 'GPUOptions.experimental.timestamped_allocator.'
  )
  gpu_kt_max_interval: int = _performance_field(
    0,
    'If > 0: GPU kernel tracker, max ops queued in a row without a '
    'tracking event.',
  )
  gpu_kt_max_bytes: int = _performance_field(
    0,
    'If > 0: GPU kernel tracker, max bytes allocated by ops in a row '
    'without a tracking event.',
  )
  gpu_kt_max_pending: int = _performance_field(
    0, 'If > 0: GPU kernel tracker, max outstanding tracking events.'
  )
  winograd_nonfused: bool = _performance_field(
    True, 'cuDNN Winograd non-fused convolutions (TF_ENABLE_WINOGRAD_NONFUSED).'
  )
  batchnorm_persistent: bool = _performance_field(
    True,
    'cuDNN CUDNN_BATCHNORM_SPATIAL_PERSISTENT batch norm '
    '(TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT).',
  )
  sync_on_finish: bool = _performance_field(
    False, 'Synchronise the GPUs after each step (TF_SYNC_ON_FINISH).'
  )
  autotune_threshold: Optional[int] = _performance_field(
    None, 'cuDNN autotune threshold (TF_AUTOTUNE_THRESHOLD).'
  )
  gpu_indices: str = fields.field(
    '',
    'Comma-separated order of the GPUs (0..num_gpus-1) in rings and '
    "collectives: the all-reduce spec's device order and "
    'GPUOptions.experimental.collective_ring_order.',
    topic=fields.STRATEGY,
    classic=True,
    graph=True,
  )
  mkl: bool = _performance_field(
    False,
    'Set the MKL environment: KMP_BLOCKTIME, KMP_AFFINITY, KMP_SETTINGS and '
    'OMP_NUM_THREADS (--num_intra_threads). This TensorFlow wheel ships no '
    'Intel OpenMP runtime, so only OMP_NUM_THREADS is read.',
  )
  kmp_blocktime: int = _performance_field(0, 'KMP_BLOCKTIME with --mkl.')
  kmp_affinity: str = _performance_field(
    CLASSIC_KMP_AFFINITY, 'KMP_AFFINITY with --mkl.'
  )
  kmp_settings: int = _performance_field(1, 'KMP_SETTINGS with --mkl.')
