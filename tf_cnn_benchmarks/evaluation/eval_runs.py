"""The evaluations of a run: --eval, and the schedule during training.

--eval evaluates the checkpoints of --train_dir, one result each;
--eval_during_training_* evaluate a training run's variables between steps.
BenchmarkCNN's methods of the same names are these functions.
"""

from __future__ import annotations

import time
import typing

from tf_cnn_benchmarks.config import schedules
from tf_cnn_benchmarks.evaluation import eval_schedule
from tf_cnn_benchmarks.evaluation import evaluation
from tf_cnn_benchmarks.platform import runtime_knobs
from tf_cnn_benchmarks.reporting import result_lines
from tf_cnn_benchmarks.reporting import results
from tf_cnn_benchmarks.reporting import run_results
from tf_cnn_benchmarks.training import checkpoints

if typing.TYPE_CHECKING:  # benchmark_cnn imports this module
  from tf_cnn_benchmarks import benchmark_cnn


def evaluate_checkpoints(
  bench: benchmark_cnn.BenchmarkCNN,
) -> list[results.BenchmarkResult]:
  """--eval: evaluates the latest (or each new) checkpoint of train_dir.

  One result per evaluated checkpoint, each written to --result_file when it
  is done. With --eval_interval_secs, waits for new checkpoints until none
  appears for --eval_timeout_secs.
  """
  p = bench.params
  bench.print_header()
  setup = bench.eval_setup()
  out, seen = [], set()
  deadline = time.monotonic() + p.eval_timeout_secs
  while True:
    latest = checkpoints.latest_checkpoint(p.train_dir)
    if latest is None and not p.eval_interval_secs:
      raise checkpoints.CheckpointError(
        '--train_dir=%s: no checkpoint to evaluate' % p.train_dir
      )
    if latest is not None and latest not in seen:
      seen.add(latest)
      bench.print_line('Evaluating %s' % latest)
      ev = evaluation.evaluate(setup, latest)
      bench.print_line(run_results.RULE)  # the classic block of an evaluation
      bench.print_line('total images/sec: %.2f' % ev.examples_per_sec)
      bench.print_line(run_results.RULE)
      out.append(run_results.eval_result(bench, ev))
      record = out[-1].to_record()
      if p.result_file:  # as it comes: an evaluator may run for hours
        result_lines.append_json_line(p.result_file, record)
      runtime_knobs.write_benchmark_log(p, [record])
      deadline = time.monotonic() + p.eval_timeout_secs
    if not p.eval_interval_secs or time.monotonic() > deadline:
      bench.eval_summaries.close()
      return out
    time.sleep(p.eval_interval_secs)


def last_evaluation(
  bench: benchmark_cnn.BenchmarkCNN,
) -> results.BenchmarkResult:
  """--eval: evaluate_checkpoints(); the result of the last evaluation."""
  evaluated = bench.evaluate_checkpoints()
  if not evaluated:
    raise checkpoints.CheckpointError(
      '--train_dir=%s: no checkpoint appeared within '
      '--eval_timeout_secs=%d'
      % (bench.params.train_dir, bench.params.eval_timeout_secs)
    )
  return evaluated[-1]


def during_training(
  bench: benchmark_cnn.BenchmarkCNN, evaluate, global_step
) -> eval_schedule.DuringTraining | None:
  """The --eval_during_training_* evaluations of a training run, or None.

  evaluate: () -> EvalResult of the current variables; global_step: () ->
  the global step now. Only the chief evaluates (as it checkpoints).
  """
  p = bench.params
  if not (bench.training and schedules.eval_enabled(p)):
    return None
  schedule = eval_schedule.EvalSchedule.from_params(
    p, bench.global_batch_size, bench.dataset.num_train_examples
  )
  return eval_schedule.DuringTraining(
    schedule,
    evaluate,
    global_step,
    bench.print_line,
    num_batches=p.num_batches,
    target=p.stop_at_top_1_accuracy,
    evaluates=bench.run_context.is_chief,
    verdicts=bench.run_context.verdicts(),
  )
