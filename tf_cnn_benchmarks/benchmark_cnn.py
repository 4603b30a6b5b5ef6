"""BenchmarkCNN: wires devices, inputs, model and variable manager; runs steps.

The driver is strategy-blind: everything that depends on --variable_update is
a method of the variable manager it gets from the registry. It resolves the
run's values once (the model spec, the input source, reporting's RunFacts)
and hands those, never itself, to the step graph, the step loop, the
evaluations and the reports.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import shutil
import sys
import tempfile
from typing import Callable, TextIO

import tensorflow as tf

import models
from tf_cnn_benchmarks.cluster import fingerprint
from tf_cnn_benchmarks.cluster import layout as layout_lib
from tf_cnn_benchmarks.cluster import run_context as run_context_lib
from tf_cnn_benchmarks.config import classic_api
from tf_cnn_benchmarks.config import datasets
from tf_cnn_benchmarks.config import limits
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.config import schedules
from tf_cnn_benchmarks.evaluation import eval_runs
from tf_cnn_benchmarks.evaluation import eval_schedule
from tf_cnn_benchmarks.evaluation import evaluation
from tf_cnn_benchmarks.evaluation import evaluator_task
from tf_cnn_benchmarks.inputs import data_dir_checks
from tf_cnn_benchmarks.inputs import input_failures
from tf_cnn_benchmarks.inputs import input_options
from tf_cnn_benchmarks.observability import mlperf_log
from tf_cnn_benchmarks.observability import placement
from tf_cnn_benchmarks.observability import summaries as observability
from tf_cnn_benchmarks.platform import devices
from tf_cnn_benchmarks.platform import gpu_runtime
from tf_cnn_benchmarks.platform import peak as peak_lib
from tf_cnn_benchmarks.platform import quiet
from tf_cnn_benchmarks.platform import runtime_knobs
from tf_cnn_benchmarks.reporting import outputs
from tf_cnn_benchmarks.reporting import results
from tf_cnn_benchmarks.reporting import run_facts
from tf_cnn_benchmarks.reporting import run_header
from tf_cnn_benchmarks.reporting import run_results
from tf_cnn_benchmarks.scaling.auto import auto
from tf_cnn_benchmarks.training import freezing
from tf_cnn_benchmarks.training import graph as graph_lib
from tf_cnn_benchmarks.training import step_graph
from tf_cnn_benchmarks.training import step_loop
from tf_cnn_benchmarks.training import tower_inputs
from tf_cnn_benchmarks.training import xla
from variable_mgr import allreduce
from variable_mgr import loss_scale as loss_scale_lib

tf1 = tf.compat.v1

# The classic Python API (see classic_api.py).
make_params = classic_api.make_params
make_params_from_flags = classic_api.make_params_from_flags
setup = classic_api.setup

# The step loop's old name here (tests patch its run method).
_StepLoop = step_loop.StepLoop
# The built graph's old home.
BuiltGraph = step_graph.BuiltGraph


def console(out: TextIO) -> Callable[[str], None]:
  """print_line(text=''): one console line to `out`, flushed (a cluster's
  launcher reads it as it comes)."""

  def print_line(text: str = '') -> None:
    print(text, file=out, flush=True)

  return print_line


class BenchmarkCNN:
  """One benchmark run, configured by a RunPlan (or resolved Params)."""

  def __init__(
    self,
    plan,
    out: TextIO = sys.stdout,
    *,
    run_context: run_context_lib.RunContext | None = None,
    reports_results: bool | None = None,
  ):
    """Wires the run's parts; builds no graph and starts no server yet.

    Args:
      plan: a params.RunPlan, or resolved Params (made into a plan).
      out: where the console table goes.
      run_context: where the run happens (default: in-process, or this
        cluster task's client); tests may inject one.
      reports_results: with the default context, whether this process writes
        the results line (None: the chief alone does).
    """
    plan = params_lib.as_plan(plan)
    params = plan.params
    self.plan = plan
    self.params = params
    self.out = out
    # A plain function (not a method): the parts it is handed never hold
    # the driver.
    self.print_line = console(out)
    # Before any session or server creates the devices (classic setup()).
    gpu_runtime.apply_environment(gpu_runtime.environment(params))
    self.model = models.create_model(params.model, params.data_name)
    self.dataset = datasets.get(params.data_name)
    self.data_options = self._checked_data_options()
    self.cluster = plan.cluster
    traits = plan.manager_cls.traits
    self.layout = layout_lib.layout(
      self.cluster,
      traits,
      params.device,
      params.num_gpus,
      params.cross_replica_sync,
      pack_transfers=params.pack_ps_transfers,
    )
    self.devices = self.layout.tower_devices
    self.manager = plan.manager_cls.from_settings(
      plan.manager_settings, self.devices, cluster=self.layout.manager_cluster
    )
    self.compute_dtype = params.compute_dtype
    self.loss_scale_config = loss_scale_lib.LossScaleConfig.from_params(params)
    self.num_workers = self.cluster.num_workers if self.cluster else 1
    towers = self.layout.num_step_towers  # a step: every micro-step's
    self.global_batch_size = params.batch_size * self.micro_steps * towers
    self.run_context = run_context or self._default_run_context(
      traits, reports_results
    )
    self._scratch: str | None = None  # checkpoints for evaluations
    self.compliance: mlperf_log.ComplianceLog | None = None
    # The final checkpoint's failed write, raised once the result is made.
    self._failed_final_save: outputs.OutputWriteError | None = None
    self.eval_summaries = self._eval_summaries()
    self._wire_values()

  def _checked_data_options(self) -> input_options.InputOptions | None:
    """--data_dir's input settings (None: synthetic), its splits checked."""
    params = self.params
    if not params.data_dir:
      return None
    options = input_options.InputOptions.from_params(params)
    for subset in self.subsets():  # bad data: DataError before any graph
      data_dir_checks.check_data_dir(options, subset)
    return options

  def _default_run_context(self, traits, reports_results):
    """In-process, or this cluster task's client."""
    params = self.params
    return run_context_lib.make(
      self.cluster,
      traits,
      devices.logical_cpu_count(params.device, params.num_gpus),
      cross_replica_sync=params.cross_replica_sync,
      reports_results=reports_results,
      run_flags=fingerprint.run_flags(params),
      cluster_threads=params.cluster_threads,
      explicit_threads=(
        params.num_intra_threads or 0,
        params.num_inter_threads,
      ),
      tasks_colocated=params.tasks_colocated,
      runtime_fields=gpu_runtime.config_fields(params),
    )

  def _eval_summaries(self) -> evaluation.EvalSummaries:
    """--eval_dir: events of the evaluations this process runs."""
    params = self.params
    evaluates = (
      self.plan.mode is params_lib.Mode.EVAL or schedules.eval_enabled(params)
    )
    return evaluation.EvalSummaries(
      params.eval_dir if evaluates and self.run_context.is_chief else None
    )

  def _wire_values(self) -> None:
    """The values the graph, the loop, evaluations and reports receive."""
    p = self.params
    self.model_spec = graph_lib.ModelSpec(
      self.model,
      self.dataset.num_classes,
      p.data_format,
      self.compute_dtype,
      p.tf_random_seed,
      p.fp16_vars,
    )
    self.inputs = tower_inputs.InputSource(
      self.data_options,
      self.model.image_size,
      self.dataset.depth,
      self.dataset.num_classes,
      p.data_format,
      p.tf_random_seed,
    )
    self.facts = run_facts.RunFacts(
      params=p,
      mode=self.plan.mode,
      device_was_auto=self.plan.device_was_auto,
      devices=self.devices,
      global_batch_size=self.global_batch_size,
      num_workers=self.num_workers,
      precision=self.compute_dtype.name,
      loss_scale=(
        self.loss_scale_config.describe() if self.loss_scale_config else 'none'
      ),
      manager=self.manager,
      evaluates_during_training=self.training and schedules.eval_enabled(p),
      cluster=self.cluster,
      cluster_describe=self.run_context.describe,
      model=self.model,
      num_classes=self.dataset.num_classes,
      eval_batch_size=self.eval_batch_size,
      peak=functools.cache(
        functools.partial(
          run_results.resolve_peak,
          p,
          self.compute_dtype.name,
          self.cluster,
          is_chief=self.run_context.is_chief,
        )
      ),
    )

  def subsets(self) -> tuple:
    """The data splits this run reads."""
    p = self.params
    if self.plan.mode is params_lib.Mode.EVAL:
      return ('validation',)
    if schedules.eval_enabled(p):
      return ('train', 'validation')
    return ('train',)

  @property
  def training(self) -> bool:
    """Whether the graph trains (else: forward passes only)."""
    return self.plan.mode is params_lib.Mode.TRAIN

  @property
  def micro_steps(self) -> int:
    """Micro-steps per step (--gradient_accumulation_steps; 1 unless the
    graph trains: --eval ignores the flag)."""
    return self.params.gradient_accumulation_steps if self.training else 1

  @property
  def eval_batch_size(self) -> int:
    """Evaluation batch size per device (--eval_batch_size, else batch)."""
    return self.params.eval_batch_size or self.params.batch_size

  # ---- console ------------------------------------------------------------

  def print_header(self) -> None:
    """The classic header block (run_header.py)."""
    run_header.print_header(self.facts, self._session_config(), self.print_line)

  def slow_16bit_note(self) -> str | None:
    """The header's warning for 16-bit compute without native CPU kernels."""
    return run_header.slow_16bit_note(
      self.params.device, self.compute_dtype.name
    )

  def print_info(self) -> None:
    """The classic API's name for the header block."""
    self.print_header()

  # ---- graph and session --------------------------------------------------

  def build(self) -> step_graph.BuiltGraph:
    """Builds towers, update, init and checkpoint ops in a fresh graph."""
    return step_graph.build(self._step_graph_plan(), self.manager)

  def _step_graph_plan(self) -> step_graph.StepGraphPlan:
    p = self.params
    in_cluster = self.cluster is not None
    return step_graph.StepGraphPlan(
      params=p,
      spec=self.model_spec,
      inputs=self.inputs,
      layout=self.layout,
      training=self.training,
      loss_scale_config=self.loss_scale_config,
      images_per_global_step=step_graph.images_per_global_step(
        p, self.plan.manager_cls.traits, self.layout, in_cluster
      ),
      num_train_examples=self.dataset.num_train_examples,
      in_cluster=in_cluster,
      checkpoint_dir=p.train_dir or self._scratch_dir(),
      writes_checkpoints=self.run_context.is_chief and self.training,
    )

  def _scratch_dir(self) -> str | None:
    """Checkpoints for evaluations during training without --train_dir."""
    if not schedules.eval_enabled(self.params):
      return None
    if self._scratch is None:
      self._scratch = tempfile.mkdtemp(prefix='tf_cnn_eval_')
    return self._scratch

  def _session_config(self):
    p = self.params
    config = devices.session_config(
      p.device,
      p.num_gpus,
      num_intra_threads=p.num_intra_threads,
      num_inter_threads=p.num_inter_threads,
      runtime_fields=gpu_runtime.config_fields(p),
    )
    config = runtime_knobs.configure_session(config, p)
    return xla.configure_session(
      config, auto_jit=p.xla, compile_towers=p.xla_compile
    )

  def runtime_settings(self) -> dict:
    """The session config's non-default fields and the environment set."""
    return gpu_runtime.summary(
      self._session_config(), gpu_runtime.environment(self.params)
    )

  # ---- run ----------------------------------------------------------------

  @property
  def reports_results(self) -> bool:
    """Whether this process writes the run's results line."""
    return self.run_context.reports_results

  def run(self) -> classic_api.ClassicStats:
    """Builds the graph, runs warm-up and timed steps, returns the result.

    The result is the classic stats dict; its attributes are those of the
    results.BenchmarkResult. With --eval (the classic API's eval=True): the
    evaluation of the latest checkpoint (the last one with
    --eval_interval_secs).
    """
    if self.plan.mode is params_lib.Mode.EVAL:
      return classic_api.ClassicStats(self.last_evaluation())
    self.run_context.start()
    self.print_header()
    self.print_line(
      'Generating training model'
      if self.training
      else 'Generating inference model'
    )
    built = None
    self.compliance = self._compliance_log()
    try:
      built = self._built_for_run()
      self.facts = dataclasses.replace(
        self.facts, flops_per_image=built.flops_per_image
      )
      # Logical CPU devices of a cluster task come from its server's config.
      config = self.run_context.configure(
        self._session_config(),
        reaches_workers=built.checkpointer is not None
        and built.checkpointer.meets_workers,
      )
      with (
        tf1.Session(
          self.run_context.target, graph=built.graph, config=config
        ) as sess,
        self._out_of_memory_named(),
      ):
        steps = self._run_steps(sess, built)
    finally:
      if built is not None and built.checkpointer is not None:
        built.checkpointer.release()  # --train_dir's lock
      self.eval_summaries.close()
      if self._scratch:
        shutil.rmtree(self._scratch, ignore_errors=True)
    self.run_context.finish()
    stats = classic_api.ClassicStats(
      run_results.train_result(self.facts, self.print_line, *steps)
    )
    failed_save, self._failed_final_save = self._failed_final_save, None
    if failed_save is not None:
      failed_save.result = stats
      raise failed_save
    return stats

  @contextlib.contextmanager
  def _out_of_memory_named(self):
    """TensorFlow's out-of-memory error -> limits.BatchTooLargeError.

    The batch passed the memory lower bound (limits.py) but did not fit:
    one line naming --batch_size and the memory asked for, no traceback.
    """
    try:
      yield
    except tf.errors.ResourceExhaustedError as e:
      raise limits.BatchTooLargeError(
        limits.out_of_memory_message(
          self.params, self.params.data_name, self.model, e.message
        )
      ) from None

  def _built_for_run(self) -> step_graph.BuiltGraph:
    """The run's graph (frozen, written, reported as asked), finalized."""
    p = self.params
    built = self.build()
    if p.forward_only and p.freeze_when_forward_only:
      built = freezing.freeze(built, self._session_config())
    try:
      if p.graph_file:
        observability.write_graph(p.graph_file, built.graph)
      if p.placement_file:
        placement.report_run(
          built, self._session_config(), self.facts, self.print_line
        )
    except OSError as e:  # a full disk: one line naming the file
      raise outputs.write_failure('file', e.filename, e) from None
    built.graph.finalize()
    return built

  def _run_steps(self, sess, built: step_graph.BuiltGraph) -> tuple:
    """Initialises, runs the steps, saves: train_result's figures."""
    start_step = step_loop.initialize(sess, built, self.print_line)
    loop = _StepLoop(self._loop_settings(sess, built), sess, built, start_step)
    loop.run()
    final_state = sess.run(built.report)
    end_step = int(sess.run(built.global_step))
    failed_save = None
    if built.checkpointer is not None and self.params.train_dir:
      try:
        path = built.checkpointer.save(sess, met=True)  # every task is here
      except outputs.OutputWriteError as e:
        # Raised by run() once the result is made: the results line is
        # still written (run_benchmark), then the run fails.
        failed_save, path = e, None
      if path:
        self.print_line('Saved checkpoint %s' % path)
      if failed_save is None:  # an evaluator following train_dir ends
        evaluator_task.mark_training_done(built.checkpointer, self.print_line)
    self._failed_final_save = failed_save
    training = results.TrainInfo(
      start_step=start_step,
      end_step=end_step,
      evals=tuple(e.info() for e in loop.evals),
      time_to_accuracy=loop.time_to_accuracy(),
      run_length=loop.run_length,
    )
    return (
      loop.losses,
      loop.step_times,
      final_state,
      training,
      loop.worker_losses,
      loop.recorder.report(),
    )

  def _loop_settings(self, sess, built) -> step_loop.LoopSettings:
    """The step loop's values; its evaluations checkpoint and evaluate."""
    evaluate = None
    if self.facts.evaluates_during_training:
      evaluate = functools.partial(
        eval_runs.evaluate_now, sess, built, self.eval_setup()
      )
    return step_loop.LoopSettings(
      params=self.params,
      global_batch_size=self.global_batch_size,
      process_batch_size=(
        self.params.batch_size * self.micro_steps * len(self.devices)
      ),
      print_line=self.print_line,
      is_chief=self.run_context.is_chief,
      during_training=functools.partial(
        eval_runs.during_training,
        self.facts,
        self.dataset.num_train_examples,
        evaluate=mlperf_log.logged_evaluation(self.compliance, evaluate),
        print_line=self.print_line,
        run_context=self.run_context,
      ),
      compliance=self.compliance,
    )

  def _compliance_log(self) -> mlperf_log.ComplianceLog | None:
    """--ml_perf_compliance_logging's log, begun (init_start), or None."""
    return mlperf_log.open_log(
      self.params,
      self.model,
      global_batch_size=self.global_batch_size,
      num_train_examples=self.dataset.num_train_examples,
      num_eval_examples=self.dataset.num_eval_examples,
      print_line=self.print_line,
      is_chief=self.run_context.is_chief,
    )

  def build_only(self) -> placement.PlacementReport:
    """--build_only: builds the graph, reports its placement, runs nothing.

    No server, session or device is created, so a GPU or cluster graph
    builds on any machine. Raises placement.MissingKernelError when a GPU
    op has no GPU kernel in this TensorFlow build.
    """
    self.print_header()
    with allreduce.assume_gpus_visible():
      built = self.build()
    try:
      if self.params.graph_file:
        observability.write_graph(self.params.graph_file, built.graph)
      return placement.report_run(
        built,
        self._session_config(),
        self.facts,
        self.print_line,
        build_only=True,
      )
    except OSError as e:  # a full disk: one line naming the file
      raise outputs.write_failure('file', e.filename, e) from None

  # ---- evaluation (eval_runs.py) ------------------------------------------

  def eval_setup(self, num_batches: int | None = None) -> evaluation.EvalSetup:
    """How to evaluate a checkpoint of this run on this process's devices."""
    p = self.params
    local = devices.tower_devices(p.device, p.num_gpus)
    if num_batches is None:
      num_batches = eval_schedule.num_eval_batches(
        p, self.eval_batch_size * len(local), self.dataset.num_eval_examples
      )
    return evaluation.EvalSetup(
      params=p,
      spec=self.model_spec,
      devices=local,
      inputs=self.inputs,
      batch_size=self.eval_batch_size,
      num_batches=num_batches,
      session_config=self._session_config(),
      print_line=self.print_line,
      display_every=p.display_every,
      summaries=self.eval_summaries,
    )

  def evaluate_checkpoints(self) -> list[results.BenchmarkResult]:
    """--eval: evaluates the latest (or each new) checkpoint of train_dir."""
    self.print_header()
    return eval_runs.evaluate_checkpoints(self.eval_setup(), self.facts)

  def last_evaluation(self) -> results.BenchmarkResult:
    """--eval: evaluate_checkpoints(); the result of the last evaluation.

    An evaluator task (--job_name=evaluator) follows the chief's
    checkpoints instead, to the chief's mark (evaluator_task.py).
    """
    if self.params.job_name == evaluator_task.EVALUATOR_JOB:
      self.print_header()
      evaluated = evaluator_task.follow(self.eval_setup(), self.facts)
      return eval_runs.last_evaluation(evaluated, self.params)
    return eval_runs.last_evaluation(self.evaluate_checkpoints(), self.params)

  def during_training(
    self, evaluate, global_step
  ) -> eval_schedule.DuringTraining | None:
    """The --eval_during_training_* evaluations of a training run, or None.

    evaluate: () -> EvalResult of the current variables; global_step: () ->
    the global step now. Only the chief evaluates (as it checkpoints).
    """
    return eval_runs.during_training(
      self.facts,
      self.dataset.num_train_examples,
      evaluate=evaluate,
      global_step=global_step,
      print_line=self.print_line,
      run_context=self.run_context,
    )

  def evaluate_now(
    self, sess, built: step_graph.BuiltGraph
  ) -> evaluation.EvalResult:
    """Evaluation during training: checkpoint the current values, evaluate.

    Only on the task whose checkpointer writes (the chief).
    """
    return eval_runs.evaluate_now(sess, built, self.eval_setup())

  @property
  def peak(self) -> peak_lib.Peak | None:
    """The per-device peak for MFU (--peak_tflops_per_device), or None."""
    return self.facts.peak()


def run_benchmark(
  plan,
  out: TextIO = sys.stdout,
  *,
  reports_results: bool | None = None,
  prediction: dict | None = None,
) -> results.BenchmarkResult:
  """Runs one benchmark; appends its JSON line(s) to --result_file if set.

  plan: a params.RunPlan, or resolved Params. With --eval, returns the
  result of the last evaluation (one line per evaluated checkpoint is
  written, each when it is done). With --build_only, returns the
  placement.PlacementReport of the built graph (nothing runs).
  prediction: --variable_update=auto's choice (scaling/auto/auto.py
  Choice.record()), recorded as the results line's `prediction`.
  """
  bench = BenchmarkCNN(plan, out=out, reports_results=reports_results)
  p = bench.params
  outputs.check(p)  # before the graph is built, not after the run
  if bench.plan.mode is params_lib.Mode.EVAL:
    return _naming_bad_data(bench, bench.last_evaluation)
  if p.build_only:  # the placement report stands for the result
    return bench.build_only()
  failed_write = None
  try:
    result = _naming_bad_data(bench, bench.run)
  except outputs.OutputWriteError as e:
    if e.result is None:
      raise
    # The final checkpoint failed after the timed steps: their results
    # line is written all the same, then the failure is reported.
    result, failed_write = e.result, e
  if bench.reports_results:
    record = result.to_record()
    if prediction is not None:  # beside the measured figure
      record['prediction'] = prediction
    if p.result_file:
      outputs.write_results(p.result_file, [record])
    outputs.write_benchmark_log(p, [record])
    if prediction is not None:  # how the prediction that chose it held
      print(auto.measured_line(prediction, result.images_per_sec), file=out)
  if failed_write is not None:
    raise failed_write
  return result


def _naming_bad_data(bench: BenchmarkCNN, fn):
  """fn(); a failure caused by a corrupt record or image becomes DataError.

  libjpeg's own lines about a corrupt image (printed to fd 2 by the
  decoder, in the run or in the search for the bad record) are dropped: the
  DataError's line says it.
  """
  decodes = input_failures.decodes_jpeg(bench.data_options)
  # A cluster task: TensorFlow's collective-abort lines when a peer dies.
  with quiet.noise_lines_dropped(decodes or bench.cluster is not None):
    try:
      return fn()
    except tf.errors.OpError as e:
      if bench.data_options is None:
        raise
      for subset in bench.subsets():
        message = input_failures.describe_input_failure(
          bench.data_options, subset, e
        )
        if message:
          raise input_options.DataError(message) from None
      raise
