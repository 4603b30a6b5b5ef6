"""BenchmarkCNN: wires devices, inputs, model and variable manager; runs steps.

The driver is strategy-blind: everything that depends on --variable_update is
a method of the variable manager it gets from the registry.
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
import sys
import tempfile
from typing import TextIO

import tensorflow as tf

import models
from tf_cnn_benchmarks.cluster import fingerprint
from tf_cnn_benchmarks.cluster import layout as layout_lib
from tf_cnn_benchmarks.cluster import run_context as run_context_lib
from tf_cnn_benchmarks.config import classic_api
from tf_cnn_benchmarks.config import datasets
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.evaluation import eval_runs
from tf_cnn_benchmarks.evaluation import eval_schedule
from tf_cnn_benchmarks.evaluation import evaluation
from tf_cnn_benchmarks.inputs import data_dir_checks
from tf_cnn_benchmarks.inputs import data_sources
from tf_cnn_benchmarks.inputs import input_failures
from tf_cnn_benchmarks.inputs import input_options
from tf_cnn_benchmarks.inputs import inputs
from tf_cnn_benchmarks.observability import placement
from tf_cnn_benchmarks.observability import summaries as observability
from tf_cnn_benchmarks.platform import cpu_features
from tf_cnn_benchmarks.platform import devices
from tf_cnn_benchmarks.platform import gpu_runtime
from tf_cnn_benchmarks.platform import peak as peak_lib
from tf_cnn_benchmarks.platform import quiet
from tf_cnn_benchmarks.platform import runtime_knobs
from tf_cnn_benchmarks.reporting import outputs
from tf_cnn_benchmarks.reporting import results
from tf_cnn_benchmarks.reporting import run_header
from tf_cnn_benchmarks.reporting import run_results
from tf_cnn_benchmarks.reporting import step_report
from tf_cnn_benchmarks.training import checkpoints
from tf_cnn_benchmarks.training import freezing
from tf_cnn_benchmarks.training import learning_rates
from tf_cnn_benchmarks.training import optimizers
from tf_cnn_benchmarks.training import step_loop
from tf_cnn_benchmarks.training import towers
from tf_cnn_benchmarks.training import xla
from variable_mgr import allreduce
from variable_mgr import base
from variable_mgr import loss_scale as loss_scale_lib
from variable_mgr import traits as traits_lib

tf1 = tf.compat.v1

# The classic Python API (see classic_api.py).
make_params = classic_api.make_params
make_params_from_flags = classic_api.make_params_from_flags
setup = classic_api.setup

# The step loop's old name here (tests patch its run method).
_StepLoop = step_loop.StepLoop


@dataclasses.dataclass(frozen=True)
class BuiltGraph:
  """The ops a run needs, all in `graph`."""

  graph: tf.Graph
  step_op: tf.Operation  # train op, or a no-op when forward only
  loss: tf.Tensor  # mean over the towers of --loss_type_to_report's loss
  init_ops: tuple
  shared_ready: (
    tf.Tensor | None
  )  # names of shared variables not yet initialised
  post_init_ops: tuple
  global_step: tf.Variable
  report: dict  # name -> tensor, fetched once at the end
  checkpointer: checkpoints.Checkpointer | None
  summary_op: tf.Tensor | None
  # A cluster run: this process's own loss (`loss` is the cluster's where
  # the manager averages it); None in a local run.
  worker_loss: tf.Tensor | None = None
  # Fetched with every step for the step table and the results line.
  learning_rate: tf.Tensor | None = None
  accuracy: dict | None = None  # step_report.accuracy_tensors
  # For the placement report: every tower's (gradient, variable) pairs and
  # (images, labels).
  tower_grads: tuple = ()
  tower_inputs: tuple = ()
  input_init: tuple = ()  # the input ops among init_ops (freezing.py)


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
    # Before any session or server creates the devices (classic setup()).
    gpu_runtime.apply_environment(gpu_runtime.environment(params))
    self.model = models.create_model(params.model, params.data_name)
    self.dataset = datasets.get(params.data_name)
    self.data_options = (
      input_options.InputOptions.from_params(params)
      if params.data_dir
      else None
    )
    if self.data_options is not None:  # bad data: DataError before any graph
      for subset in self.subsets():
        data_dir_checks.check_data_dir(self.data_options, subset)
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
    self.manager = plan.manager_cls.from_params(
      params, self.devices, cluster=self.layout.manager_cluster
    )
    self.compute_dtype = params.compute_dtype
    self.loss_scale_config = loss_scale_lib.LossScaleConfig.from_params(params)
    self.num_workers = self.cluster.num_workers if self.cluster else 1
    self.global_batch_size = params.batch_size * self.layout.num_step_towers
    self.run_context = run_context or run_context_lib.make(
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
      runtime_fields=gpu_runtime.config_fields(params),
    )
    # Checkpoints for evaluations during training without --train_dir.
    self._scratch: str | None = None
    # --eval_dir: events of the evaluations this process runs.
    evaluates = plan.mode is params_lib.Mode.EVAL or eval_schedule.enabled(
      params
    )
    self.eval_summaries = evaluation.EvalSummaries(
      params.eval_dir if evaluates and self.run_context.is_chief else None
    )

  def subsets(self) -> tuple:
    """The data splits this run reads."""
    p = self.params
    if self.plan.mode is params_lib.Mode.EVAL:
      return ('validation',)
    if eval_schedule.enabled(p):
      return ('train', 'validation')
    return ('train',)

  # ---- console ------------------------------------------------------------

  def print_line(self, text: str = '') -> None:
    """Prints one console line (flushed: a cluster's launcher reads it)."""
    print(text, file=self.out, flush=True)

  def print_header(self) -> None:
    """The classic header block (its rows: run_header.py)."""
    rows = run_header.header_rows(self, self._session_config())
    note = self.slow_16bit_note()
    if note:
      rows.append(('Note', note))
      print('warning: %s' % note, file=sys.stderr, flush=True)
    if self.run_context.describe:
      rows.append(('Cluster', self.run_context.describe))
    for key, value in rows:
      self.print_line('%-12s %s' % (key + ':' if key else '', value))
    self.print_line('=' * 10)

  def slow_16bit_note(self) -> str | None:
    """The header's warning for 16-bit compute without native CPU kernels."""
    if self.params.device != 'cpu':
      return None
    return cpu_features.slow_16bit_note(
      self.compute_dtype.name, cpu_features.read_cpuinfo()
    )

  def print_info(self) -> None:
    """The classic API's name for the header block."""
    self.print_header()

  # ---- inputs -------------------------------------------------------------

  def _tower_inputs(
    self,
    devices_,
    *,
    subset: str,
    train: bool,
    first_stream: int,
    num_streams: int,
    batch_size: int | None = None,
    host_device: str | None = None,
  ) -> tuple:
    """([(images, labels)] per device, [ops to run once after init]).

    Synthetic data, or streams read from --data_dir (their iterators start
    with the returned ops). batch_size: per device (None: --batch_size).
    host_device: where the input pipeline runs (None: the manager's CPU).
    """
    p = self.params
    batch_size = batch_size or p.batch_size
    if self.data_options is None:
      batches = []
      for index, device in enumerate(devices_):
        # Never XLA-compiled: XLA would draw other random examples.
        with tf.device(device), xla.not_compiled():
          # Global tower index: worker w's tower t holds the examples a
          # local run's tower w*T+t would hold.
          batches.append(
            inputs.tower_synthetic_batch(
              first_stream + index,
              batch_size,
              image_size=self.model.image_size,
              depth=self.dataset.depth,
              num_classes=self.dataset.num_classes,
              data_format=p.data_format,
              seed=p.tf_random_seed,
            )
          )
      return batches, []
    streams = data_sources.tower_batches(
      self.data_options,
      subset=subset,
      train=train,
      batch_size=batch_size,
      image_size=self.model.image_size,
      first_stream=first_stream,
      num_streams=num_streams,
      num_local_towers=len(devices_),
      host_device=host_device or self.manager.cpu_device,
      tower_devices=devices_,
    )
    return list(streams.batches), [streams.initializer]

  # ---- graph --------------------------------------------------------------

  def build(self) -> BuiltGraph:
    """Builds towers, update, init and checkpoint ops in a fresh graph."""
    graph = tf.Graph()
    with graph.as_default():
      with tf.device(self.manager.global_step_device):
        global_step = tf1.train.get_or_create_global_step()
      loss_scale = None
      if self.loss_scale_config and self.training:
        loss_scale = loss_scale_lib.LossScale(
          self.loss_scale_config, self.manager.global_step_device
        )
      batches, input_init = self._tower_inputs(
        self.devices,
        subset='train',
        train=self.training,
        first_stream=self.layout.first_tower_index,
        num_streams=self.layout.num_step_towers,
      )
      self.manager.prepare_towers(
        lambda: self._forward_pass_for_variables(*batches[0])
      )
      built_towers = [
        self._build_tower(i, images, labels, loss_scale)
        for i, (images, labels) in enumerate(batches)
      ]
      with tf.device(self.manager.cpu_device):
        loss = tf.add_n(
          [
            step_report.reported_loss(t, self.params.loss_type_to_report)
            for t in built_towers
          ]
        ) / len(built_towers)
      step_op, learning_rate = self._build_step(
        built_towers, global_step, loss_scale, loss
      )
      # In a cluster: the loss of every worker's towers where the manager
      # averages it; this process's own stays under worker_losses.
      worker_loss = loss if self.cluster else None
      if self.manager.cluster_loss is not None:
        loss = self.manager.cluster_loss
      report = loss_scale.report() if loss_scale else {}
      accuracy = step_report.accuracy_tensors(
        built_towers, self.manager.cpu_device
      )
      scalars = dict(accuracy or {})  # classic: summarised at verbosity 1
      if report:
        scalars['loss_scale'] = report['loss_scale']
      summary_op = observability.build_summaries(
        self.params.summary_verbosity,
        loss=loss,
        loss_name=self.params.loss_type_to_report,
        learning_rate=learning_rate,
        extra_scalars=scalars,
        grads_and_vars=built_towers[0].grads_and_vars,
        device=self.manager.cpu_device,
        gradient_norm=self.manager.applied_gradient_norm,
      )
      checkpointer = self._checkpointer()
      init_ops, shared_ready, post_init = self._build_init(
        checkpointer, input_init
      )
    return BuiltGraph(
      graph,
      step_op,
      loss,
      init_ops,
      shared_ready,
      post_init,
      global_step,
      report,
      checkpointer,
      summary_op,
      worker_loss,
      learning_rate,
      accuracy,
      tower_grads=tuple(tuple(t.grads_and_vars) for t in built_towers),
      tower_inputs=tuple(batches),
      input_init=tuple(input_init),
    )

  @property
  def training(self) -> bool:
    """Whether the graph trains (else: forward passes only)."""
    return self.plan.mode is params_lib.Mode.TRAIN

  def _images_per_global_step(self) -> int:
    """Images one global step stands for: the schedule's epoch unit.

    Every worker's batch, except where each worker moves the shared step
    alone (asynchronous ps training: one worker's batch).
    """
    traits = self.plan.manager_cls.traits
    alone = self.cluster is not None and not (
      traits.one_graph
      or traits_lib.workers_in_lockstep(traits, self.params.cross_replica_sync)
    )
    return learning_rates.images_per_global_step(
      self.params.batch_size,
      len(self.devices),
      self.layout.num_graphs,
      each_worker_moves_step=alone,
    )

  def _build_step(self, built_towers, global_step, loss_scale, loss) -> tuple:
    """(the op of one step, the learning rate or None when not training)."""
    stat_updates = self.manager.stat_update_ops(
      [t.update_ops for t in built_towers]
    )
    if not self.training:
      return tf.group(*stat_updates, name='forward_only'), None
    return self._build_update(
      built_towers, global_step, stat_updates, loss_scale, loss
    )

  def _build_init(self, checkpointer, input_init) -> tuple:
    """(init ops, report of shared variables not yet ready, post-init ops)."""
    restored = set(checkpointer.restored_variables if checkpointer else ())
    init_ops = (
      tf1.variables_initializer(
        [v for v in self.manager.initialized_variables() if v not in restored]
      ),
      tf1.local_variables_initializer(),
      *input_init,
    )
    shared = self.manager.shared_variables()
    # identity: a process whose run stops early must not warn that the
    # (should-use wrapped) report was never used.
    shared_ready = (
      tf.identity(tf1.report_uninitialized_variables(shared))
      if shared
      else None
    )
    return init_ops, shared_ready, tuple(self.manager.post_init_ops())

  def _checkpointer(self) -> checkpoints.Checkpointer | None:
    """Saver ops for --train_dir (or a scratch dir for evals in training)."""
    p = self.params
    train_dir = p.train_dir or self._scratch_dir()
    # Classic: --forward_only with --train_dir infers with the checkpoint.
    if train_dir is None or not (self.training or p.train_dir):
      return None
    saved = self.manager.savable_variables()
    latest = checkpoints.latest_checkpoint(p.train_dir)
    mine = set(self.manager.initialized_variables())
    restore = {}
    if latest:
      model = self.manager.tower_trainable_variables(0)
      # Only the process that restores the weights can miss them.
      required = (
        checkpoints.model_names(model)
        if all(v in mine for v in model)
        else frozenset()
      )
      restore = checkpoints.restorable(
        latest, {k: v for k, v in saved.items() if v in mine}, required
      )
    return checkpoints.Checkpointer(
      train_dir,
      saved,
      tf1.train.get_global_step(),
      restore_from=latest,
      restore_variables=restore,
      max_to_keep=p.max_ckpts_to_keep,
      policy=checkpoints.SavePolicy(p.save_model_steps, p.save_model_secs),
      writes=self.run_context.is_chief and self.training,
    )

  def _scratch_dir(self) -> str | None:
    if not eval_schedule.enabled(self.params):
      return None
    if self._scratch is None:
      self._scratch = tempfile.mkdtemp(prefix='tf_cnn_eval_')
    return self._scratch

  def _forward_pass_for_variables(self, images, labels) -> None:
    """Tower 0's forward pass on stand-in inputs (see prepare_towers).

    Only its variables matter: nothing fetches its ops, so they never run.
    """
    del labels  # the loss makes no variables
    p = self.params
    towers.forward_pass(
      self.model,
      tf1.placeholder(images.dtype, images.shape, name='stand_in_images'),
      num_classes=self.dataset.num_classes,
      data_format=p.data_format,
      compute_dtype=self.compute_dtype,
      seed=p.tf_random_seed,
      is_training=self.training,
      float16_vars=p.fp16_vars,
      tower_index=self.layout.first_tower_index,
    )

  def _build_tower(
    self,
    index: int,
    images,
    labels,
    loss_scale: loss_scale_lib.LossScale | None,
  ) -> towers.Tower:
    p = self.params
    # --xla_compile: the forward and backward pass as one XLA cluster.
    with self.manager.tower_scope(index), xla.tower_scope(p.xla_compile):
      return towers.build_tower(
        self.model,
        images,
        labels,
        num_classes=self.dataset.num_classes,
        data_format=p.data_format,
        compute_dtype=self.compute_dtype,
        seed=p.tf_random_seed,
        weight_decay=p.weight_decay,
        trainable_variables=lambda: self.manager.tower_trainable_variables(
          index
        ),
        as_read=lambda variables: self.manager.tower_weights(index, variables),
        forward_only=not self.training,
        float16_vars=p.fp16_vars,
        scale_loss=loss_scale.scale_loss if loss_scale else None,
        tower_index=self.layout.first_tower_index + index,
        single_l2_loss_op=p.single_l2_loss_op,
        accuracy=step_report.wants_accuracy(p),
      )

  def _build_update(
    self, built_towers, global_step, stat_updates, loss_scale, loss
  ):
    p = self.params
    # Classic --compute_lr_on_cpu: on this process's CPU, not the step's.
    lr_device = (
      self.manager.cpu_device
      if p.compute_lr_on_cpu
      else self.manager.global_step_device
    )
    with tf.device(lr_device):
      lr = optimizers.learning_rate(
        p,
        self.model,
        global_step,
        self._images_per_global_step(),
        self.dataset.num_train_examples,
      )
    make_optimizer = optimizers.optimizer_factory(
      optimizers.OptimizerConfig.from_params(p), lr
    )
    # The reported loss must be that of the values the step started from;
    # parts of it (the L2 term) feed no gradient, so nothing else orders
    # them before the in-place updates.
    with tf.control_dependencies([t.loss for t in built_towers]):
      train_op = self.manager.build_train_op(
        [t.grads_and_vars for t in built_towers],
        base.StepUpdate(
          make_optimizer,
          global_step,
          clip_norm=optimizers.gradient_clip(p),
          loss_scale=loss_scale,
          loss=loss,
        ),
      )
    if loss_scale is not None:  # a skipped step moves no statistic either
      stat_updates = loss_scale.guard_statistics(stat_updates)
    return tf.group(train_op, *stat_updates, name='step'), lr

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
      model=self.model,
      num_classes=self.dataset.num_classes,
      devices=local,
      data_format=p.data_format,
      compute_dtype=self.compute_dtype,
      float16_vars=p.fp16_vars,
      seed=p.tf_random_seed,
      make_inputs=lambda: self._tower_inputs(
        local,
        subset='validation',
        train=False,
        first_stream=0,
        num_streams=len(local),
        batch_size=self.eval_batch_size,
        # The evaluation session is in-process, even on a cluster's chief.
        host_device='/cpu:0',
      ),
      num_batches=num_batches,
      session_config=self._session_config(),
      print_line=self.print_line,
      display_every=p.display_every,
      summaries=self.eval_summaries,
    )

  @property
  def eval_batch_size(self) -> int:
    """Evaluation batch size per device (--eval_batch_size, else batch)."""
    return self.params.eval_batch_size or self.params.batch_size

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
    p = self.params
    if self.plan.mode is params_lib.Mode.EVAL:
      return classic_api.ClassicStats(self.last_evaluation())
    self.run_context.start()
    self.print_header()
    self.print_line(
      'Generating training model'
      if self.training
      else 'Generating inference model'
    )
    try:
      built = self.build()
      if p.forward_only and p.freeze_when_forward_only:
        built = freezing.freeze(built, self._session_config())
      if p.graph_file:
        observability.write_graph(p.graph_file, built.graph)
      if p.placement_file:
        placement.report_run(self, built, self._session_config())
      built.graph.finalize()
      # Logical CPU devices of a cluster task come from its server's config.
      config = self.run_context.configure(self._session_config())
      with tf1.Session(
        self.run_context.target, graph=built.graph, config=config
      ) as sess:
        start_step = step_loop.initialize(sess, built, self.print_line)
        loop = _StepLoop(self, sess, built, start_step)
        loop.run()
        final_state = sess.run(built.report)
        end_step = int(sess.run(built.global_step))
        if built.checkpointer is not None and p.train_dir:
          path = built.checkpointer.save(sess)
          if path:
            self.print_line('Saved checkpoint %s' % path)
    finally:
      self.eval_summaries.close()
      if self._scratch:
        shutil.rmtree(self._scratch, ignore_errors=True)
    self.run_context.finish()
    return self._classic_result(
      loop.losses,
      loop.step_times,
      final_state,
      results.TrainInfo(
        start_step=start_step,
        end_step=end_step,
        evals=tuple(e.info() for e in loop.evals),
        time_to_accuracy=loop.time_to_accuracy(),
      ),
      worker_losses=loop.worker_losses,
      report=loop.recorder.report(),
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
    if self.params.graph_file:
      observability.write_graph(self.params.graph_file, built.graph)
    return placement.report_run(
      self, built, self._session_config(), build_only=True
    )

  def _classic_result(self, *args, **kwargs) -> classic_api.ClassicStats:
    return classic_api.ClassicStats(
      run_results.train_result(self, *args, **kwargs)
    )

  def evaluate_checkpoints(self) -> list[results.BenchmarkResult]:
    """--eval: evaluates the latest (or each new) checkpoint of train_dir."""
    return eval_runs.evaluate_checkpoints(self)

  def last_evaluation(self) -> results.BenchmarkResult:
    """--eval: evaluate_checkpoints(); the result of the last evaluation."""
    return eval_runs.last_evaluation(self)

  def during_training(
    self, evaluate, global_step
  ) -> eval_schedule.DuringTraining | None:
    """The --eval_during_training_* evaluations of a training run, or None.

    evaluate: () -> EvalResult of the current variables; global_step: () ->
    the global step now. Only the chief evaluates (as it checkpoints).
    """
    return eval_runs.during_training(self, evaluate, global_step)

  def evaluate_now(self, sess, built: BuiltGraph) -> evaluation.EvalResult:
    """Evaluation during training: checkpoint the current values, evaluate.

    Only on the task whose checkpointer writes (the chief).
    """
    built.checkpointer.save(sess)
    return evaluation.evaluate(self.eval_setup(), built.checkpointer.last_path)

  # ---- results (run_results.py) ------------------------------------------

  @functools.cached_property
  def peak(self) -> peak_lib.Peak | None:
    """The per-device peak for MFU (--peak_tflops_per_device), or None."""
    return run_results.resolve_peak(self)


def run_benchmark(
  plan, out: TextIO = sys.stdout, *, reports_results: bool | None = None
) -> results.BenchmarkResult:
  """Runs one benchmark; appends its JSON line(s) to --result_file if set.

  plan: a params.RunPlan, or resolved Params. With --eval, returns the
  result of the last evaluation (one line per evaluated checkpoint is
  written, each when it is done). With --build_only, returns the
  placement.PlacementReport of the built graph (nothing runs).
  """
  bench = BenchmarkCNN(plan, out=out, reports_results=reports_results)
  p = bench.params
  outputs.check(p)  # before the graph is built, not after the run
  if bench.plan.mode is params_lib.Mode.EVAL:
    return _naming_bad_data(bench, bench.last_evaluation)
  if p.build_only:  # the placement report stands for the result
    return bench.build_only()
  result = _naming_bad_data(bench, bench.run)
  if bench.reports_results:
    record = result.to_record()
    if p.result_file:
      outputs.write_results(p.result_file, [record])
    runtime_knobs.write_benchmark_log(p, [record])
  return result


def _naming_bad_data(bench: BenchmarkCNN, fn):
  """fn(); a failure caused by a corrupt record or image becomes DataError.

  libjpeg's own lines about a corrupt image (printed to fd 2 by the
  decoder, in the run or in the search for the bad record) are dropped: the
  DataError's line says it.
  """
  decodes = input_failures.decodes_jpeg(bench.data_options)
  with quiet.libjpeg_lines_dropped(decodes):
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
