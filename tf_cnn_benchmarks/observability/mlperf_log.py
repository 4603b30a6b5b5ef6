"""--ml_perf_compliance_logging: MLPerf compliance lines (:::MLLOG).

The lines are written by the mlperf-logging package (`mlperf_logging.mllog`)
to the run's console and, with --ml_perf_log_file, to that file too. Only
the chief task logs (MLPerf logs one process's view of the run). What is
logged, in order:

  submission_benchmark 'resnet' (MLPerf's image classification benchmark),
    submission_division 'open' (the harness cannot vouch for the closed
    division's rules: data, model and hyperparameters are the user's),
    submission_platform (this host's name); submission_org,
    submission_status and cache_clear are the submitter's to add.
  init_start; the run's settings: global_batch_size,
    gradient_accumulation_steps (1), seed, train_samples and eval_samples
    (the splits' sizes), model_bn_span (one tower's batch: batch norm's
    statistics span one tower), opt_name, opt_base_learning_rate,
    opt_weight_decay, sgd_opt_momentum (momentum) and
    opt_learning_rate_warmup_epochs (when set); init_stop and run_start as
    the first step (warm-up included) begins.
  block_start / block_stop around the training between two evaluations
    (metadata: first_epoch_num, the epochs done as the block starts, and
    samples_count); epoch_start / epoch_stop as the global step enters and
    leaves each epoch (epoch_num from 1; global step x global batch size
    counts the samples, so a resumed run goes on counting); an epoch left
    unfinished is closed at run_stop.
  eval_start, eval_accuracy (top-1, a fraction) and eval_stop around each
    evaluation during training (metadata: epoch_num, the epochs done as a
    fraction, and samples_count).
  run_stop with status 'success' (the steps asked for ran, or
    --stop_at_top_1_accuracy was reached) or 'aborted' (the target was not
    reached, or the run failed).
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Callable, Optional

try:  # an optional package: the flag's check says how to install it
  from mlperf_logging.mllog import constants as keys
  from mlperf_logging.mllog import mllog
except ImportError:  # pragma: no cover (installed by requirements.txt)
  keys = mllog = None

from tf_cnn_benchmarks.config import schedules

# File paths in the lines' metadata are given from the repository root.
_ROOT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)

# The key MLPerf's ResNet SGD rules name (compliance_checker
# training_4.0.0/closed_resnet_sgd.yaml); mllog.constants has no name for it.
SGD_OPT_MOMENTUM = 'sgd_opt_momentum'


class _ConsoleHandler(logging.Handler):
  """A logging handler that prints each record on the run's console."""

  def __init__(self, print_line: Callable[[str], None]):
    super().__init__(logging.INFO)
    self.print_line = print_line

  def emit(self, record: logging.LogRecord) -> None:
    self.print_line(self.format(record))


def base_learning_rate(p, model) -> float:
  """The rate the run's schedule starts from (before the model's scaling).

  --init_learning_rate, else the first --piecewise_learning_rate_schedule
  value, else --resnet_base_lr (ResNet schedules), else the model's own.
  """
  if p.init_learning_rate is not None:
    return float(p.init_learning_rate)
  if p.piecewise_learning_rate_schedule:
    return float(
      schedules.parse_piecewise(p.piecewise_learning_rate_schedule).values[0]
    )
  if p.resnet_base_lr is not None and hasattr(model, 'BASE_BATCH_SIZE'):
    return float(p.resnet_base_lr)
  return float(model.default_learning_rate)


def open_log(
  p,
  model,
  *,
  global_batch_size: int,
  num_train_examples: int,
  num_eval_examples: int,
  print_line: Callable[[str], None],
  is_chief: bool,
) -> Optional['ComplianceLog']:
  """Starts the log (init_start and the run's settings), or None.

  None without --ml_perf_compliance_logging and on a task that is not the
  chief.
  """
  if not p.ml_perf_compliance_logging or not is_chief:
    return None
  log = ComplianceLog(
    print_line, p.ml_perf_log_file, global_batch_size, num_train_examples
  )
  log.submission()
  log.mllogger.start(keys.INIT_START)
  log.settings(p, model, num_train_examples, num_eval_examples)
  return log


def logged_evaluation(log: Optional['ComplianceLog'], evaluate):
  """`evaluate` (() -> EvalResult), with its lines when `log` is not None."""
  if log is None or evaluate is None:
    return evaluate
  return lambda: log.evaluation(evaluate)


