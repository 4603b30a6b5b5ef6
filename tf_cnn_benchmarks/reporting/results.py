"""The result of a run, as data: one JSON line (results/schema.json)."""

from __future__ import annotations

import copy
import dataclasses
import datetime

# 2: `env` grew (build, GPUs, ISA flags, memory, git_dirty, command line,
# null_reasons); `all_reduce_spec` became the flag, the prose went to
# `all_reduce_spec_description` (results/schema.json).
SCHEMA_VERSION = 2

MODES = ('train', 'forward_only', 'eval')


@dataclasses.dataclass(frozen=True)
class RunInfo:
  """How the run was made: keys `mode`, `data_dir`, `benchmark_test_id`.

  Every driver line has them.
  """

  mode: str  # one of MODES; 'eval': one evaluated checkpoint
  data_dir: str | None  # the real dataset read; None: synthetic data
  benchmark_test_id: str | None = None  # free-form label of the run

  def __post_init__(self):
    if self.mode not in MODES:
      raise ValueError('mode %r is not one of %s' % (self.mode, MODES))

  def to_keys(self) -> dict:
    """This part's keys of the results line."""
    return {
      'mode': self.mode,
      'data_dir': self.data_dir,
      'benchmark_test_id': self.benchmark_test_id,
    }


@dataclasses.dataclass(frozen=True)
class EvalInfo:
  """One evaluation of one checkpoint: the keys of an eval line.

  Also each entry of TrainInfo.evals (evaluations during training).
  """

  checkpoint_step: int
  top_1_accuracy: float
  top_5_accuracy: float
  eval_examples: int
  eval_examples_per_sec: float

  def to_keys(self) -> dict:
    """This part's keys of the results line."""
    return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class TimeToAccuracy:
  """--stop_at_top_1_accuracy: keys `time_to_accuracy_sec`, `steps_to_accuracy`.

  Both null when no evaluation reached the target.
  """

  seconds: float | None  # since the first training step, evaluations included
  steps: int | None  # global step of the evaluation that reached it

  def to_keys(self) -> dict:
    """This part's keys of the results line."""
    return {
      'time_to_accuracy_sec': self.seconds,
      'steps_to_accuracy': self.steps,
    }


_NO_TARGET = TimeToAccuracy(None, None)


@dataclasses.dataclass(frozen=True)
class TrainInfo:
  """The steps a training (or forward-only) run went through; not in eval lines.

  Keys `start_step`, `end_step`, `evals` (null when there was none) and the
  TimeToAccuracy keys (null without a target).
  """

  start_step: int  # global step when the run started (>0: resumed)
  end_step: int  # global step when it ended
  evals: tuple[EvalInfo, ...] = ()  # --eval_during_training_*
  time_to_accuracy: TimeToAccuracy | None = None
  # --num_warmup_batches=auto or --num_batches=auto: how the run decided
  # its warm-up and length (run_length.AutoLength.info); key `run_length`,
  # left out of other lines.
  run_length: dict | None = None

  def to_keys(self) -> dict:
    """This part's keys of the results line."""
    keys = {
      'start_step': self.start_step,
      'end_step': self.end_step,
      'evals': [e.to_keys() for e in self.evals] or None,
    }
    keys.update((self.time_to_accuracy or _NO_TARGET).to_keys())
    if self.run_length is not None:
      keys['run_length'] = copy.deepcopy(self.run_length)
    return keys


@dataclasses.dataclass(frozen=True)
class PrecisionInfo:
  """Loss scaling of a training run: keys `loss_scale`, `skipped_steps`."""

  loss_scale: float | None  # final loss scale; None: no loss scaling
  skipped_steps: int  # steps skipped for a non-finite gradient

  def to_keys(self) -> dict:
    """This part's keys of the results line."""
    return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class StepReport:
  """What the step table reported at every step (warm-up included).

  Keys `loss_type`, `learning_rates`, `top_1_accuracies`, `top_5_accuracies`
  of training and forward-only lines.
  """

  loss_type: str  # what `losses` hold: total_loss or base_loss
  learning_rates: list | None = None  # training lines: the rate each step used
  # --print_training_accuracy (and --forward_only): the fraction of the
  # step's batch whose label is the top (top-5) prediction; None when not
  # computed. The batch of every worker's towers in a cluster whose manager
  # averages the loss (as `losses`), else the writing task's.
  top_1_accuracies: list | None = None
  top_5_accuracies: list | None = None
  # In a cluster: the writing task's own accuracies. Not keys of this part:
  # they go to ClusterInfo's (run_results.cluster_info), as worker_losses.
  worker_top_1_accuracies: list | None = None
  worker_top_5_accuracies: list | None = None

  def to_keys(self) -> dict:
    """This part's keys of the results line."""
    keys = dataclasses.asdict(self)
    del keys['worker_top_1_accuracies'], keys['worker_top_5_accuracies']
    return keys


