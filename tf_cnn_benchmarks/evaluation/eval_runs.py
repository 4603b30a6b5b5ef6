"""The evaluations of a run: --eval, and the schedule during training.

--eval evaluates the checkpoints of --train_dir, one result each;
--eval_during_training_* evaluate a training run's variables between steps.
Both get the run's values (its EvalSetup and reporting's RunFacts), never
the driver.
"""

from __future__ import annotations

import os
import time
from typing import Callable

from tf_cnn_benchmarks.config import schedules
from tf_cnn_benchmarks.evaluation import eval_schedule
from tf_cnn_benchmarks.evaluation import evaluation
from tf_cnn_benchmarks.reporting import outputs
from tf_cnn_benchmarks.reporting import result_lines
from tf_cnn_benchmarks.reporting import results
from tf_cnn_benchmarks.reporting import run_facts
from tf_cnn_benchmarks.reporting import run_results
from tf_cnn_benchmarks.training import checkpoints


def evaluate_checkpoints(
  setup: evaluation.EvalSetup, facts: run_facts.RunFacts
) -> list[results.BenchmarkResult]:
  """--eval: evaluates the latest (or each new) checkpoint of train_dir.

  One result per evaluated checkpoint, each written to --result_file when it
  is done. With --eval_interval_secs, waits for new checkpoints until none
  appears for --eval_timeout_secs. Closes setup.summaries at the end.
  """
  p = facts.params
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
      out.append(evaluate_one(setup, facts, latest))
      deadline = time.monotonic() + p.eval_timeout_secs
    if not p.eval_interval_secs or time.monotonic() > deadline:
      setup.summaries.close()
      return out
    time.sleep(p.eval_interval_secs)


def evaluate_one(
  setup: evaluation.EvalSetup, facts: run_facts.RunFacts, checkpoint: str
) -> results.BenchmarkResult:
  """Evaluates one checkpoint; prints its block, writes its record.

  The checkpoint is read whole first (the evaluator task's were not, and a
  damaged one was TensorFlow's restore traceback): CheckpointError, one
  line naming it.
  """
  state_file = os.path.join(os.path.dirname(checkpoint), checkpoints.STATE_FILE)
  checkpoints.verify(checkpoint, state_file)
  p = facts.params
  setup.print_line('Evaluating %s' % checkpoint)
  ev = evaluation.evaluate(setup, checkpoint)
  # The classic block of an evaluation.
  run_results.print_rate(setup.print_line, ev.examples_per_sec)
  result = eval_result(facts, ev)
  record = result.to_record()
  if p.result_file:  # as it comes: an evaluator may run for hours
    result_lines.append_json_line(p.result_file, record)
  outputs.write_benchmark_log(p, [record])
  return result


def eval_result(
  facts: run_facts.RunFacts, ev: evaluation.EvalResult
) -> results.BenchmarkResult:
  """The result of one evaluated checkpoint (an eval line)."""
  eval_batch = facts.eval_batch_size * facts.params.num_gpus
  return run_results.make_result(
    facts,
    ips=ev.examples_per_sec,
    num_workers=1,
    global_batch_size=eval_batch,
    step_times=[eval_batch / ev.examples_per_sec] * ev.num_batches,
    losses=ev.losses,
    forward_only=True,
    mode='eval',
    evaluation=ev.info(),
  )


def last_evaluation(
  evaluated: list[results.BenchmarkResult], params
) -> results.BenchmarkResult:
  """--eval: the result of the last of `evaluated` (none: CheckpointError)."""
  if not evaluated:
    raise checkpoints.CheckpointError(
      '--train_dir=%s: no checkpoint appeared within '
      '--eval_timeout_secs=%d' % (params.train_dir, params.eval_timeout_secs)
    )
  return evaluated[-1]


def evaluate_now(
  sess, built, setup: evaluation.EvalSetup
) -> evaluation.EvalResult:
  """Evaluation during training: checkpoint the current values, evaluate.

  built: the training run's BuiltGraph; only on the task whose checkpointer
  writes (the chief).
  """
  built.checkpointer.save(sess)
  return evaluation.evaluate(setup, built.checkpointer.last_path)


def during_training(
  facts: run_facts.RunFacts,
  num_train_examples: int,
  *,
  evaluate: Callable[[], evaluation.EvalResult],
  global_step: Callable[[], int],
  print_line: Callable[[str], None],
  run_context,
) -> eval_schedule.DuringTraining | None:
  """The --eval_during_training_* evaluations of a training run, or None.

  evaluate: () -> EvalResult of the current variables; global_step: () ->
  the global step now; run_context: where the run happens (its chief alone
  evaluates, as it checkpoints; its verdicts reach the other workers).
  """
  p = facts.params
  if not (facts.training and schedules.eval_enabled(p)):
    return None
  schedule = eval_schedule.EvalSchedule.from_params(
    p, facts.global_batch_size, num_train_examples
  )
  return eval_schedule.DuringTraining(
    schedule,
    evaluate,
    global_step,
    print_line,
    num_batches=p.num_batches,
    target=p.stop_at_top_1_accuracy,
    evaluates=run_context.is_chief,
    verdicts=run_context.verdicts(),
  )
