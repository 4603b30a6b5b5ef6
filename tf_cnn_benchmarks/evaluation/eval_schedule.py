"""Evaluations during training: when they run, and time to accuracy.

As in the classic harness, one of the --eval_during_training_* flags turns a
training run into "training + evaluation": the run pauses after the timed
steps the schedule names (steps of this run, warm-up excluded, never after
the last one), evaluates the current variables, and evaluates once more when
training ends. Epochs become steps as the classic harness computed them:
epoch e is step ceil(e x train examples / images per step), where a step's
images are every worker's (the run's --num_epochs rule).

--stop_at_top_1_accuracy=X ends training at the first evaluation whose top-1
accuracy is at least X (no final evaluation then) and reports the seconds
since the first training step (warm-up and evaluations included) and the
global step it took. In a cluster the chief evaluates and the other workers
stop at the same step on its verdict (cluster/verdicts.py).

The flags are parsed and checked when resolved (config/schedules.py).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Optional

import numpy as np

from tf_cnn_benchmarks.reporting import results


def epoch_step(epoch: float, num_examples: int, step_images: int) -> int:
  """The step at which `epoch` epochs are done (the classic rounding up)."""
  return int(epoch * num_examples + step_images - 1) // step_images


def num_eval_batches(p, eval_images: int, num_eval_examples: int) -> int:
  """Batches per evaluation, as the classic harness chose them.

  --num_eval_batches, else --num_eval_epochs of the validation split, else
  what training was given: --num_epochs (of the validation split) or
  --num_batches.

  Args:
    p: resolved Params.
    eval_images: images per evaluation batch (every evaluating device's).
    num_eval_examples: examples of the validation split.
  """
  if p.num_eval_batches:
    return p.num_eval_batches
  epochs = p.num_eval_epochs or p.num_epochs
  if epochs:
    return max(1, epoch_step(epochs, num_eval_examples, eval_images))
  return p.num_batches


@dataclasses.dataclass(frozen=True)
class EvalSchedule:
  """Which timed steps of a run (1, 2, ...) are followed by an evaluation."""

  every_n_steps: Optional[int] = None
  steps: frozenset = frozenset()

  @classmethod
  def from_params(
    cls, p, step_images: int, num_train_examples: int
  ) -> 'EvalSchedule':
    """The schedule of resolved Params `p`.

    Args:
      p: resolved Params.
      step_images: images of one training step (every worker's).
      num_train_examples: examples of one training epoch.
    """
    if p.eval_during_training_every_n_steps:
      return cls(every_n_steps=p.eval_during_training_every_n_steps)
    if p.eval_during_training_at_specified_steps:
      return cls(steps=frozenset(p.eval_during_training_at_specified_steps))
    epochs = list(p.eval_during_training_at_specified_epochs)
    every = p.eval_during_training_every_n_epochs
    if every:
      # Classic: every n epochs strictly before the end of training.
      ran = p.num_batches * step_images / num_train_examples
      epochs = list(np.arange(every, ran, every))
    return cls(
      steps=frozenset(
        epoch_step(e, num_train_examples, step_images) for e in epochs
      )
    )

  def due(self, step: int) -> bool:
    """Whether an evaluation follows timed step `step` (1-based)."""
    if self.every_n_steps:
      return step % self.every_n_steps == 0
    return step in self.steps


class DuringTraining:
  """Runs the scheduled evaluations from the step loop; time to accuracy.

  evaluate: () -> evaluation.EvalResult of the current variables.
  global_step: () -> the global step now.
  evaluates: False on a task that does not evaluate (a cluster's non-chief
    workers): no evaluation, no line.
  verdicts: with a target in a cluster of several workers, how the chief
    tells the others to stop (cluster/verdicts.py): the chief publishes each
    scheduled evaluation's verdict, the others wait for it and stop with it.
  """

  def __init__(
    self,
    schedule: EvalSchedule,
    evaluate: Callable[[], object],
    global_step: Callable[[], int],
    print_line: Callable[[str], None],
    *,
    num_batches: int,
    target: Optional[float] = None,
    evaluates: bool = True,
    verdicts=None,
  ):
    self.schedule = schedule
    self.evaluate = evaluate
    self.global_step = global_step
    self.print_line = print_line
    self.num_batches = num_batches
    self.target = target
    self.evaluates = evaluates
    # Only a target can stop training: without one nobody needs to wait.
    self.verdicts = verdicts if target is not None else None
    self.evals = []
    self.reached: Optional[results.TimeToAccuracy] = None
    self._start = time.perf_counter()

  def start(self) -> None:
    """Marks the start of training (time to accuracy counts from here)."""
    self._start = time.perf_counter()

  def after_step(self, step: int) -> bool:
    """After timed step `step`: evaluates if due; True: stop training."""
    if step >= self.num_batches or not self.schedule.due(step):
      return False
    if not self.evaluates:
      return self._chief_verdict(step)
    if self.verdicts is not None:
      self.verdicts.announce(step)
    stop = self._evaluate(final=False)
    if self.verdicts is not None:
      self.verdicts.publish(step, stop)
    if not stop:
      self.print_line('Resuming training')
    return stop

  def _chief_verdict(self, step: int) -> bool:
    """A worker that does not evaluate: stops where the chief's did."""
    if self.verdicts is None or not self.verdicts.wait(step):
      return False
    self.print_line(
      'Stopping, as the evaluation of %s after step %d reached %s'
      % (self.verdicts.chief_name, step, self.target)
    )
    return True

  def finish(self) -> None:
    """The final evaluation, unless the target stopped training."""
    if self.reached is None:
      self._evaluate(final=True)

  def time_to_accuracy(self) -> Optional[results.TimeToAccuracy]:
    """For the results line: None without a target, nulls if never reached."""
    if self.target is None or not self.evaluates:
      return None
    return self.reached or results.TimeToAccuracy(None, None)

  def _evaluate(self, *, final: bool) -> bool:
    if not self.evaluates:
      return False
    step = self.global_step()
    self.print_line(
      'Running %sevaluation at global_step %d'
      % ('final ' if final else '', step)
    )
    ev = self.evaluate()
    self.evals.append(ev)
    if self.target is None:
      return False
    if ev.top_1 < self.target:
      if final:
        self.print_line(
          'Target top-1 accuracy %s not reached (last %.4f at global_step %d)'
          % (self.target, ev.top_1, step)
        )
      return False
    self.reached = results.TimeToAccuracy(
      time.perf_counter() - self._start, step
    )
    if not final:
      self.print_line(
        'Stopping, as eval accuracy at least %s was reached' % self.target
      )
    self.print_line(
      'Time to accuracy: %.2f sec, %d steps (top-1 %.4f >= %s)'
      % (self.reached.seconds, step, ev.top_1, self.target)
    )
    return True
