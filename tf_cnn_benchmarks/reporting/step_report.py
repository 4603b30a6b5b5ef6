"""What the classic step table reports, beside images/sec and the loss.

The loss column is --loss_type_to_report's (total_loss, or base_loss without
the L2 term); in a --forward_only run it prints 0.000, as classic did (such a
run has no training loss), while the results line's `losses` keep the real
loss of each step. --print_training_accuracy (and every --forward_only run, as
classic) adds the top_1_accuracy and top_5_accuracy of each step's batch;
--display_perf_ewma turns the images/sec into an exponentially weighted
average. Each row ends with a column classic parsers ignore (they split on
tabs and read the first ones): the time since the timed steps started and an
estimate of the time left ('elapsed 1m02s, ~3m left'). The results line gets
the same values for every step (warm-up included): the StepReport part,
with the learning rate each step used.
"""

from __future__ import annotations

import time
from typing import Callable, Optional, Sequence

import tensorflow as tf

from tf_cnn_benchmarks.reporting import results
from tf_cnn_benchmarks.reporting import timing

# Digits of the loss and accuracy columns (classic).
DIGITS = 3


def wants_accuracy(params) -> bool:
  """Whether the towers count right predictions (classic condition)."""
  return bool(params.print_training_accuracy or params.forward_only)


def reported_loss(tower, loss_type: str) -> tf.Tensor:
  """The loss of one tower the run reports."""
  return tower.base_loss if loss_type == 'base_loss' else tower.loss


def accuracy_tensors(built_towers: Sequence, device: str) -> Optional[dict]:
  """{'top_1_accuracy', 'top_5_accuracy'}: fractions over the towers' batches.

  None when the towers counted nothing.
  """
  if not built_towers or built_towers[0].correct is None:
    return None
  out = {}
  with tf.device(device):
    examples = tf.cast(
      tf.add_n([tf.shape(t.logits)[0] for t in built_towers]), tf.float32
    )
    for k, key in enumerate(('top_1_accuracy', 'top_5_accuracy')):
      out[key] = tf.add_n([t.correct[k] for t in built_towers]) / examples
  return out


class StepRecorder:
  """Collects each step's learning rate and accuracies; formats table rows."""

  def __init__(
    self,
    params,
    learning_rate,
    accuracy: Optional[dict],
    clock: Callable[[], float] = time.monotonic,
  ):
    self.loss_type = params.loss_type_to_report
    # None: --num_batches=auto, whose end is not known in advance.
    self.num_batches = (
      params.num_batches if isinstance(params.num_batches, int) else None
    )
    self._clock = clock
    self._started = None  # when the header was printed: the timed steps' start
    self.ewma = params.display_perf_ewma
    self.forward_only = bool(params.forward_only)
    self._learning_rate = learning_rate
    self._accuracy = accuracy
    self.learning_rates = [] if learning_rate is not None else None
    self.accuracies = {k: [] for k in accuracy} if accuracy else None

  def fetches(self) -> dict:
    """What to fetch with each step, beside the step op and the loss."""
    out = dict(self._accuracy or {})
    if self._learning_rate is not None:
      out['learning_rate'] = self._learning_rate
    return out

  def record(self, got: dict) -> None:
    """Keeps the values of one step's fetches."""
    if self.learning_rates is not None:
      self.learning_rates.append(float(got['learning_rate']))
    for key, values in (self.accuracies or {}).items():
      values.append(float(got[key]))

  def header(self) -> str:
    """The table's header line; the timed steps start after it."""
    self._started = self._clock()
    columns = ['Step', 'Img/sec', self.loss_type]
    if self.accuracies is not None:
      columns += ['top_1_accuracy', 'top_5_accuracy']
    return '\t'.join(columns)

  def row(self, step: int, speed, loss: float) -> str:
    """One table row: the last recorded step's values.

    loss: the step's loss; the column shows 0 in a forward-only run (the
    classic column: classic fetched no loss there).
    """
    shown = 0.0 if self.forward_only else loss
    text = '%d\t%s\t%.*f' % (step, speed, DIGITS, shown)
    if self.accuracies is not None:
      text += '\t%.*f\t%.*f' % (
        DIGITS,
        self.accuracies['top_1_accuracy'][-1],
        DIGITS,
        self.accuracies['top_5_accuracy'][-1],
      )
    return text + '\t' + self.progress(step)

  def progress(self, step: int) -> str:
    """The row's last column: elapsed time and an estimate of the rest.

    The estimate assumes the remaining timed steps take the mean time of the
    ones so far (wall clock, periodic work between steps included).
    """
    elapsed = self._clock() - (self._started or self._clock())
    text = 'elapsed %s' % _seconds(elapsed)
    left = None if self.num_batches is None else self.num_batches - step
    if step > 0 and left is not None and left > 0:
      text += ', ~%s left' % _seconds(elapsed / step * left)
    return text

  def report(self) -> results.StepReport:
    """The results line's part: in a cluster, the accuracies under
    CLUSTER_ACCURACY_KEYS (step_graph) are the line's, and the rows' (this
    worker's, as classic printed) go to the worker_* fields."""
    accuracies = self.accuracies or {}
    if 'cluster_top_1_accuracy' not in accuracies:
      return results.StepReport(
        loss_type=self.loss_type,
        learning_rates=self.learning_rates,
        top_1_accuracies=accuracies.get('top_1_accuracy'),
        top_5_accuracies=accuracies.get('top_5_accuracy'),
      )
    return results.StepReport(
      loss_type=self.loss_type,
      learning_rates=self.learning_rates,
      top_1_accuracies=accuracies['cluster_top_1_accuracy'],
      top_5_accuracies=accuracies['cluster_top_5_accuracy'],
      worker_top_1_accuracies=accuracies['top_1_accuracy'],
      worker_top_5_accuracies=accuracies['top_5_accuracy'],
    )


def _seconds(seconds: float) -> str:
  """'4.2s' under a minute (short runs), else timing.format_duration's."""
  if seconds < 59.95:
    return '%.1fs' % seconds
  return timing.format_duration(seconds)