@dataclasses.dataclass(frozen=True)
class TaskInfo:
  """A cluster task: key `task` of a multi-worker line."""

  job_name: str  # 'worker' or 'controller'
  task_index: int


@dataclasses.dataclass(frozen=True)
class ClusterInfo:
  """Multi-worker runs: `images_per_sec_per_worker`, `task`, `worker_losses`,
  `worker_top_1_accuracies`, `worker_top_5_accuracies`.

  worker_*: the losses (accuracies) of the writing task's own towers (the
  line's `losses` and `top_*_accuracies` are the cluster's where the manager
  averages them).
  """

  images_per_sec_per_worker: float
  task: TaskInfo  # the task that wrote the line
  worker_losses: list | None = None
  worker_top_1_accuracies: list | None = None
  worker_top_5_accuracies: list | None = None

  def to_keys(self) -> dict:
    """This part's keys of the results line (the worker_* ones if set)."""
    keys = dataclasses.asdict(self)
    for key in _WORKER_KEYS:
      if keys[key] is None:
        del keys[key]
    return keys


# ClusterInfo's keys that a line leaves out when they are None.
_WORKER_KEYS = (
  'worker_losses',
  'worker_top_1_accuracies',
  'worker_top_5_accuracies',
)


# BenchmarkResult fields that are optional parts: None leaves their keys out.
_PARTS = (
  'run',
  'precision_info',
  'training',
  'evaluation',
  'cluster',
  'step_report',
)


@dataclasses.dataclass(frozen=True)
class BenchmarkResult:
  """What a run measured; the console table and the JSON line are views of it.

  The fields up to `peak_tflops_origin` are the keys of every line. The
  optional parts after them add their keys (see their classes) when set: the
  driver sets `run` on every line, `precision_info` and `training` on
  training and forward-only lines, `evaluation` on eval lines, `cluster`
  in multi-worker runs, and `step_report` on training and forward-only
  lines.
  """

  params: dict
  env: dict
  model: str
  data_name: str
  variable_update: str
  all_reduce_spec: str | None  # the --all_reduce_spec flag as given
  # The manager's reduction in words (the header's AllReduce row); keyword
  # only, so it may sit beside all_reduce_spec ahead of required fields.
  all_reduce_spec_description: str | None = dataclasses.field(
    default=None, kw_only=True
  )
  # --gradient_compression and its setting (--powersgd_rank, None unless
  # powersgd): compression/catalog.result_keys.
  gradient_compression: str = dataclasses.field(default='none', kw_only=True)
  powersgd_rank: int | None = dataclasses.field(default=None, kw_only=True)
  # --gradient_accumulation_steps: micro-steps per update (a step and
  # global_batch_size count one update of all of them).
  gradient_accumulation_steps: int = dataclasses.field(default=1, kw_only=True)
  # --collective_implementation (resolved: ring or nccl) and its settings,
  # all None when no gradient travels in collectives:
  # collective_catalog.result_keys.
  collective_implementation: str | None = dataclasses.field(
    default=None, kw_only=True
  )
  collective_bytes_per_pack: int | None = dataclasses.field(
    default=None, kw_only=True
  )
  collective_merge_scope: int | None = dataclasses.field(
    default=None, kw_only=True
  )
  precision: str
  num_devices: int
  num_workers: int
  batch_size_per_device: int
  global_batch_size: int
  num_steps: int
  num_warmup_steps: int
  images_per_sec: float
  images_per_sec_per_device: float
  step_time_ms: dict
  losses: list
  flops_per_image: int | None
  tflops_per_sec: float | None
  peak_tflops_per_device: float | None
  mfu: float | None
  peak_tflops_origin: str | None = None
  # The timed steps' durations (timing.step_times_ms) and the spread of
  # images_per_sec (timing.images_per_sec_spread); None in eval lines, whose
  # batches are not timed one by one.
  step_times_ms: list | None = None
  images_per_sec_spread: dict | None = None
  run: RunInfo | None = None
  precision_info: PrecisionInfo | None = None
  training: TrainInfo | None = None
  evaluation: EvalInfo | None = None
  cluster: ClusterInfo | None = None
  step_report: StepReport | None = None

  @property
  def final_loss(self) -> float | None:
    return self.losses[-1] if self.losses else None

  def to_record(self) -> dict:
    """The JSON object of this run (schema_version SCHEMA_VERSION)."""
    record = {
      'schema_version': SCHEMA_VERSION,
      'status': 'ok',
      'error': None,
      'utc_time': datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec='seconds'
      ),
    }
    for field in dataclasses.fields(self):
      if field.name not in _PARTS:
        record[field.name] = copy.deepcopy(getattr(self, field.name))
    record['final_loss'] = self.final_loss
    for name in _PARTS:
      part = getattr(self, name)
      if part is not None:
        record.update(part.to_keys())
    return record
