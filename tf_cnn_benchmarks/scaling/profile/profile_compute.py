"""One tower's compute, measured: step times, gradients' ready times, apply.

A short local run of the profiled step (profile_graph.py): warm-up steps,
then timed steps (wall clock around session.run: the step as the benchmark
times it), then traced steps (FULL_TRACE) whose own trace gives the forward
and backward split, each gradient's ready time, the cores kept busy and the
optimizer-apply op times. Tracing slows a step down, so the traced times are
taken as fractions of the traced step and scaled to the untraced median.
"""

from __future__ import annotations

import dataclasses
import time

import tensorflow as tf

from tf_cnn_benchmarks.scaling.model import profile_format as fmt
from tf_cnn_benchmarks.scaling.profile import profile_graph
from tf_cnn_benchmarks.scaling.profile import profile_stats as stats
from tf_cnn_benchmarks.scaling.profile import profile_trace

tf1 = tf.compat.v1


@dataclasses.dataclass(frozen=True)
class ComputeProfile:
  """The compute part of a profile."""

  run: fmt.RunInfo
  compute: fmt.Compute
  gradients: tuple  # fmt.Gradient, model variable order
  apply_worker: fmt.ApplyCost
  apply_samples: tuple  # (bytes, ms) per variable, medians of traced steps
  step_samples_ms: tuple  # every timed step


def measure_compute(
  plan, num_steps: int = 40, num_traced: int = 5, num_warmup: int = 5
) -> ComputeProfile:
  """Builds and runs the profiled step of `plan`; returns its figures.

  Args:
    plan: a RunPlan from profile_graph.profile_plan.
    num_steps: timed (untraced) steps.
    num_traced: traced steps after them.
    num_warmup: steps run first and not counted.
  """
  step = profile_graph.build_step(plan)
  built = step.built
  forward_ops = profile_trace.ancestors([step.loss])
  grad_ops = [g.op for g, _ in step.grads_and_vars]
  applies = profile_trace.apply_ops(built.graph)
  config = profile_graph.session_config(plan)
  with tf1.Session(graph=built.graph, config=config) as sess:
    _initialise(sess, built)
    for _ in range(num_warmup):
      sess.run(built.step_op)
    times_ms = _timed_steps(sess, built.step_op, num_steps)
    traces = [
      profile_trace.read_step(
        profile_trace.run_traced(sess, built.step_op),
        forward_ops,
        grad_ops,
        applies,
      )
      for _ in range(num_traced)
    ]
  return _figures(plan, step, times_ms, traces, num_steps)


def _initialise(sess, built) -> None:
  for op in built.init_ops:
    sess.run(op)
  for op in built.post_init_ops:
    sess.run(op)


def _timed_steps(sess, op, num_steps: int) -> list:
  """Wall-clock ms of `num_steps` runs of `op`."""
  out = []
  for _ in range(num_steps):
    start = time.perf_counter()
    sess.run(op)
    out.append((time.perf_counter() - start) * 1e3)
  return out


def _figures(plan, step, times_ms, traces, num_steps) -> ComputeProfile:
  """The profile's compute figures from timed and traced steps."""
  step_ms = stats.median(times_ms)
  traced = [t for t in traces if t.step_us > 0]
  if not traced:
    raise RuntimeError('the traced steps recorded no op (no step trace)')
  rows = profile_graph.variable_rows(step)
  ready = [
    min(1.0, stats.median(t.ready_us[k] / t.step_us for t in traced))
    for k in range(len(rows))
  ]
  forward = stats.median(t.forward_us / t.step_us for t in traced)
  backward = max(0.0, max(ready, default=0.0) - forward)
  compute = fmt.Compute(
    step_ms=step_ms,
    step_ms_p10=min(step_ms, stats.percentile(times_ms, 10)),
    step_ms_p90=max(step_ms, stats.percentile(times_ms, 90)),
    forward_ms=forward * step_ms,
    backward_ms=backward * step_ms,
    cores_busy=stats.median(t.busy_us / t.step_us for t in traced),
  )
  gradients = tuple(
    fmt.Gradient(name, tuple(shape), dtype, nbytes, fraction * step_ms)
    for (name, shape, dtype, nbytes), fraction in zip(rows, ready)
  )
  samples = _apply_samples(step, traced)
  intercept, slope = stats.fit_line(
    [b / 1e6 for b, _ in samples], [ms for _, ms in samples]
  )
  return ComputeProfile(
    run=_run_info(plan, num_steps),
    compute=compute,
    gradients=gradients,
    apply_worker=fmt.ApplyCost(intercept, slope),
    apply_samples=tuple(samples),
    step_samples_ms=tuple(times_ms),
  )


def _apply_samples(step, traced) -> list:
  """[(bytes, apply ms)] per variable with a traced apply op (medians)."""
  out = []
  for (name, _, _, nbytes), (_, v) in zip(
    profile_graph.variable_rows(step), step.grads_and_vars
  ):
    del name
    seen = [t.apply_us[v.op.name] for t in traced if v.op.name in t.apply_us]
    if seen:
      out.append((nbytes, stats.median(seen) / 1e3))
  if not out:
    raise RuntimeError('the traced steps recorded no optimizer-apply op')
  return out


def _run_info(plan, num_steps: int) -> fmt.RunInfo:
  p = plan.params
  return fmt.RunInfo(
    model=p.model,
    data_name=p.data_name,
    batch_size=p.batch_size,
    data_format=p.data_format,
    use_fp16=bool(p.use_fp16),
    optimizer=p.optimizer,
    num_steps=num_steps,
  )
