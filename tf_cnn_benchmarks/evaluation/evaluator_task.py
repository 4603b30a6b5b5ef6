"""The evaluator task: follows the chief's checkpoints in --train_dir.

An evaluator (--job_name=evaluator, or TF_CONFIG's task type "evaluator" as
Kubeflow's TFJob sets it) is a process of its own, outside the training
cluster: no training task knows of it or waits for it. It polls --train_dir
every --eval_interval_secs and evaluates each checkpoint it has not
evaluated yet, oldest first (eval_runs.evaluate_one: the classic lines, one
results line naming the checkpoint's step). It ends when:

- the task that writes the checkpoints (the chief) marks its run done: after
  its final checkpoint it writes DONE_FILE in --train_dir (the final step and
  a run id); the evaluator evaluates every checkpoint up to it and exits 0;
- or no new checkpoint appears for --eval_timeout_secs: one line, exit 1.

A DONE_FILE written before the evaluator process started is an earlier
run's (a resumed job): its checkpoints (steps up to its final step) are not
evaluated again, and only a mark with another run id ends the evaluator. One
written since (a chief that finished while the evaluator was starting) ends
it once every checkpoint is evaluated.
"""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Callable, Optional
import uuid

import tensorflow as tf

from tf_cnn_benchmarks.cluster import spec as cluster_spec
from tf_cnn_benchmarks.evaluation import eval_runs
from tf_cnn_benchmarks.evaluation import evaluation
from tf_cnn_benchmarks.platform import json_input
from tf_cnn_benchmarks.reporting import results
from tf_cnn_benchmarks.reporting import run_facts
from tf_cnn_benchmarks.training import checkpoints

# When this module was imported: the process's start where /proc is absent.
_IMPORTED_AT = time.time()
# Written by the chief in --train_dir after its final checkpoint.
DONE_FILE = 'training_done.json'
# A mark is a few short keys; a larger file is not one (and is not read).
DONE_MAX_BYTES = 64 * 1024
# The --job_name of an evaluator task.
EVALUATOR_JOB = cluster_spec.EVALUATOR


class EvaluatorTimeout(RuntimeError):
  """No new checkpoint and no end of training within --eval_timeout_secs."""


def mark_training_done(checkpointer, print_line: Callable[[str], None]) -> None:
  """The chief's mark, after its final checkpoint: DONE_FILE in train_dir.

  checkpointer: the run's checkpoints.Checkpointer; nothing is written by a
  task that writes no checkpoints. Written under a temporary name and
  renamed, so an evaluator never reads half of it. A failed write is one
  line (an evaluator then stops at its timeout); the run goes on.
  """
  if not (checkpointer.writes and checkpointer.last_path):
    return
  mark = {
    'final_step': checkpoints.step_of(checkpointer.last_path),
    'checkpoint': os.path.basename(checkpointer.last_path),
    'run_id': uuid.uuid4().hex,
    'host': socket.gethostname(),
    'pid': os.getpid(),
  }
  path = os.path.join(checkpointer.train_dir, DONE_FILE)
  temporary = '%s.tmp%d' % (path, os.getpid())
  try:
    with open(temporary, 'w', encoding='utf-8') as f:
      json.dump(mark, f)
      f.write('\n')
    os.replace(temporary, path)
  except OSError as e:
    print_line(
      'warning: %s: not written (%s); an evaluator following this '
      'train_dir stops at its --eval_timeout_secs' % (path, e.strerror or e)
    )


def read_done(train_dir: str) -> Optional[dict]:
  """The chief's mark in train_dir, or None when there is none yet.

  Its 'mtime' key: when the file was written (the file system's clock).
  The chief writes it whole (a temporary file, renamed), so a file that
  cannot be read, is not valid JSON or is no mark was not written by a
  chief: CheckpointError (one line naming the file, exit 2), not a mark
  silently ignored until the evaluator's timeout.
  """
  path = os.path.join(train_dir, DONE_FILE)
  try:
    with open(path, 'rb') as f:
      data = f.read(DONE_MAX_BYTES + 1)
      mtime = os.fstat(f.fileno()).st_mtime
  except FileNotFoundError:
    return None
  except OSError as e:
    raise _bad_mark(path, 'cannot be read (%s)' % (e.strerror or e)) from None
  try:
    mark = json_input.loads(data, max_bytes=DONE_MAX_BYTES)
  except json_input.JsonInputError as e:
    raise _bad_mark(path, 'not valid JSON (%s)' % e.problem) from None
  step = mark.get('final_step') if isinstance(mark, dict) else None
  run_id = mark.get('run_id') if isinstance(mark, dict) else None
  if not isinstance(step, int) or not isinstance(run_id, str):
    raise _bad_mark(
      path,
      'not a mark of the chief (want an object with an integer '
      '"final_step" and a string "run_id")',
    )
  return dict(mark, mtime=mtime)


