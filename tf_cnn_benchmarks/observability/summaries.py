"""TensorBoard summaries, the trace of one step, and the graph file."""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable, Sequence

import tensorflow as tf

# Private, but the only code that turns graph-mode StepStats into a Chrome
# trace with dataflow arrows and memory counters (the classic trace): the
# public profiler (tf.profiler.experimental) records XPlanes, not StepStats.
# See docs/observability.md.
from tensorflow.python.client import timeline

tf1 = tf.compat.v1


def build_summaries(
  verbosity: int,
  *,
  loss: tf.Tensor,
  learning_rate: tf.Tensor | None,
  extra_scalars: dict,
  grads_and_vars: Sequence,
  device: str,
  gradient_norm: Callable[[], tf.Tensor | None] | None = None,
  loss_name: str = 'total_loss',
) -> tf.Tensor | None:
  """The merged summary op for `verbosity` (None at 0).

  1: loss (tagged `loss_name`), learning rate and `extra_scalars` (e.g.
  the loss scale);
  2: + global norms of the gradient applied and of the variables;
  3: + a histogram of every variable.
  gradient_norm: a function building the norm of the gradient the update
  applies (reduced, unscaled, clipped), from the manager; without it (or
  if it builds None), the norm of `grads_and_vars` (one tower's) divided
  by extra_scalars['loss_scale'].
  """
  if verbosity <= 0:
    return None
  with tf.device(device):
    summaries = [tf1.summary.scalar(loss_name, loss)]
    if learning_rate is not None:
      summaries.append(tf1.summary.scalar('learning_rate', learning_rate))
    for name, value in sorted(extra_scalars.items()):
      summaries.append(tf1.summary.scalar(name, tf.cast(value, tf.float32)))
    if verbosity >= 2 and grads_and_vars:
      gradient_norm = gradient_norm() if gradient_norm else None
      if gradient_norm is None:
        grads = [tf.cast(g, tf.float32) for g, _ in grads_and_vars]
        gradient_norm = tf.linalg.global_norm(grads)
        if 'loss_scale' in extra_scalars:
          gradient_norm /= tf.cast(extra_scalars['loss_scale'], tf.float32)
      variables = [tf.cast(v, tf.float32) for _, v in grads_and_vars]
      summaries.append(tf1.summary.scalar('gradient_norm', gradient_norm))
      summaries.append(
        tf1.summary.scalar('variable_norm', tf.linalg.global_norm(variables))
      )
    if verbosity >= 3:
      for _, var in grads_and_vars:
        summaries.append(
          tf1.summary.histogram(var.op.name.replace(':', '_'), var)
        )
    return tf1.summary.merge(summaries)


def chrome_trace(step_stats) -> str:
  """A Chrome trace (chrome://tracing, Perfetto) of RunMetadata.step_stats.

  TensorFlow's own timeline code, as the classic harness used it: per
  device a "<device> Compute" process with one complete ('X') event per op
  and a "<device> Tensors" process; flow events ('s'/'f': the dataflow
  arrows from the op that produced a tensor to each op on another device or
  thread that read it) and, with the memory view, one counter series ('C')
  per allocator of the bytes its tensors held over the step.
  """
  return timeline.Timeline(step_stats).generate_chrome_trace_format(
    show_dataflow=True, show_memory=True
  )


def write_chrome_trace(path: str, run_metadata) -> None:
  """Writes the trace of one traced `session.run` to `path`."""
  makedirs_for(path)
  with open(path, 'w') as f:
    f.write(chrome_trace(run_metadata.step_stats))


def write_step_trace(path: str, run_metadata, *, chrome: bool) -> None:
  """Writes one traced step: a Chrome trace, or the raw StepStats.

  Args:
    path: the file to write.
    run_metadata: the RunMetadata of a session.run with FULL_TRACE.
    chrome: True: a Chrome trace (write_chrome_trace); False: the
      StepStats proto in text format, as the classic harness wrote it.
  """
  if chrome:
    write_chrome_trace(path, run_metadata)
    return
  makedirs_for(path)
  with open(path, 'w') as f:
    f.write(str(run_metadata.step_stats))


def write_graph(path: str, graph: tf.Graph) -> None:
  """Writes `graph` as a GraphDef (text if `path` ends in .pbtxt).

  Args:
    path: the file to write.
    graph: the graph.

  Raises:
    OSError: naming `path`, when the write fails (see write_graph_def).
  """
  write_graph_def(path, graph.as_graph_def(), path.endswith('.pbtxt'))


