"""Data, checkpoint, evaluation and output fields of `params.Params`.

The third group of Params fields (a base class of Params).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tf_cnn_benchmarks.config import fields

# Field makers for the runs of fields that share a topic and graph setting
# (classic=True unless a field says otherwise).
_checkpoint_field = fields.family(fields.CHECKPOINTS)
_checkpoint_graph_field = fields.family(fields.CHECKPOINTS, graph=True)
_model_data_field = fields.family(fields.MODEL_DATA)
_model_data_graph_field = fields.family(fields.MODEL_DATA, graph=True)
_observability_field = fields.family(fields.OBSERVABILITY)
_performance_field = fields.family(fields.PERFORMANCE)


@dataclasses.dataclass(frozen=True)
class OutputFields:
  """Real data, checkpoints and evaluation, observability and output."""

  # Real data (unset --data_dir: synthetic data).
  data_dir: Optional[str] = _model_data_field(
    None,
    'Directory of the real dataset: ImageNet TFRecords '
    '(train-*-of-*, validation-*-of-*) or the CIFAR-10 python batches '
    '(data_batch_1..5, test_batch). Unset: synthetic data.',
  )
  distortions: bool = _model_data_graph_field(
    False,
    'Training: ImageNet colour distortion on top of the random '
    'bounding-box crop and flip; CIFAR-10 random crop and flip.',
  )
  resize_method: str = _model_data_graph_field(
    'bilinear',
    'How ImageNet images are resized to the model size; '
    'round_robin cycles through the methods per image.',
    ('crop', 'nearest', 'bilinear', 'bicubic', 'area', 'round_robin'),
  )
  datasets_num_private_threads: Optional[int] = _performance_field(
    None,
    'Threads of a private thread pool for the input pipeline '
    '(None: the shared pool).',
  )
  datasets_prefetch_buffer_size: int = _performance_field(
    1, "Batches each tower's input stream prefetches."
  )
  datasets_use_caching: bool = _performance_field(
    False, 'Cache the decoded examples in memory after the first pass.'
  )
  datasets_parallel_interleave_cycle_length: Optional[int] = _performance_field(
    None, 'Files read in parallel per input stream (None: 10).'
  )
  datasets_repeat_cached_sample: bool = _model_data_field(
    False,
    'Repeat the first raw record forever (no I/O; decoding and '
    'preprocessing still done per example), as the classic harness.',
  )
  datasets_use_prefetch: bool = _performance_field(
    True,
    "Real data on GPU runs: copy each tower's batches onto its GPU ahead "
    'of use (tf.data prefetch_to_device); CPU towers read from the host.',
  )
  multi_device_iterator_max_buffer_size: int = _performance_field(
    1,
    "With --datasets_use_prefetch: batches held on each tower's device "
    "(classic: the multi-device iterator's host buffer per device).",
  )

  # Checkpoints and evaluation.
  train_dir: Optional[str] = _checkpoint_field(
    None,
    'Checkpoint directory: the run resumes from its latest '
    'checkpoint and saves there (and at the end).',
  )
  save_model_steps: Optional[int] = _checkpoint_field(
    None, 'Save a checkpoint every N steps (needs --train_dir).'
  )
  save_model_secs: int = _checkpoint_field(
    0, 'Save a checkpoint every N seconds (0: off; needs --train_dir).'
  )
  max_ckpts_to_keep: int = _checkpoint_field(
    5, 'Checkpoints kept in --train_dir.'
  )
  eval: bool = _checkpoint_graph_field(
    False,
    'Evaluate the latest checkpoint of --train_dir on the '
    'validation split: top-1/top-5 accuracy and examples/sec.',
  )
  eval_interval_secs: int = _checkpoint_field(
    0,
    'With --eval: keep evaluating each new checkpoint, polling every '
    'N seconds (0: evaluate the latest once).',
  )
  eval_timeout_secs: int = _checkpoint_field(
    600,
    'With --eval_interval_secs: stop after N seconds without a new checkpoint.',
    classic=False,
  )
  eval_during_training_every_n_steps: Optional[int] = _checkpoint_graph_field(
    None,
    'While training, evaluate the current variables after every N timed '
    'steps (and at the end).',
  )
  num_eval_batches: Optional[int] = _checkpoint_field(
    None,
    'Batches per evaluation. Default: from --num_eval_epochs, else as '
    'training: --num_epochs (of the validation split) or --num_batches. A '
    'validation pass that ends first starts again.',
  )
  num_eval_epochs: Optional[float] = _checkpoint_field(
    None,
    'Passes over the validation split per evaluation (batches rounded up).',
  )
  eval_batch_size: int = _checkpoint_field(
    0, 'Evaluation batch size per device (0: --batch_size).'
  )
  eval_dir: Optional[str] = _checkpoint_field(
    '/tmp/tf_cnn_benchmarks/eval',
    'TensorBoard events of the evaluations (eval/Accuracy@1, '
    "eval/Accuracy@5 at the checkpoint's global step); '' writes none.",
  )
  eval_during_training_every_n_epochs: Optional[float] = (
    _checkpoint_graph_field(
      None, 'While training, evaluate after every N epochs (and at the end).'
    )
  )
  eval_during_training_at_specified_steps: tuple = _checkpoint_graph_field(
    (), 'While training, evaluate after these timed steps (and at the end).'
  )
  eval_during_training_at_specified_epochs: tuple = _checkpoint_graph_field(
    (), 'While training, evaluate after these epochs (and at the end).'
  )
  stop_at_top_1_accuracy: Optional[float] = _checkpoint_graph_field(
    None,
    'With an --eval_during_training_* flag: stop training at the first '
    'evaluation whose top-1 accuracy is at least this; report the time '
    'and steps it took.',
  )

  # Observability.
  summary_verbosity: int = _observability_field(
    0,
    'TensorBoard summaries: 0 none, 1 loss/learning rate/loss scale, '
    '2 + gradient and variable norms, 3 + variable histograms.',
  )
  save_summaries_steps: int = _observability_field(
    0, 'Write summaries every N steps into --train_dir (0: never).'
  )
  trace_file: Optional[str] = _observability_field(
    None, 'Write a Chrome trace (chrome://tracing) of one timed step here.'
  )
  tensorboard_profile_dir: Optional[str] = _observability_field(
    None,
    "Profile the timed steps with TensorFlow's profiler "
    '(tf.profiler.experimental) into this directory: '
    "plugins/profile/<run>/<host>.xplane.pb, which TensorBoard's profile "
    "plugin opens (tensorboard --logdir DIR). The profiler's overhead is "
    'in the timed numbers.',
    classic=False,
  )
  ml_perf_compliance_logging: bool = _observability_field(
    False,
    'Print MLPerf compliance lines (:::MLLOG, through the mlperf-logging '
    'package): run start/stop, epochs, evaluations and their accuracy, '
    'batch size and optimiser settings.',
  )
  ml_perf_log_file: Optional[str] = _observability_field(
    None,
    'With --ml_perf_compliance_logging: also write the :::MLLOG lines to '
    'this file (replaced each run), for the MLPerf compliance checker.',
    classic=False,
  )
  graph_file: Optional[str] = _observability_field(
    None,
    'Write the training graph (GraphDef, text if the name ends in '
    '.pbtxt) here.',
  )
  build_only: bool = _observability_field(
    False,
    'Build the graph the other flags describe (any --device and '
    "--num_gpus, cluster flags included: this task's graph), print its "
    'placement report and check that every GPU op has a GPU kernel in this '
    'TensorFlow build; run nothing (no server, session or step). Works on '
    'a machine without a GPU.',
    classic=False,
  )
  placement_file: Optional[str] = _observability_field(
    None,
    'Write the placement report here (JSON: every op with its device and '
    'dtypes; where variables live, where gradients are reduced, the bytes '
    'crossing devices per step, ops per device, the GPU kernel check).',
    classic=False,
  )

  # Output.
  display_every: int = _observability_field(
    10, 'Print a table row every N steps.'
  )
  print_training_accuracy: bool = _observability_field(
    False,
    "Add the training batch's top_1_accuracy and top_5_accuracy to the "
    'step table and the results line.',
  )
  loss_type_to_report: str = _observability_field(
    'total_loss',
    'Loss of the step table, summaries and results line: total_loss '
    '(with the L2 term) or base_loss (without it).',
    ('base_loss', 'total_loss'),
  )
  display_perf_ewma: Optional[float] = _observability_field(
    None,
    "The step table's images/sec as an exponentially weighted moving "
    'average of the step times with this weight in (0, 1] for the newest '
    'step.',
  )
  result_file: Optional[str] = _observability_field(
    None, 'Append one JSON line describing the run to this file.', classic=False
  )
  peak_tflops_per_device: str = _observability_field(
    'auto',
    'Peak TFLOP/s of one device, for MFU: auto (the dense matmul peak of '
    'the compute dtype, measured once per machine and cached), none (no '
    'MFU), or a number.',
    classic=False,
  )