def _bad_mark(path: str, why: str) -> checkpoints.CheckpointError:
  return checkpoints.CheckpointError(
    '%s: %s; the chief writes it whole after its final checkpoint: '
    "remove it, or give the evaluator the chief's --train_dir" % (path, why)
  )


def process_start_time() -> float:
  """When this process started (seconds since the epoch, to about 1 s)."""
  try:
    with open('/proc/self/stat', encoding='ascii') as f:
      # Field 22, starttime (clock ticks after boot); the name may hold ')'.
      ticks = int(f.read().rpartition(')')[2].split()[19])
    with open('/proc/stat', encoding='ascii') as f:
      boot = next(int(ln.split()[1]) for ln in f if ln.startswith('btime '))
    return boot + ticks / os.sysconf('SC_CLK_TCK')
  except (OSError, ValueError, IndexError, StopIteration):
    return _IMPORTED_AT


def kept_checkpoints(train_dir: str) -> list:
  """Path prefixes of the checkpoints train_dir's state file keeps, by step.

  [] before the first checkpoint. A state file that cannot be read is
  CheckpointError (exit 2), as for --eval.
  """
  state_file = os.path.join(train_dir, checkpoints.STATE_FILE)
  if not os.path.exists(state_file):
    return []
  try:
    state = tf.train.get_checkpoint_state(train_dir)
  except (tf.errors.OpError, ValueError, UnicodeDecodeError) as e:
    raise checkpoints.CheckpointError(
      '%s: not a checkpoint state file (%s)'
      % (state_file, str(e).splitlines()[0] if str(e) else type(e).__name__)
    ) from None
  if state is None:
    return []
  paths = [
    p if os.path.isabs(p) else os.path.join(train_dir, p)
    for p in state.all_model_checkpoint_paths
  ]
  return sorted(paths, key=checkpoints.step_of)


def follow(
  setup: evaluation.EvalSetup,
  facts: run_facts.RunFacts,
  started_at: Optional[float] = None,
) -> list[results.BenchmarkResult]:
  """Evaluates each new checkpoint of train_dir until the chief's mark.

  Returns the results, one per evaluated checkpoint (each written to
  --result_file when it is done). Raises EvaluatorTimeout when no new
  checkpoint appears for --eval_timeout_secs before the mark does.
  started_at: a mark written before it is an earlier run's (default: this
  process's start).
  """
  p = facts.params
  print_line = setup.print_line or (lambda _: None)
  if started_at is None:
    started_at = process_start_time()
  earlier = read_done(p.train_dir)
  if earlier is not None and earlier['mtime'] >= started_at:
    earlier = None  # this run's chief was done before the first look
  # Checkpoints of an earlier run that marked its end are not evaluated.
  earlier_run = None if earlier is None else earlier['run_id']
  last_step = -1 if earlier is None else earlier['final_step']
  print_line(
    'Evaluator: following the checkpoints of %s (a look every %d s; '
    'ends at the mark %s of its chief, or after %d s without a new one)'
    % (p.train_dir, p.eval_interval_secs, DONE_FILE, p.eval_timeout_secs)
  )
  out = []
  deadline = time.monotonic() + p.eval_timeout_secs
  try:
    while True:
      mark = read_done(p.train_dir)  # before the listing it covers
      for path in kept_checkpoints(p.train_dir):
        if checkpoints.step_of(path) <= last_step:
          continue
        last_step = checkpoints.step_of(path)
        result = _evaluate_if_kept(setup, facts, path, print_line)
        out += [result] if result is not None else []
        deadline = time.monotonic() + p.eval_timeout_secs
      if mark is not None and mark['run_id'] != earlier_run:
        print_line(
          'Evaluator: training ended at step %d (%s); evaluated %d '
          'checkpoint(s)' % (mark['final_step'], DONE_FILE, len(out))
        )
        return out
      if time.monotonic() > deadline:
        raise EvaluatorTimeout(_timeout_message(p, len(out)))
      time.sleep(p.eval_interval_secs)
  finally:
    if setup.summaries is not None:
      setup.summaries.close()


def _evaluate_if_kept(setup, facts, path: str, print_line):
  """evaluate_one(path); None (one line) if the chief removed it first."""
  try:
    return eval_runs.evaluate_one(setup, facts, path)
  except (checkpoints.CheckpointError, tf.errors.NotFoundError):
    if os.path.exists(path + '.index'):
      raise
    print_line(
      'Evaluator: skipped %s: removed before it was evaluated (the chief '
      'keeps --max_ckpts_to_keep=%d)' % (path, facts.params.max_ckpts_to_keep)
    )
    return None


def _timeout_message(p, evaluated: int) -> str:
  return (
    'evaluator: no new checkpoint in --train_dir=%s for '
    '--eval_timeout_secs=%d and no end of training marked there (%s); '
    'exiting after %d evaluation(s)'
    % (p.train_dir, p.eval_timeout_secs, DONE_FILE, evaluated)
  )
