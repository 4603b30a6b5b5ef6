"""TensorBoard summaries, the trace of one step, and the graph file."""

from __future__ import annotations

import os
from typing import Sequence

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
  gradient_norm: tf.Tensor | None = None,
  loss_name: str = 'total_loss',
) -> tf.Tensor | None:
  """The merged summary op for `verbosity` (None at 0).

  1: loss (tagged `loss_name`), learning rate and `extra_scalars` (e.g.
  the loss scale);
  2: + global norms of the gradient applied and of the variables;
  3: + a histogram of every variable.
  gradient_norm: the norm of the gradient the update applies (reduced,
  unscaled, clipped), from the manager; without it, the norm of
  `grads_and_vars` (one tower's) divided by extra_scalars['loss_scale'].
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
  """
  makedirs_for(path)
  tf.io.write_graph(
    graph.as_graph_def(),
    os.path.dirname(path) or '.',
    os.path.basename(path),
    as_text=path.endswith('.pbtxt'),
  )


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
