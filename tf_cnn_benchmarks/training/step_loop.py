"""The steps of a training or forward-only run.

First the session's variables are initialised (or restored); then
warm-up steps, the untimed observed steps (profiling.py) and the timed steps,
with the periodic work due between two steps: step table rows, checkpoints,
summaries and evaluations during training.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import tensorflow as tf

from tf_cnn_benchmarks.observability import profiling
from tf_cnn_benchmarks.observability import summaries
from tf_cnn_benchmarks.reporting import outputs
from tf_cnn_benchmarks.reporting import results
from tf_cnn_benchmarks.reporting import run_length
from tf_cnn_benchmarks.reporting import step_report
from tf_cnn_benchmarks.reporting import timing
from tf_cnn_benchmarks.training import checkpoints
from tf_cnn_benchmarks.training import step_graph


@dataclasses.dataclass(frozen=True)
class LoopSettings:
  """What the step loop needs of its run, besides the session and graph."""

  params: object  # the resolved Params
  global_batch_size: int  # every worker's images in one step
  # This process's images in one step (its towers' batches): the step
  # table's images/sec is this process's own, as classic printed each
  # worker's; a controller's graph holds every worker's towers.
  process_batch_size: int
  print_line: Callable[[str], None]  # the run's console
  is_chief: bool  # writes summaries and trace files
  # (global_step=() -> the step now) -> the evaluations during training
  # (an eval_schedule.DuringTraining), or None when there are none.
  during_training: Callable[[Callable[[], int]], object | None]
  # --ml_perf_compliance_logging's mlperf_log.ComplianceLog (None: off).
  compliance: object | None = None


def initialize(sess, built: step_graph.BuiltGraph, print_line) -> int:
  """Initialises (or restores) variables; returns the starting global step.

  print_line: where the 'Initializing graph' and 'Restored checkpoint' lines
  go (the run's console).
  """
  print_line('Initializing graph')
  sess.run(built.init_ops)
  if built.checkpointer is not None and built.checkpointer.restore_from:
    built.checkpointer.restore(sess)
    print_line('Restored checkpoint %s' % built.checkpointer.restore_from)
  _wait_for_shared(sess, built)
  if built.post_init_ops:
    sess.run(built.post_init_ops)
  return int(sess.run(built.global_step))


def _wait_for_shared(
  sess, built: step_graph.BuiltGraph, timeout_s: float = 120.0
) -> None:
  """Waits until another process (the chief) initialised shared state."""
  if built.shared_ready is None:
    return
  deadline = time.monotonic() + timeout_s
  while len(sess.run(built.shared_ready)):
    if time.monotonic() > deadline:
      raise tf.errors.DeadlineExceededError(
        None, None, 'shared variables not initialised after %ds' % timeout_s
      )
    time.sleep(0.2)


@dataclasses.dataclass(frozen=True)
class StepFetches:
  """What every step fetches: the step op, the loss, the step table's values.

  names[i] names tensors[i]; a summarised step fetches the summary op last.
  """

  names: tuple
  tensors: list

  @classmethod
  def of(cls, built: step_graph.BuiltGraph, recorder) -> 'StepFetches':
    """The fetches of `built`'s steps (recorder: the step table's)."""
    named = {'step': built.step_op, 'loss': built.loss}
    named.update(recorder.fetches())
    if built.worker_loss is not None:
      named['worker_loss'] = built.worker_loss
    return cls(tuple(named), list(named.values()))

  def named(self, values) -> dict:
    """name -> value of one step's results (the summary under 'summary')."""
    got = dict(zip(self.names, values))
    if len(values) > len(self.names):
      got['summary'] = values[-1]
    return got


