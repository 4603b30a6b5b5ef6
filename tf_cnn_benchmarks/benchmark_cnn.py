"""BenchmarkCNN: wires devices, inputs, model and variable manager; runs steps.

The driver is strategy-blind: everything that depends on --variable_update is
a method of the variable manager it gets from the registry.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import TextIO

import tensorflow as tf

import models
import variable_mgr
from variable_mgr import loss_scale as loss_scale_lib
from tf_cnn_benchmarks import cluster as cluster_lib
from tf_cnn_benchmarks import datasets
from tf_cnn_benchmarks import devices
from tf_cnn_benchmarks import inputs
from tf_cnn_benchmarks import optimizers
from tf_cnn_benchmarks import params as params_lib
from tf_cnn_benchmarks import results
from tf_cnn_benchmarks import timing
from tf_cnn_benchmarks import towers

tf1 = tf.compat.v1

_RULE = '-' * 64


@dataclasses.dataclass(frozen=True)
class BuiltGraph:
  """The ops a run needs, all in `graph`."""
  graph: tf.Graph
  step_op: tf.Operation          # train op, or a no-op when forward only
  loss: tf.Tensor                # mean total loss over the towers
  init_ops: tuple
  shared_ready: tf.Tensor | None  # names of shared variables not yet initialised
  post_init_ops: tuple
  global_step: tf.Variable
  report: dict                   # name -> tensor, fetched once at the end


class BenchmarkCNN:
  """One benchmark run, configured by a resolved `Params`."""

  def __init__(self, params: params_lib.Params, out: TextIO = sys.stdout,
               device_was_auto: bool = False):
    self.params = params
    self.out = out
    self.device_was_auto = device_was_auto
    self.model = models.create_model(params.model, params.data_name)
    self.dataset = datasets.get(params.data_name)
    self.cluster = params_lib.cluster_of(params)
    self.layout = cluster_lib.layout(
        self.cluster, variable_mgr.get(params.variable_update,
                                       self.cluster is not None),
        params.device, params.num_gpus, params.cross_replica_sync)
    self.devices = self.layout.tower_devices
    self.manager = variable_mgr.create(params.variable_update, params,
                                       self.devices,
                                       cluster=self.layout.manager_cluster)
    self.compute_dtype = params_lib.compute_dtype(params)
    self.loss_scale_config = loss_scale_lib.LossScaleConfig.from_params(params)
    # Every graph like this one (one per worker, or one in all) runs a step.
    self.num_workers = self.cluster.num_workers if self.cluster else 1
    self.global_batch_size = (params.batch_size * len(self.devices) *
                              self.layout.workers_outside_graph)
    self._run_ctx = cluster_lib.LocalRun()

  # ---- console ------------------------------------------------------------

  def _print(self, text: str = '') -> None:
    print(text, file=self.out, flush=True)

  def print_header(self) -> None:
    """The classic header block."""
    p = self.params
    auto = '' if not self.device_was_auto else ' (auto: %s)' % (
        'GPU visible' if p.device == 'gpu' else 'no GPU visible')
    rows = [
        ('TensorFlow', tf.__version__),
        ('Model', p.model),
        ('Dataset', '%s (synthetic)' % p.data_name),
        ('Mode', 'forward-only' if p.forward_only else 'training'),
        ('Batch size', '%d global' % self.global_batch_size),
        ('', '%d per device' % p.batch_size),
        ('Num batches', str(p.num_batches)),
        ('Num warmup', str(p.num_warmup_batches)),
        ('Devices', str(list(self.devices))),
        ('Device kind', p.device + auto),
        ('Data format', p.data_format),
        ('Precision', self.compute_dtype.name),
        ('Loss scale', self.loss_scale_config.describe()
         if self.loss_scale_config else 'none'),
        ('Optimizer', p.optimizer),
        ('Variables', self.manager.describe()),
        ('AllReduce', str(self.manager.all_reduce_description())),
    ]
    if self._run_ctx.describe:
      rows.append(('Cluster', self._run_ctx.describe))
    for key, value in rows:
      self._print('%-12s %s' % (key + ':' if key else '', value))
    self._print('=' * 10)

  # ---- graph --------------------------------------------------------------

  def build(self) -> BuiltGraph:
    """Builds towers, the update and the init ops in a fresh graph."""
    p = self.params
    graph = tf.Graph()
    with graph.as_default():
      with tf.device(self.manager.global_step_device):
        global_step = tf1.train.get_or_create_global_step()
      loss_scale = None
      if self.loss_scale_config and not p.forward_only:
        loss_scale = loss_scale_lib.LossScale(
            self.loss_scale_config, self.manager.global_step_device)
      self._loss_scale = loss_scale
      built_towers = [self._build_tower(i) for i in range(len(self.devices))]
      with tf.device(self.manager.cpu_device):
        loss = tf.add_n([t.loss for t in built_towers]) / len(built_towers)
      stat_updates = self.manager.stat_update_ops(
          [t.update_ops for t in built_towers])
      if p.forward_only:
        step_op = tf.group(*stat_updates, name='forward_only')
      else:
        step_op = self._build_update(built_towers, global_step, stat_updates,
                                     loss_scale)
      init_ops = tuple(self.manager.init_ops())
      shared = self.manager.shared_variables()
      # identity: a process whose run stops early must not warn that the
      # (should-use wrapped) report was never used.
      shared_ready = (tf.identity(tf1.report_uninitialized_variables(shared))
                      if shared else None)
      post_init = tuple(self.manager.post_init_ops())
      report = loss_scale.report() if loss_scale else {}
    return BuiltGraph(graph, step_op, loss, init_ops, shared_ready, post_init,
                      global_step, report)

  def _build_tower(self, index: int) -> towers.Tower:
    p = self.params
    device = self.devices[index]
    with tf.device(device):
      # Global tower index: worker w's tower t holds the examples a local
      # run's tower w*T+t would hold.
      images, labels = inputs.tower_synthetic_batch(
          self.layout.first_tower_index + index, p.batch_size,
          image_size=self.model.image_size, depth=self.dataset.depth,
          num_classes=self.dataset.num_classes, data_format=p.data_format,
          seed=p.tf_random_seed)
    with self.manager.tower_scope(index):
      return towers.build_tower(
          self.model, images, labels, num_classes=self.dataset.num_classes,
          data_format=p.data_format, compute_dtype=self.compute_dtype,
          seed=p.tf_random_seed, weight_decay=p.weight_decay,
          trainable_variables=lambda: self.manager.tower_trainable_variables(
              index),
          forward_only=p.forward_only, float16_vars=p.fp16_vars,
          scale_loss=self._loss_scale.scale_loss if self._loss_scale else None)

  def _build_update(self, built_towers, global_step, stat_updates,
                    loss_scale):
    p = self.params
    with tf.device(self.manager.global_step_device):
      lr = optimizers.learning_rate(p, self.model, global_step,
                                    self.global_batch_size,
                                    self.dataset.num_train_examples)
    make_optimizer = optimizers.optimizer_factory(
        optimizers.OptimizerConfig.from_params(p), lr)
    # The reported loss must be that of the values the step started from;
    # parts of it (the L2 term) feed no gradient, so nothing else orders
    # them before the in-place updates.
    with tf.control_dependencies([t.loss for t in built_towers]):
      train_op = self.manager.build_train_op(
          [t.grads_and_vars for t in built_towers], make_optimizer,
          global_step, clip_norm=p.gradient_clip, loss_scale=loss_scale)
    return tf.group(train_op, *stat_updates, name='step')

  # ---- run ----------------------------------------------------------------

  @property
  def reports_results(self) -> bool:
    """Whether this process writes the run's results line."""
    return self._run_ctx.reports_results

  def run(self) -> results.BenchmarkResult:
    """Builds the graph, runs warm-up and timed steps, returns the result."""
    p = self.params
    if self.cluster is not None:
      self._run_ctx = cluster_lib.ClientRun(
          self.cluster, self.manager,
          p.num_gpus if p.device == 'cpu' else 1)
    self.print_header()
    self._print('Generating training model' if not p.forward_only
                else 'Generating inference model')
    built = self.build()
    built.graph.finalize()
    # Logical CPU devices of a cluster task come from its server's config.
    config = self._run_ctx.configure(devices.session_config(
        p.device, p.num_gpus, num_intra_threads=p.num_intra_threads,
        num_inter_threads=p.num_inter_threads))
    with tf1.Session(self._run_ctx.target, graph=built.graph,
                     config=config) as sess:
      self._print('Initializing graph')
      sess.run(built.init_ops)
      self._wait_for_shared(sess, built)
      if built.post_init_ops:
        sess.run(built.post_init_ops)
      losses, step_times = self._run_steps(sess, built)
      final_state = sess.run(built.report)
    self._run_ctx.finish()
    return self._result(losses, step_times, final_state)

  def _wait_for_shared(self, sess, built: BuiltGraph,
                       timeout_s: float = 120.0) -> None:
    """Waits until another process (the chief) initialised shared state."""
    if built.shared_ready is None:
      return
    deadline = time.monotonic() + timeout_s
    while len(sess.run(built.shared_ready)):
      if time.monotonic() > deadline:
        raise tf.errors.DeadlineExceededError(
            None, None, 'shared variables not initialised after %ds'
            % timeout_s)
      time.sleep(0.2)

  def _run_steps(self, sess, built: BuiltGraph):
    p = self.params
    fetches = [built.step_op, built.loss]
    losses = []
    if p.num_warmup_batches:
      self._print('Running warm up')
      for _ in range(p.num_warmup_batches):
        losses.append(float(sess.run(fetches)[1]))
      self._print('Done warm up')
    self._print('Step\tImg/sec\ttotal_loss')
    step_times = []
    for step in range(p.num_batches):
      start = time.perf_counter()
      _, loss = sess.run(fetches)
      step_times.append(time.perf_counter() - start)
      losses.append(float(loss))
      if step == 0 or (step + 1) % p.display_every == 0:
        summary = timing.speed_summary(self.global_batch_size, step_times)
        self._print('%d\t%s\t%.3f' % (step + 1, summary, loss))
    return losses, step_times

  def _result(self, losses, step_times,
              final_state: dict) -> results.BenchmarkResult:
    p = self.params
    total_time = sum(step_times)
    # In a cluster this is the cluster's rate: every worker's images.
    ips = self.global_batch_size * len(step_times) / total_time
    self._print(_RULE)
    self._print('total images/sec: %.2f' % ips)
    self._print(_RULE)
    flops = models.model_flops_per_image(self.model, self.dataset.num_classes,
                                         data_format=p.data_format)
    passes = 1 if p.forward_only else 3   # forward + 2x for the backward pass
    tflops = flops * passes * ips / 1e12 if flops else None
    mfu = None
    if tflops is not None and p.peak_tflops_per_device:
      mfu = tflops / (p.peak_tflops_per_device * len(self.devices))
    return results.BenchmarkResult(
        params=params_lib.as_dict(p),
        env=results.environment(p.device),
        model=p.model, data_name=p.data_name,
        variable_update=p.variable_update,
        all_reduce_spec=self.manager.all_reduce_description(),
        precision=self.compute_dtype.name,
        num_devices=len(self.devices) // self.layout_graph_workers,
        num_workers=self.num_workers,
        batch_size_per_device=p.batch_size,
        global_batch_size=self.global_batch_size,
        num_steps=len(step_times), num_warmup_steps=p.num_warmup_batches,
        images_per_sec=ips,
        images_per_sec_per_device=ips / (p.num_gpus * self.num_workers),
        step_time_ms=timing.step_time_ms(step_times), losses=losses,
        flops_per_image=flops, tflops_per_sec=tflops,
        peak_tflops_per_device=p.peak_tflops_per_device, mfu=mfu,
        extra={'loss_scale': (float(final_state['loss_scale'])
                              if 'loss_scale' in final_state else None),
               'skipped_steps': int(final_state.get('skipped_steps', 0)),
               **self._cluster_keys(ips)})

  @property
  def layout_graph_workers(self) -> int:
    """How many workers' towers this process's graph holds."""
    return len(self.devices) // self.params.num_gpus

  def _cluster_keys(self, ips: float) -> dict:
    if self.cluster is None:
      return {}
    return {'images_per_sec_per_worker': ips / self.num_workers,
            'task': {'job_name': self.cluster.job_name,
                     'task_index': self.cluster.task_index}}


def run_benchmark(p: params_lib.Params, out: TextIO = sys.stdout,
                  device_was_auto: bool = False) -> results.BenchmarkResult:
  """Runs one benchmark; appends its JSON line to p.result_file if set."""
  bench = BenchmarkCNN(p, out=out, device_was_auto=device_was_auto)
  result = bench.run()
  if p.result_file and bench.reports_results:
    results.append_json_line(p.result_file, result.to_record())
  return result
