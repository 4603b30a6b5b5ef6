"""Reading one step's own trace (RunMetadata.step_stats, FULL_TRACE).

Every figure is taken relative to the step's first op start: when the
forward pass ends (the last op the loss depends on), when each gradient is
ready (its op ends), how long the cores were busy (the sum of op times) and
how long each optimizer-apply op took.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

tf1 = tf.compat.v1

# Op types that apply an optimizer update to one variable.
APPLY_PREFIXES = ('Apply', 'ResourceApply')


@dataclasses.dataclass(frozen=True)
class NodeTime:
  """One traced op, in microseconds since the step's first op started."""

  start_us: float
  end_us: float
  busy_us: float  # the op's own compute time


@dataclasses.dataclass(frozen=True)
class StepTrace:
  """What one traced step says (all times in microseconds)."""

  step_us: float  # first op start .. last op end
  forward_us: float  # .. end of the last op the loss depends on
  ready_us: tuple  # per gradient, model order: when its op ended
  busy_us: float  # sum of op compute times
  apply_us: dict  # variable op name -> its apply op's time


def run_traced(sess, fetch) -> object:
  """Runs `fetch` once with FULL_TRACE; returns the RunMetadata's step_stats."""
  metadata = tf1.RunMetadata()
  sess.run(
    fetch,
    options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE),
    run_metadata=metadata,
  )
  return metadata.step_stats


def node_times(step_stats) -> dict:
  """{op name: NodeTime} of every traced op, relative to the first start.

  An op traced on several devices (or twice) keeps its earliest start and
  latest end.
  """
  raw = {}
  for dev in step_stats.dev_stats:
    for n in dev.node_stats:
      if n.node_name == '_SOURCE':
        continue
      start = n.all_start_micros + n.op_start_rel_micros
      end = n.all_start_micros + max(n.all_end_rel_micros, n.op_end_rel_micros)
      busy = max(0, n.op_end_rel_micros - n.op_start_rel_micros)
      if n.node_name in raw:
        s0, e0, b0 = raw[n.node_name]
        start, end, busy = min(start, s0), max(end, e0), busy + b0
      raw[n.node_name] = (start, end, busy)
  if not raw:
    return {}
  first = min(s for s, _, _ in raw.values())
  return {
    name: NodeTime(float(s - first), float(e - first), float(b))
    for name, (s, e, b) in raw.items()
  }


def ancestors(tensors_or_ops) -> set:
  """Names of the ops the given tensors or ops depend on (themselves too)."""
  stack = [getattr(t, 'op', t) for t in tensors_or_ops]
  seen = set()
  while stack:
    op = stack.pop()
    if op.name in seen:
      continue
    seen.add(op.name)
    stack.extend(t.op for t in op.inputs)
    stack.extend(op.control_inputs)
  return seen


def ready_time(op, times: dict) -> float:
  """When `op`'s output was ready: its own end if traced, else the latest
  end among its nearest traced ancestors (grappler may fold an op away)."""
  stack, seen, ends = [op], set(), []
  while stack:
    current = stack.pop()
    if current.name in seen:
      continue
    seen.add(current.name)
    if current.name in times:
      ends.append(times[current.name].end_us)
      continue
    stack.extend(t.op for t in current.inputs)
    stack.extend(current.control_inputs)
  return max(ends, default=0.0)


def apply_ops(graph) -> dict:
  """{variable op name: its optimizer-apply op name} in `graph`."""
  out = {}
  for op in graph.get_operations():
    if op.type.startswith(APPLY_PREFIXES) and op.inputs:
      out[op.inputs[0].op.name] = op.name
  return out


def read_step(step_stats, forward_ops: set, grad_ops, applies: dict):
  """The StepTrace of one traced step.

  Args:
    step_stats: the step's RunMetadata.step_stats.
    forward_ops: names of the ops the loss depends on.
    grad_ops: the ops of the gradients, in model variable order.
    applies: {variable op name: apply op name} (apply_ops).
  """
  times = node_times(step_stats)
  forward = [t.end_us for n, t in times.items() if n in forward_ops]
  return StepTrace(
    step_us=max((t.end_us for t in times.values()), default=0.0),
    forward_us=max(forward, default=0.0),
    ready_us=tuple(ready_time(op, times) for op in grad_ops),
    busy_us=sum(t.busy_us for t in times.values()),
    apply_us={
      var: times[name].busy_us for var, name in applies.items() if name in times
    },
  )
