"""The typed result of a run, built from the driver's figures (results.py).

A training or forward-only run and each evaluated checkpoint become one
results.BenchmarkResult: the run's configuration, its images/sec, step times,
losses, FLOPs and MFU, and the cluster's per-worker figures.
"""

from __future__ import annotations

import typing

import models
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.evaluation import evaluation
from tf_cnn_benchmarks.platform import devices
from tf_cnn_benchmarks.platform import peak as peak_lib
from tf_cnn_benchmarks.reporting import results
from tf_cnn_benchmarks.reporting import timing

if typing.TYPE_CHECKING:  # benchmark_cnn imports this module
  from tf_cnn_benchmarks import benchmark_cnn

RULE = '-' * 64  # the lines around the classic 'total images/sec' line


def eval_result(
  bench: benchmark_cnn.BenchmarkCNN, ev: evaluation.EvalResult
) -> results.BenchmarkResult:
  """The result of one evaluated checkpoint (an eval line)."""
  eval_batch = bench.eval_batch_size * bench.params.num_gpus
  return make_result(
    bench,
    ips=ev.examples_per_sec,
    num_workers=1,
    global_batch_size=eval_batch,
    step_times=[eval_batch / ev.examples_per_sec] * ev.num_batches,
    losses=ev.losses,
    forward_only=True,
    mode='eval',
    evaluation=ev.info(),
  )


def train_result(
  bench: benchmark_cnn.BenchmarkCNN,
  losses,
  step_times,
  final_state: dict,
  training: results.TrainInfo,
  worker_losses=None,
  report: results.StepReport | None = None,
) -> results.BenchmarkResult:
  """The result of a training or forward-only run; prints its images/sec."""
  total_time = sum(step_times)
  # In a cluster this is the cluster's rate: every worker's images.
  ips = bench.global_batch_size * len(step_times) / total_time
  bench.print_line(RULE)
  bench.print_line('total images/sec: %.2f' % ips)
  bench.print_line(RULE)
  forward_only = bench.params.forward_only
  result = make_result(
    bench,
    ips=ips,
    num_workers=bench.num_workers,
    global_batch_size=bench.global_batch_size,
    step_times=step_times,
    losses=losses,
    forward_only=forward_only,
    mode='forward_only' if forward_only else 'train',
    training=training,
    precision_info=results.PrecisionInfo(
      loss_scale=(
        float(final_state['loss_scale'])
        if 'loss_scale' in final_state
        else None
      ),
      skipped_steps=int(final_state.get('skipped_steps', 0)),
    ),
    cluster=cluster_info(bench, ips, worker_losses),
    step_report=report,
  )
  if result.mfu is not None:
    bench.print_line(
      'MFU: %.2f%% of %.3f TFLOP/s per device (%s peak)'
      % (
        100 * result.mfu,
        result.peak_tflops_per_device,
        result.peak_tflops_origin,
      )
    )
  return result


def make_result(
  bench: benchmark_cnn.BenchmarkCNN,
  *,
  ips,
  num_workers,
  global_batch_size,
  step_times,
  losses,
  forward_only,
  mode,
  training=None,
  evaluation=None,
  precision_info=None,
  cluster=None,
  step_report=None,
) -> results.BenchmarkResult:
  """A BenchmarkResult of this run's configuration and the figures given.

  num_devices is --num_gpus: the towers of one worker.
  """
  p = bench.params
  num_devices = p.num_gpus
  flops = models.model_flops_per_image(
    bench.model, bench.dataset.num_classes, data_format=p.data_format
  )
  passes = 1 if forward_only else 3  # forward + 2x for the backward pass
  tflops = flops * passes * ips / 1e12 if flops else None
  peak = bench.peak if tflops is not None else None
  mfu = None
  if peak is not None:
    mfu = tflops / (peak.tflops_per_device * num_devices * num_workers)
  return results.BenchmarkResult(
    params=params_lib.as_dict(p),
    env=results.environment(p.device),
    model=p.model,
    data_name=p.data_name,
    variable_update=p.variable_update,
    all_reduce_spec=bench.manager.all_reduce_description(),
    precision=bench.compute_dtype.name,
    num_devices=num_devices,
    num_workers=num_workers,
    batch_size_per_device=p.batch_size,
    global_batch_size=global_batch_size,
    num_steps=len(step_times),
    num_warmup_steps=p.num_warmup_batches,
    images_per_sec=ips,
    images_per_sec_per_device=ips / (num_devices * num_workers),
    step_time_ms=timing.step_time_ms(step_times),
    losses=losses,
    flops_per_image=flops,
    tflops_per_sec=tflops,
    peak_tflops_per_device=peak.tflops_per_device if peak else None,
    peak_tflops_origin=peak.origin if peak else None,
    mfu=mfu,
    run=results.RunInfo(
      mode=mode,
      data_dir=p.data_dir,
      benchmark_test_id=p.benchmark_test_id,
    ),
    precision_info=precision_info,
    training=training,
    evaluation=evaluation,
    cluster=cluster,
    step_report=step_report,
  )


def cluster_info(
  bench: benchmark_cnn.BenchmarkCNN, ips: float, worker_losses=None
) -> results.ClusterInfo | None:
  """Multi-worker runs: the per-worker rate and the task writing the line."""
  if bench.cluster is None:
    return None
  return results.ClusterInfo(
    images_per_sec_per_worker=ips / bench.num_workers,
    worker_losses=list(worker_losses) if worker_losses is not None else None,
    task=results.TaskInfo(
      job_name=bench.cluster.job_name, task_index=bench.cluster.task_index
    ),
  )


def resolve_peak(bench: benchmark_cnn.BenchmarkCNN) -> peak_lib.Peak | None:
  """The per-device peak for MFU (--peak_tflops_per_device), or None.

  In a cluster only the chief measures (tasks on one host would slow each
  other's probe); the others use the cached figure when there is one. A
  cluster's probe is not cached: the other tasks may still be running on
  its cores (a low figure cached once gave later runs an MFU over 100%).
  """
  p = bench.params
  workers = bench.cluster.workers_on_my_host() if bench.cluster else 1
  return peak_lib.resolve(
    p.peak_tflops_per_device,
    p.device,
    bench.compute_dtype.name,
    devices.devices_sharing_compute(p.device, p.num_gpus, workers),
    measure_fn=peak_lib.measure if bench.run_context.is_chief else None,
    write_cache=bench.cluster is None,
  )
