"""Evaluation of a checkpoint: top-1/top-5 accuracy and examples/sec.

The evaluation graph is built fresh for every checkpoint, forward only
(batch norm on its moving statistics), with the variables held once and read
by every tower (parameter_server layout, whatever mode trained them: the
checkpoint's names are mode-independent).

As in the classic harness, an evaluation prints a progress line every
--display_every batches (`N<tab>R examples/sec`, the rate since the previous
line) and the accuracy line, and writes eval/Accuracy@1 and eval/Accuracy@5
at the checkpoint's global step to the TensorBoard events of --eval_dir. A
real-data validation pass that ends before the batches asked for starts
again (the classic --num_eval_batches may ask for more than one pass).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Optional

import tensorflow as tf

from tf_cnn_benchmarks.observability import summaries
from tf_cnn_benchmarks.reporting import outputs
from tf_cnn_benchmarks.reporting import results
from tf_cnn_benchmarks.training import checkpoints
from tf_cnn_benchmarks.training import graph as graph_lib
from tf_cnn_benchmarks.training import tower_inputs
import variable_mgr

tf1 = tf.compat.v1


class EvalError(ValueError):
  """An evaluation that cannot produce a figure; the message is one line."""


# Holds the variables once; every evaluation tower reads them.
EVAL_LAYOUT = 'parameter_server'


@dataclasses.dataclass(frozen=True)
class EvalResult:
  """What one evaluation of one checkpoint measured."""

  checkpoint_step: int
  top_1: float
  top_5: float
  num_examples: int
  num_batches: int
  examples_per_sec: float
  losses: list

  def describe(self) -> str:
    """The classic accuracy line."""
    return 'Accuracy @ 1 = %.4f Accuracy @ 5 = %.4f [%d examples]' % (
      self.top_1,
      self.top_5,
      self.num_examples,
    )

  def info(self) -> results.EvalInfo:
    """For results lines: accuracy, examples and rate of this evaluation."""
    return results.EvalInfo(
      checkpoint_step=self.checkpoint_step,
      top_1_accuracy=self.top_1,
      top_5_accuracy=self.top_5,
      eval_examples=self.num_examples,
      eval_examples_per_sec=self.examples_per_sec,
    )


@dataclasses.dataclass(frozen=True)
class EvalSetup:
  """What an evaluation graph is made of (explicit values, no driver)."""

  params: object  # Params: for the eval manager's from_params
  spec: graph_lib.ModelSpec
  devices: tuple
  inputs: tower_inputs.InputSource  # read from its validation split
  batch_size: int  # per device
  # None: until the input runs out (one pass of the validation split);
  # more than a pass holds: the pass starts again.
  num_batches: int | None
  session_config: object
  # Progress and accuracy lines (None: silent), every N batches (0: none).
  print_line: Optional[Callable[[str], None]] = None
  display_every: int = 0
  summaries: Optional['EvalSummaries'] = None


def evaluate(setup: EvalSetup, checkpoint_path: str) -> EvalResult:
  """Evaluates the checkpoint at `checkpoint_path`."""
  graph = tf.Graph()
  with graph.as_default():
    counts, loss, saved, input_init = _build(setup)
    to_restore = checkpoints.restorable(checkpoint_path, saved)
    missing = sorted(set(saved) - set(to_restore))
    if missing:
      raise checkpoints.CheckpointError(
        '%s: no value for %s (a checkpoint of another model?)'
        % (checkpoint_path, ', '.join(missing[:3]))
      )
    saver = tf1.train.Saver(to_restore)
    init = [
      tf1.global_variables_initializer(),
      tf1.local_variables_initializer(),
      *input_init,
    ]
  graph.finalize()
  with tf1.Session(graph=graph, config=setup.session_config) as sess:
    sess.run(init)
    saver.restore(sess, checkpoint_path)
    result = _run(
      sess,
      setup,
      (counts, loss),
      input_init,
      checkpoints.step_of(checkpoint_path),
    )
  if setup.print_line is not None:
    setup.print_line(result.describe())
  if setup.summaries is not None:
    setup.summaries.write(result)
  return result


def _build(setup: EvalSetup):
  """(the top-1, top-5 and example counts, the mean loss, the variables to
  restore, the input init ops) of the evaluation graph."""
  manager = variable_mgr.create(EVAL_LAYOUT, setup.params, setup.devices)
  batches, input_init = tower_inputs.tower_batches(
    setup.inputs,
    setup.devices,
    subset='validation',
    train=False,
    first_stream=0,
    num_streams=len(setup.devices),
    batch_size=setup.batch_size,
    # The evaluation session is in-process, even on a cluster's chief.
    host_device='/cpu:0',
  )
  built = graph_lib.build_towers(
    setup.spec, manager, batches, graph_lib.TowerOptions(training=False)
  )
  top1, top5 = [], []
  k5 = min(5, setup.spec.num_classes)  # no more than the classes there are
  for device, tower, (_, labels) in zip(setup.devices, built, batches):
    with tf.device(device):  # where the tower ran
      top1.append(_count_in_top_k(tower.logits, labels, 1))
      top5.append(_count_in_top_k(tower.logits, labels, k5))
  with tf.device(manager.cpu_device):
    counts = (
      tf.add_n(top1),
      tf.add_n(top5),
      tf.add_n(
        [tf.shape(labels, out_type=tf.int64)[0] for _, labels in batches]
      ),
    )
    loss = tf.add_n([t.loss for t in built]) / len(built)
  return counts, loss, manager.savable_variables(), input_init


def _count_in_top_k(logits, labels, k: int) -> tf.Tensor:
  """Examples whose label is among the k largest logits (int64)."""
  logits = tf.cast(logits, tf.float32)
  return tf.reduce_sum(
    tf.cast(tf.nn.in_top_k(predictions=logits, targets=labels, k=k), tf.int64)
  )


def _run(sess, setup: EvalSetup, fetches, input_init, step: int) -> EvalResult:
  correct1 = correct5 = examples = 0
  losses, times = [], []
  progress = _Progress(setup)
  batches_this_pass = 0
  while setup.num_batches is None or len(losses) < setup.num_batches:
    start = time.perf_counter()
    try:
      (c1, c5, n), batch_loss = sess.run(fetches)
    except tf.errors.OutOfRangeError:
      if setup.num_batches is None or not batches_this_pass:
        break
      sess.run(input_init)  # the pass ended: the next one starts
      batches_this_pass = 0
      continue
    times.append(time.perf_counter() - start)
    batches_this_pass += 1
    correct1, correct5, examples = correct1 + c1, correct5 + c5, examples + n
    losses.append(float(batch_loss))
    progress.batch_done(len(times), n)
  if not examples:
    raise EvalError(
      'evaluation saw no examples: the validation split holds fewer '
      'examples than one batch per device'
    )
  # The first batch pays for start-up; the rate is that of the others.
  timed = times[1:] or times
  per_batch = examples / len(times)
  return EvalResult(
    step,
    correct1 / examples,
    correct5 / examples,
    int(examples),
    len(times),
    per_batch * len(timed) / sum(timed),
    losses,
  )


class _Progress:
  """The classic progress line every display_every batches."""

  def __init__(self, setup: EvalSetup):
    self.print_line = setup.print_line
    self.every = setup.display_every
    self.since = time.perf_counter()
    self.examples = 0

  def batch_done(self, batches: int, examples: int) -> None:
    self.examples += examples
    if self.print_line is None or not self.every or batches % self.every:
      return
    now = time.perf_counter()
    self.print_line(
      '%d\t%.1f examples/sec' % (batches, self.examples / (now - self.since))
    )
    self.since, self.examples = now, 0


class EvalSummaries:
  """TensorBoard events of the evaluations: eval/Accuracy@1 and @5.

  One events file per run in `logdir`, made at the first evaluation (None:
  nothing written); each evaluation is flushed as it comes, at the global
  step of its checkpoint.
  """

  def __init__(self, logdir: Optional[str]):
    outputs.check_dir('eval_dir', logdir, writes=True)
    self.logdir = logdir
    self._writer = None

  def write(self, result: EvalResult) -> None:
    """Adds one evaluation's accuracies."""
    if self.logdir is None:
      return
    if self._writer is None:
      with tf.Graph().as_default():  # FileWriter refuses eager mode
        self._writer = summaries.file_writer(self.logdir)
    summary = tf1.Summary()
    summary.value.add(tag='eval/Accuracy@1', simple_value=result.top_1)
    summary.value.add(tag='eval/Accuracy@5', simple_value=result.top_5)
    self._writing(self._writer.add_summary, summary, result.checkpoint_step)
    self._writing(self._writer.flush)

  def close(self) -> None:
    """Closes the events file (a later write opens a new one)."""
    if self._writer is not None:
      writer, self._writer = self._writer, None
      self._writing(writer.close)

  def _writing(self, write, *args) -> None:
    """write(*args); a failed write (a full disk) is one line naming it."""
    try:
      write(*args)
    except checkpoints.WRITE_ERRORS + summaries.EVENT_WRITE_ERRORS as e:
      raise outputs.write_failure('summaries in', self.logdir, e) from None
