"""TensorBoard summaries, the trace of one step, and the graph file."""

from __future__ import annotations

import json
import os
from typing import Sequence

import tensorflow as tf

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


def chrome_trace(step_stats) -> dict:
  """A Chrome trace-event object (chrome://tracing) from RunMetadata.step_stats.

  One process per device, one complete ('X') event per executed op.
  """
  events = []
  for pid, dev_stats in enumerate(step_stats.dev_stats):
    events.append(
      {
        'name': 'process_name',
        'ph': 'M',
        'pid': pid,
        'args': {'name': dev_stats.device},
      }
    )
    for node in dev_stats.node_stats:
      start = node.all_start_micros
      duration = max(node.all_end_rel_micros, 1)
      op = node.timeline_label.split('=')[-1].split('(')[0].strip()
      events.append(
        {
          'name': node.node_name,
          'cat': 'Op',
          'ph': 'X',
          'pid': pid,
          'tid': node.thread_id,
          'ts': start,
          'dur': duration,
          'args': {'name': node.node_name, 'op': op or '?'},
        }
      )
  return {'traceEvents': events, 'displayTimeUnit': 'ms'}


def write_chrome_trace(path: str, run_metadata) -> None:
  """Writes the trace of one traced `session.run` to `path`."""
  makedirs_for(path)
  with open(path, 'w') as f:
    json.dump(chrome_trace(run_metadata.step_stats), f)


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