def write_graph_def(path: str, graph_def, as_text: bool) -> None:
  """Writes the GraphDef `graph_def` at `path` (text or binary), whole.

  Raises:
    OSError: naming `path`, when the write fails (a full disk); the
      temporary file TensorFlow wrote first is removed.
  """
  makedirs_for(path)
  directory, name = os.path.dirname(path) or '.', os.path.basename(path)
  before = set(os.listdir(directory))
  try:
    tf.io.write_graph(graph_def, directory, name, as_text=as_text)
  except (OSError, tf.errors.OpError) as e:
    # tf.io.write_graph writes NAME.tmp<hex> and renames it into place: a
    # failed write leaves that piece behind.
    for left in set(os.listdir(directory)) - before:
      if left.startswith(name + '.tmp'):
        os.remove(os.path.join(directory, left))
    reason = getattr(e, 'strerror', None) or _op_reason(e)
    raise OSError(getattr(e, 'errno', None), reason, path) from None


def _op_reason(error) -> str:
  """The file system's words in a TensorFlow file error ('FILE; REASON')."""
  text = str(getattr(error, 'message', None) or error).splitlines()[0]
  return text.rsplit('; ', 1)[-1]


# How a failed events write reaches Python. tf1.summary.FileWriter writes on
# a thread of its own through TensorFlow's EventsWriter, a pybind11 binding
# whose error statuses become builtin exceptions (a file size limit,
# OUT_OF_RANGE: IndexError; NOT_FOUND: LookupError; a full disk and the
# rest: RuntimeError); the writer raises it again at its next add, flush or
# close, where the caller turns it into one line.
EVENT_WRITE_ERRORS = (
  OSError,
  IndexError,
  LookupError,
  RuntimeError,
  tf.errors.OpError,
)
# The FileWriter's thread, as TensorFlow names it.
_WRITER_THREAD = 'EventLoggerThread'
_WRITER_ERROR_LOG = 'EventFileWriter writer thread error'


def file_writer(logdir: str, graph: tf.Graph | None = None):
  """tf1.summary.FileWriter(logdir, graph=graph) whose thread fails quietly.

  Without this, a full disk printed the thread's traceback and TensorFlow's
  log line before the caller's own line: the failure comes back as one of
  EVENT_WRITE_ERRORS at the writer's next call, so those two are dropped.
  """
  if not getattr(threading.excepthook, 'skips_writer_thread', False):
    threading.excepthook = _skipping_writer_thread(threading.excepthook)
    logging.getLogger('tensorflow').addFilter(_not_writer_thread_error)
  return tf1.summary.FileWriter(logdir, graph=graph)


def _skipping_writer_thread(previous):
  def hook(args):
    if args.thread is None or args.thread.name != _WRITER_THREAD:
      previous(args)

  hook.skips_writer_thread = True
  return hook


def _not_writer_thread_error(record) -> bool:
  return not str(record.msg).startswith(_WRITER_ERROR_LOG)


def makedirs_for(path: str) -> None:
  """Creates the directory `path` goes in, if missing."""
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)


IMAGES_PER_SEC_TAG = 'images_per_sec'


class ThroughputSummary:
  """The `images_per_sec` scalar of the training summaries.

  The step loop adds each step's duration (measured around session.run, so
  no work here is timed) and forgets the warm-up steps; at a summary step,
  summary() gives the images/sec of the steps since the previous summary
  (this process's images, as the step table's) and starts counting again.
  """

  def __init__(self, images_per_step: int):
    self.images_per_step = images_per_step
    self._seconds = 0.0
    self._steps = 0

  def add(self, seconds: float) -> None:
    """Counts one step that took `seconds`."""
    self._seconds += seconds
    self._steps += 1

  def reset(self) -> None:
    """Forgets the steps counted (those of warm-up)."""
    self._seconds, self._steps = 0.0, 0

  def summary(self) -> tf1.Summary:
    """A Summary proto holding the images/sec since the last one."""
    rate = self.images_per_step * self._steps / max(self._seconds, 1e-9)
    self.reset()
    return tf1.Summary(
      value=[tf1.Summary.Value(tag=IMAGES_PER_SEC_TAG, simple_value=rate)]
    )