class ComplianceLog:
  """The :::MLLOG lines of one run (see the module doc)."""

  def __init__(
    self,
    print_line: Callable[[str], None],
    path: Optional[str],
    global_batch_size: int,
    num_train_examples: int,
  ):
    # A logger of its own (not registered by name): each run gets its own
    # handlers, and the package's default logger (stdout) stays unused.
    self.logger = logging.Logger('tf_cnn_benchmarks.mlperf', logging.INFO)
    self.logger.addHandler(_ConsoleHandler(print_line))
    self._file = None
    if path:
      directory = os.path.dirname(os.path.abspath(path))
      os.makedirs(directory, exist_ok=True)
      self._file = logging.FileHandler(path, mode='w')
      self.logger.addHandler(self._file)
    self.mllogger = mllog.MLLogger(logger=self.logger, root_dir=_ROOT)
    self.global_batch_size = global_batch_size
    self.num_train_examples = max(1, num_train_examples)
    self.samples = 0
    self.epoch: Optional[int] = None  # the open epoch, from 1
    self.block: Optional[dict] = None  # the open block's start metadata
    self.running = False

  def submission(self) -> None:
    """The submission keys the harness can state."""
    event = self.mllogger.event
    event(keys.SUBMISSION_BENCHMARK, keys.RESNET)
    event(keys.SUBMISSION_DIVISION, keys.OPEN)
    event(keys.SUBMISSION_PLATFORM, socket.gethostname())

  def settings(self, p, model, num_train: int, num_eval: int) -> None:
    """The run's hyperparameters and data sizes."""
    event = self.mllogger.event
    event(keys.GLOBAL_BATCH_SIZE, self.global_batch_size)
    event(keys.GRADIENT_ACCUMULATION_STEPS, 1)
    event(keys.SEED, p.tf_random_seed)
    event(keys.TRAIN_SAMPLES, num_train)
    event(keys.EVAL_SAMPLES, num_eval)
    event(keys.MODEL_BN_SPAN, p.batch_size)
    event(keys.OPT_NAME, 'sgd' if p.optimizer == 'momentum' else p.optimizer)
    event(keys.OPT_BASE_LR, base_learning_rate(p, model))
    event(keys.OPT_WEIGHT_DECAY, p.weight_decay)
    if p.optimizer == 'momentum':
      event(SGD_OPT_MOMENTUM, p.momentum)
    if p.num_learning_rate_warmup_epochs:
      event(keys.OPT_LR_WARMUP_EPOCHS, p.num_learning_rate_warmup_epochs)

  def run_start(self, global_step: int) -> None:
    """init_stop and run_start: training begins at `global_step`."""
    self.samples = global_step * self.global_batch_size
    self.mllogger.end(keys.INIT_STOP)
    self.mllogger.start(keys.RUN_START)
    self.running = True

  def step_done(self, global_step: int) -> None:
    """After a training step: the block and epoch lines now due."""
    if self.block is None:
      self.block = {
        keys.FIRST_EPOCH_NUM: self.samples / self.num_train_examples,
        keys.SAMPLES_COUNT: self.samples,
      }
      self.mllogger.start(keys.BLOCK_START, metadata=self.block)
    if self.epoch is None:
      self.epoch = self.samples // self.num_train_examples + 1
      self.mllogger.start(
        keys.EPOCH_START, metadata={keys.EPOCH_NUM: self.epoch}
      )
    self.samples = global_step * self.global_batch_size
    if self.samples >= self.epoch * self.num_train_examples:
      self._end_epoch()

  def evaluation(self, evaluate):
    """evaluate() (-> an EvalResult) between its eval lines."""
    self._end_block()
    metadata = {
      keys.EPOCH_NUM: self.samples / self.num_train_examples,
      keys.SAMPLES_COUNT: self.samples,
    }
    self.mllogger.start(keys.EVAL_START, metadata=metadata)
    result = evaluate()
    self.mllogger.event(
      keys.EVAL_ACCURACY, float(result.top_1), metadata=metadata
    )
    self.mllogger.end(keys.EVAL_STOP, metadata=metadata)
    return result

  def run_stop(self, success: bool) -> None:
    """Closes the open epoch and block; run_stop with its status."""
    if not self.running:
      return
    self._end_epoch()
    self._end_block()
    status = keys.SUCCESS if success else keys.ABORTED
    self.mllogger.end(keys.RUN_STOP, metadata={keys.STATUS: status})
    self.running = False

  def close(self) -> None:
    """run_stop 'aborted' if the run did not stop; closes the file."""
    self.run_stop(success=False)
    if self._file is not None:
      self.logger.removeHandler(self._file)
      self._file.close()
      self._file = None

  def _end_epoch(self) -> None:
    if self.epoch is not None:
      self.mllogger.end(keys.EPOCH_STOP, metadata={keys.EPOCH_NUM: self.epoch})
      self.epoch = None

  def _end_block(self) -> None:
    if self.block is not None:
      # first_epoch_num: where the block began (the checker pairs them).
      self.mllogger.end(keys.BLOCK_STOP, metadata=self.block)
      self.block = None
