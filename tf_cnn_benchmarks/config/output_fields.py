"""Data, checkpoint, evaluation and output fields of `params.Params`.

The third group of Params fields (a base class of Params).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tf_cnn_benchmarks.config import fields


@dataclasses.dataclass(frozen=True)
class OutputFields:
  """Real data, checkpoints and evaluation, observability and output."""

  # Real data (unset --data_dir: synthetic data).
  data_dir: Optional[str] = fields.field(
    None,
    'Directory of the real dataset: ImageNet TFRecords '
    '(train-*-of-*, validation-*-of-*) or the CIFAR-10 python batches '
    '(data_batch_1..5, test_batch). Unset: synthetic data.',
    topic=fields.MODEL_DATA,
    classic=True,
  )
  distortions: bool = fields.field(
    False,
    'Training: ImageNet colour distortion on top of the random '
    'bounding-box crop and flip; CIFAR-10 random crop and flip.',
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  resize_method: str = fields.field(
    'bilinear',
    'How ImageNet images are resized to the model size; '
    'round_robin cycles through the methods per image.',
    ('crop', 'nearest', 'bilinear', 'bicubic', 'area', 'round_robin'),
    topic=fields.MODEL_DATA,
    classic=True,
    graph=True,
  )
  datasets_num_private_threads: Optional[int] = fields.field(
    None,
    'Threads of a private thread pool for the input pipeline '
    '(None: the shared pool).',
    topic=fields.PERFORMANCE,
    classic=True,
  )
  datasets_prefetch_buffer_size: int = fields.field(
    1,
    "Batches each tower's input stream prefetches.",
    topic=fields.PERFORMANCE,
    classic=True,
  )
  datasets_use_caching: bool = fields.field(
    False,
    'Cache the decoded examples in memory after the first pass.',
    topic=fields.PERFORMANCE,
    classic=True,
  )
  datasets_parallel_interleave_cycle_length: Optional[int] = fields.field(
    None,
    'Files read in parallel per input stream (None: 10).',
    topic=fields.PERFORMANCE,
    classic=True,
  )
  datasets_repeat_cached_sample: bool = fields.field(
    False,
    'Repeat the first raw record forever (no I/O; decoding and '
    'preprocessing still done per example), as the classic harness.',
    topic=fields.MODEL_DATA,
    classic=True,
  )
  datasets_use_prefetch: bool = fields.field(
    True,
    "Real data on GPU runs: copy each tower's batches onto its GPU ahead "
    'of use (tf.data prefetch_to_device); CPU towers read from the host.',
    topic=fields.PERFORMANCE,
    classic=True,
  )
  multi_device_iterator_max_buffer_size: int = fields.field(
    1,
    "With --datasets_use_prefetch: batches held on each tower's device "
    "(classic: the multi-device iterator's host buffer per device).",
    topic=fields.PERFORMANCE,
    classic=True,
  )

  # Checkpoints and evaluation.
  train_dir: Optional[str] = fields.field(
    None,
    'Checkpoint directory: the run resumes from its latest '
    'checkpoint and saves there (and at the end).',
    topic=fields.CHECKPOINTS,
    classic=True,
  )
  save_model_steps: Optional[int] = fields.field(
    None,
    'Save a checkpoint every N steps (needs --train_dir).',
    topic=fields.CHECKPOINTS,
    classic=True,
  )
  save_model_secs: int = fields.field(
    0,
    'Save a checkpoint every N seconds (0: off; needs --train_dir).',
    topic=fields.CHECKPOINTS,
    classic=True,
  )
  max_ckpts_to_keep: int = fields.field(
    5,
    'Checkpoints kept in --train_dir.',
    topic=fields.CHECKPOINTS,
    classic=True,
  )
  eval: bool = fields.field(
    False,
    'Evaluate the latest checkpoint of --train_dir on the '
    'validation split: top-1/top-5 accuracy and examples/sec.',
    topic=fields.CHECKPOINTS,
    classic=True,
    graph=True,
  )
  eval_interval_secs: int = fields.field(
    0,
    'With --eval: keep evaluating each new checkpoint, polling every '
    'N seconds (0: evaluate the latest once).',
    topic=fields.CHECKPOINTS,
    classic=True,
  )
  eval_timeout_secs: int = fields.field(
    600,
    'With --eval_interval_secs: stop after N seconds without a new checkpoint.',
    topic=fields.CHECKPOINTS,
    classic=False,
  )
  eval_during_training_every_n_steps: Optional[int] = fields.field(
    None,
    'While training, evaluate the current variables after every N timed '
    'steps (and at the end).',
    topic=fields.CHECKPOINTS,
    classic=True,
    graph=True,
  )
  num_eval_batches: Optional[int] = fields.field(
    None,
    'Batches per evaluation. Default: from --num_eval_epochs, else as '
    'training: --num_epochs (of the validation split) or --num_batches. A '
    'validation pass that ends first starts again.',
    topic=fields.CHECKPOINTS,
    classic=True,
  )
  num_eval_epochs: Optional[float] = fields.field(
    None,
    'Passes over the validation split per evaluation (batches rounded up).',
    topic=fields.CHECKPOINTS,
    classic=True,
  )
  eval_batch_size: int = fields.field(
    0,
    'Evaluation batch size per device (0: --batch_size).',
    topic=fields.CHECKPOINTS,
    classic=True,
  )
  eval_dir: Optional[str] = fields.field(
    '/tmp/tf_cnn_benchmarks/eval',
    'TensorBoard events of the evaluations (eval/Accuracy@1, '
    "eval/Accuracy@5 at the checkpoint's global step); '' writes none.",
    topic=fields.CHECKPOINTS,
    classic=True,
  )
  eval_during_training_every_n_epochs: Optional[float] = fields.field(
    None,
    'While training, evaluate after every N epochs (and at the end).',
    topic=fields.CHECKPOINTS,
    classic=True,
    graph=True,
  )
  eval_during_training_at_specified_steps: tuple = fields.field(
    (),
    'While training, evaluate after these timed steps (and at the end).',
    topic=fields.CHECKPOINTS,
    classic=True,
    graph=True,
  )
  eval_during_training_at_specified_epochs: tuple = fields.field(
    (),
    'While training, evaluate after these epochs (and at the end).',
    topic=fields.CHECKPOINTS,
    classic=True,
    graph=True,
  )
  stop_at_top_1_accuracy: Optional[float] = fields.field(
    None,
    'With an --eval_during_training_* flag: stop training at the first '
    'evaluation whose top-1 accuracy is at least this; report the time '
    'and steps it took.',
    topic=fields.CHECKPOINTS,
    classic=True,
    graph=True,
  )

  # Observability.
  summary_verbosity: int = fields.field(
    0,
    'TensorBoard summaries: 0 none, 1 loss/learning rate/loss scale, '
    '2 + gradient and variable norms, 3 + variable histograms.',
    topic=fields.OBSERVABILITY,
    classic=True,
  )
  save_summaries_steps: int = fields.field(
    0,
    'Write summaries every N steps into --train_dir (0: never).',
    topic=fields.OBSERVABILITY,
    classic=True,
  )
  trace_file: Optional[str] = fields.field(
    None,
    'Write a Chrome trace (chrome://tracing) of one timed step here.',
    topic=fields.OBSERVABILITY,
    classic=True,
  )
  graph_file: Optional[str] = fields.field(
    None,
    'Write the training graph (GraphDef, text if the name ends in '
    '.pbtxt) here.',
    topic=fields.OBSERVABILITY,
    classic=True,
  )
  build_only: bool = fields.field(
    False,
    'Build the graph the other flags describe (any --device and '
    "--num_gpus, cluster flags included: this task's graph), print its "
    'placement report and check that every GPU op has a GPU kernel in this '
    'TensorFlow build; run nothing (no server, session or step). Works on '
    'a machine without a GPU.',
    topic=fields.OBSERVABILITY,
    classic=False,
  )
  placement_file: Optional[str] = fields.field(
    None,
    'Write the placement report here (JSON: every op with its device and '
    'dtypes; where variables live, where gradients are reduced, the bytes '
    'crossing devices per step, ops per device, the GPU kernel check).',
    topic=fields.OBSERVABILITY,
    classic=False,
  )

  # Output.
  display_every: int = fields.field(
    10,
    'Print a table row every N steps.',
    topic=fields.OBSERVABILITY,
    classic=True,
  )
  print_training_accuracy: bool = fields.field(
    False,
    "Add the training batch's top_1_accuracy and top_5_accuracy to the "
    'step table and the results line.',
    topic=fields.OBSERVABILITY,
    classic=True,
  )
  loss_type_to_report: str = fields.field(
    'total_loss',
    'Loss of the step table, summaries and results line: total_loss '
    '(with the L2 term) or base_loss (without it).',
    ('base_loss', 'total_loss'),
    topic=fields.OBSERVABILITY,
    classic=True,
  )
  display_perf_ewma: Optional[float] = fields.field(
    None,
    "The step table's images/sec as an exponentially weighted moving "
    'average of the step times with this weight in (0, 1] for the newest '
    'step.',
    topic=fields.OBSERVABILITY,
    classic=True,
  )
  result_file: Optional[str] = fields.field(
    None,
    'Append one JSON line describing the run to this file.',
    topic=fields.OBSERVABILITY,
    classic=False,
  )
  peak_tflops_per_device: str = fields.field(
    'auto',
    'Peak TFLOP/s of one device, for MFU: auto (the dense matmul peak of '
    'the compute dtype, measured once per machine and cached), none (no '
    'MFU), or a number.',
    topic=fields.OBSERVABILITY,
    classic=False,
  )
