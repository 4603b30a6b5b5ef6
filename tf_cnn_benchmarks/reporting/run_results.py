"""The typed result of a run, built from its figures (results.py).

A training or forward-only run and each evaluated checkpoint become one
results.BenchmarkResult: the run's configuration (a run_facts.RunFacts), its
images/sec, step times, losses, FLOPs and MFU, and the cluster's per-worker
figures.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Callable

import models
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.platform import devices
from tf_cnn_benchmarks.platform import peak as peak_lib
from tf_cnn_benchmarks.reporting import environment
from tf_cnn_benchmarks.reporting import results
from tf_cnn_benchmarks.reporting import run_facts
from tf_cnn_benchmarks.reporting import timing
from variable_mgr import collective_catalog
from variable_mgr.compression import catalog as compression_catalog

RULE = '-' * 64  # the lines around the classic 'total images/sec' line


def print_rate(print_line: Callable[[str], None], ips: float, notes=()) -> None:
  """The classic block of a run's rate: 'total images/sec' between rules.

  notes: lines printed after the classic line, inside the rules (the
  cluster label, the interval): classic parsers grep the classic line only.
  """
  print_line(RULE)
  print_line('total images/sec: %.2f' % ips)
  for note in notes:
    print_line(note)
  print_line(RULE)


def cluster_label(facts: run_facts.RunFacts, ips: float) -> str | None:
  """A cluster task's line saying whose figure 'total images/sec' is.

  Every worker prints the cluster's figure (all workers' images over its
  own timed steps); this line names it and the worker's own share.
  """
  if facts.cluster is None:
    return None
  workers = facts.num_workers
  head = "(cluster of %d worker%s: total images/sec is the cluster's" % (
    workers,
    '' if workers == 1 else 's',
  )
  if facts.cluster.job_name != 'worker':  # a controller holds every tower
    return '%s; printed by the %s)' % (head, facts.cluster.job_name)
  return '%s; this worker: %.1f images/sec)' % (head, ips / workers)


def rate_notes(
  facts: run_facts.RunFacts, ips: float, result: results.BenchmarkResult
) -> list:
  """The lines after the classic rate line: cluster label, then interval."""
  notes = [cluster_label(facts, ips)]
  if result.images_per_sec_spread is not None:
    notes.append(
      timing.interval_line(result.images_per_sec_spread, result.num_steps)
    )
  return [note for note in notes if note]


def train_result(
  facts: run_facts.RunFacts,
  print_line: Callable[[str], None],
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
  ips = facts.global_batch_size * len(step_times) / total_time
  forward_only = facts.params.forward_only
  result = make_result(
    facts,
    ips=ips,
    num_workers=facts.num_workers,
    global_batch_size=facts.global_batch_size,
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
    cluster=cluster_info(facts, ips, worker_losses, report),
    step_report=report,
  )
  print_rate(print_line, ips, rate_notes(facts, ips, result))
  if result.mfu is not None:
    print_line(
      'MFU: %.2f%% of %.3f TFLOP/s per device (%s peak)'
      % (
        100 * result.mfu,
        result.peak_tflops_per_device,
        result.peak_tflops_origin,
      )
    )
    warning = peak_lib.over_peak_warning(
      result.mfu,
      peak_lib.Peak(result.peak_tflops_per_device, result.peak_tflops_origin),
    )
    if warning:  # the run goes on; the figure is kept as measured
      print(warning, file=sys.stderr, flush=True)
      if result.peak_tflops_origin == 'cached':
        peak_lib.forget_cached(facts.params.device, facts.precision)
  return result


@dataclasses.dataclass(frozen=True)
class _Utilisation:
  """FLOPs per image, TFLOP/s, the peak and MFU (None where unknown)."""

  flops: int | None
  tflops: float | None
  peak: peak_lib.Peak | None
  mfu: float | None


def _utilisation(
  facts: run_facts.RunFacts, ips: float, forward_only: bool, num_workers: int
) -> _Utilisation:
  p = facts.params
  flops = facts.flops_per_image or models.model_flops_per_image(
    facts.model, facts.num_classes, data_format=p.data_format
  )
  passes = 1 if forward_only else 3  # forward + 2x for the backward pass
  tflops = flops * passes * ips / 1e12 if flops else None
  peak = facts.peak() if tflops is not None else None
  mfu = None
  if peak is not None:
    mfu = tflops / (peak.tflops_per_device * p.num_gpus * num_workers)
  return _Utilisation(flops, tflops, peak, mfu)


def _step_figures(step_times, global_batch_size: int, *, timed: bool) -> dict:
  """BenchmarkResult's step time fields: stats, durations and spread.

  timed: False for an evaluation, which times its batches as a whole (its
  step times are all the mean): no durations, no spread.
  """
  stats = timing.step_time_ms(step_times)
  if not timed:
    stats.update(stderr=None, ci95_low=None, ci95_high=None)
    return {
      'step_time_ms': stats,
      'step_times_ms': None,
      'images_per_sec_spread': None,
    }
  return {
    'step_time_ms': stats,
    'step_times_ms': timing.step_times_ms(step_times),
    'images_per_sec_spread': timing.images_per_sec_spread(
      global_batch_size, step_times
    ),
  }


def _warmup_steps(p, training: results.TrainInfo | None) -> int:
  """The untimed steps before the timed ones (found by an automatic
  warm-up, else --num_warmup_batches)."""
  if training is not None and training.run_length is not None:
    return training.run_length['warmup_steps']
  return p.num_warmup_batches


def make_result(
  facts: run_facts.RunFacts,
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
  p = facts.params
  num_devices = p.num_gpus
  use = _utilisation(facts, ips, forward_only, num_workers)
  return results.BenchmarkResult(
    params=params_lib.as_dict(p),
    env=environment.environment(p.device),
    model=p.model,
    data_name=p.data_name,
    variable_update=p.variable_update,
    all_reduce_spec=p.all_reduce_spec,
    all_reduce_spec_description=facts.manager.all_reduce_description(),
    **compression_catalog.result_keys(p.gradient_compression, p.powersgd_rank),
    gradient_accumulation_steps=p.gradient_accumulation_steps,
    **collective_catalog.result_keys(p),
    precision=facts.precision,
    num_devices=num_devices,
    num_workers=num_workers,
    batch_size_per_device=p.batch_size,
    global_batch_size=global_batch_size,
    num_steps=len(step_times),
    num_warmup_steps=_warmup_steps(p, training),
    images_per_sec=ips,
    images_per_sec_per_device=ips / (num_devices * num_workers),
    **_step_figures(step_times, global_batch_size, timed=mode != 'eval'),
    losses=losses,
    flops_per_image=use.flops,
    tflops_per_sec=use.tflops,
    peak_tflops_per_device=use.peak.tflops_per_device if use.peak else None,
    peak_tflops_origin=use.peak.origin if use.peak else None,
    mfu=use.mfu,
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
  facts: run_facts.RunFacts,
  ips: float,
  worker_losses=None,
  report: results.StepReport | None = None,
) -> results.ClusterInfo | None:
  """Multi-worker runs: the per-worker rate, the task writing the line, and
  its own losses and accuracies (from `report`, the step table's)."""
  if facts.cluster is None:
    return None
  return results.ClusterInfo(
    images_per_sec_per_worker=ips / facts.num_workers,
    worker_losses=list(worker_losses) if worker_losses is not None else None,
    worker_top_1_accuracies=report and report.worker_top_1_accuracies,
    worker_top_5_accuracies=report and report.worker_top_5_accuracies,
    task=results.TaskInfo(
      job_name=facts.cluster.job_name, task_index=facts.cluster.task_index
    ),
  )


def resolve_peak(
  params, precision: str, cluster, *, is_chief: bool
) -> peak_lib.Peak | None:
  """The per-device peak for MFU (--peak_tflops_per_device), or None.

  cluster: the cluster spec (None in a local run). In a cluster only the
  chief measures (tasks on one host would slow each other's probe); the
  others use the cached figure when there is one. A cluster's probe is not
  cached: the other tasks may still be running on its cores (a low figure
  cached once gave later runs an MFU over 100%).
  """
  workers = cluster.workers_on_my_host() if cluster else 1
  return peak_lib.resolve(
    params.peak_tflops_per_device,
    params.device,
    precision,
    devices.devices_sharing_compute(params.device, params.num_gpus, workers),
    measure_fn=peak_lib.measure if is_chief else None,
    write_cache=cluster is None,
  )