class StepLoop:
  """Warm-up and timed steps, with the periodic work between them.

  Between steps (never inside a timed one): checkpoints, summaries and
  evaluations. With --trace_file, --partitioned_graph_file_prefix or
  --tfprof_file, extra untimed steps after warm-up are observed
  (profiling.py).
  """

  def __init__(
    self,
    settings: LoopSettings,
    sess,
    built: step_graph.BuiltGraph,
    start_step: int,
  ):
    self.settings, self.sess, self.built = settings, sess, built
    self.params = settings.params
    self.step = start_step  # global step, as this process counts
    self.losses, self.step_times, self.evals = [], [], []
    # An automatic warm-up or length: the results line's `run_length`.
    self.run_length: dict | None = None
    # A cluster run: this process's own losses (`losses`: the cluster's).
    self.worker_losses = [] if built.worker_loss is not None else None
    self.recorder = step_report.StepRecorder(
      self.params, built.learning_rate, built.accuracy
    )
    self.writer = None
    if built.summary_op is not None and settings.is_chief:
      with built.graph.as_default():
        # The graph too: TensorBoard's Graphs tab.
        self.writer = summaries.file_writer(
          self.params.train_dir, graph=built.graph
        )
    self.throughput = summaries.ThroughputSummary(settings.process_batch_size)
    self.compliance = settings.compliance
    self.tb_profile = profiling.TensorBoardProfile(
      self.params.tensorboard_profile_dir if settings.is_chief else None,
      settings.print_line,
    )
    self.during = settings.during_training(global_step=lambda: self.step)
    if self.during is not None:
      self.evals = self.during.evals
    self.step_fetches = StepFetches.of(built, self.recorder)
    # Built once: a step is then one call with no fetch structure to parse,
    # the per-step Python work the timed path can spare (issue 27).
    self._run_step = sess.make_callable(self.step_fetches.tensors)
    self._micro = _MicroSteps(sess, built)
    self._run_step_summarised = None
    if self.writer is not None:
      self._run_step_summarised = sess.make_callable(
        self.step_fetches.tensors + [built.summary_op]
      )

  def time_to_accuracy(self) -> results.TimeToAccuracy | None:
    """--stop_at_top_1_accuracy's result (None without it)."""
    return self.during.time_to_accuracy() if self.during else None

  def run(self) -> None:
    """Warm-up, observed and timed steps; the periodic work between them.

    With an automatic warm-up or length (reporting/run_length.py), the
    loop decides when to stop as it goes; the observed steps of an
    automatic warm-up run after the timed ones (the warm-up is known only
    then).
    """
    p = self.params
    length = run_length.LengthSettings.from_params(p)
    # Its clock starts before a fixed warm-up: --max_run_seconds counts it.
    auto = run_length.AutoLength(length) if length.is_auto else None
    try:
      if self.compliance is not None:
        self.compliance.run_start(self.step)
      if self.during is not None:
        self.during.start()
      if length.warmup:
        self._warm_up(length.warmup)
      if length.warmup is not None:
        self._observe()
      self.settings.print_line(self.recorder.header())
      self.tb_profile.start()
      if auto is None:
        self._timed_steps(p.num_batches)
      else:
        self._auto_steps(auto)
      self.tb_profile.stop()
      if length.warmup is None:
        self._observe()
      if self.during is not None:
        self.during.finish()
      if self.compliance is not None:
        self.compliance.run_stop(self.reached_goal())
    finally:
      self.tb_profile.stop()
      if self.compliance is not None:
        self.compliance.close()
      if self.writer is not None:
        self._summary_write(self.writer.close)

  def _warm_up(self, steps: int) -> None:
    out = self.settings.print_line
    out('Running warm up')
    for _ in range(steps):
      self._one_step()
    out('Done warm up')
    self.throughput.reset()  # images_per_sec: timed steps, as the table

  def _observe(self) -> None:
    """The untimed observed steps (profiling.py), if any are asked for."""
    try:
      profiling.run_observed_steps(
        self.params,
        self.built.graph,
        self._observed_step,
        self.settings.print_line,
        writes_files=self.settings.is_chief,
      )
    except OSError as e:  # a trace file's failed write: one line
      raise outputs.write_failure('file', e.filename, e) from None

  def _timed_steps(self, num_batches: int) -> None:
    for i in range(num_batches):
      loss, seconds = self._one_step()
      self.step_times.append(seconds)
      self._row(i + 1, self.step_times, loss)
      if self.during is not None and self.during.after_step(i + 1):
        break

  def _auto_steps(self, auto: run_length.AutoLength) -> None:
    """Steps until `auto` says stop; keeps the timed ones and the record."""
    while not auto.done():
      loss, seconds = self._one_step()
      auto.add(seconds)
      self._row(len(auto.times), auto.times, loss)
    self.step_times = auto.timed_steps()
    self.run_length = auto.info()
    for line in run_length.console_lines(self.run_length):
      self.settings.print_line(line)

  def _row(self, step: int, step_times, loss) -> None:
    """The step table's row of `step` when one is due."""
    if step == 1 or step % self.params.display_every == 0:
      summary = timing.speed_summary(
        self.settings.process_batch_size,
        step_times,
        self.params.display_perf_ewma,
      )
      self.settings.print_line(self.recorder.row(step, summary, loss))

  def _one_step(self):
    """Runs one step and the periodic work due after it; (loss, seconds)."""
    p = self.params
    summarise = (
      self.writer is not None and (self.step + 1) % p.save_summaries_steps == 0
    )
    run = self._run_step_summarised if summarise else self._run_step
    start = time.perf_counter()
    self._micro.run_before_update()
    values = run()
    seconds = time.perf_counter() - start
    self.step += 1
    self.throughput.add(seconds)
    got = self.step_fetches.named(values)
    self._after_step(got, summarise)
    return got['loss'], seconds

  def _after_step(self, got: dict, summarise: bool) -> None:
    """The bookkeeping of a step just run (outside its timing)."""
    p, built = self.params, self.built
    if self.compliance is not None:
      self.compliance.step_done(self.step)
    self.losses.append(float(got['loss']))
    self.recorder.record(got)
    if self.worker_losses is not None:
      self.worker_losses.append(float(got['worker_loss']))
    if summarise:
      self._summary_write(self.writer.add_summary, got['summary'], self.step)
      self._summary_write(
        self.writer.add_summary, self.throughput.summary(), self.step
      )
    if built.checkpointer is not None and p.train_dir:
      path = built.checkpointer.step_done(self.sess)
      if path:
        self.settings.print_line('Saved checkpoint %s' % path)

  def reached_goal(self) -> bool:
    """Whether the run met its goal: its steps, or its accuracy target."""
    reached = self.time_to_accuracy()
    return reached is None or reached.seconds is not None

  def _summary_write(self, write, *args) -> None:
    """write(*args) of the summary writer; a failed write is one line."""
    try:
      write(*args)
    except checkpoints.WRITE_ERRORS + summaries.EVENT_WRITE_ERRORS as e:
      raise outputs.write_failure(
        'summaries in', self.params.train_dir, e
      ) from None

  def _observed_step(self, options, metadata) -> None:
    """An untimed step with tracing options (see profiling.py)."""
    # The loss too: with --forward_only the step op alone computes nothing.
    fetches = [self.built.step_op, self.built.loss]
    self._micro.run_before_update()
    self.sess.run(fetches, options=options, run_metadata=metadata)
    self.step += 1


class _MicroSteps:
  """The micro-steps of --gradient_accumulation_steps before each update.

  A step of the loop is one update: K-1 micro-steps, then the step op. A
  run resumed from a checkpoint taken between micro-steps runs only those
  left of its first update.
  """

  def __init__(self, sess, built: step_graph.BuiltGraph):
    self._run = None
    self._due = 0
    if built.micro_step_op is not None:
      self._run = sess.make_callable(built.micro_step_op)
      self._steps = built.accumulation_steps
      done = int(sess.run(built.micro_steps_done))
      self._due = self._steps - 1 - done

  def run_before_update(self) -> None:
    """Runs the micro-steps due before the next update."""
    if self._run is None:
      return
    for _ in range(self._due):
      self._run()
    self._due = self._steps - 1
