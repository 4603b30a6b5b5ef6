"""The flag checks of --gradient_accumulation_steps (see
variable_mgr/accumulation.py).

Every manager accumulates (the buffers sit before its reduction); what is
refused is what has no update to accumulate for, or reads its variables
through a pipeline that a micro-step would drain:

  * --forward_only: no gradients (--eval, an evaluator task among them,
    ignores the flag: the training tasks' flags reach it unchanged);
  * --staged_vars: each run of the towers takes the variables staged by
    the previous step's update, and a micro-step applies no update to
    stage the next ones.

This module imports no TensorFlow (the checks run before it loads).
"""

from __future__ import annotations

FLAG = '--gradient_accumulation_steps'


def check(p, error) -> None:
  """Raises error(one line) if the accumulation does not fit the run."""
  steps = p.gradient_accumulation_steps
  if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
    raise error('%s=%s: must be a whole number >= 1' % (FLAG, steps))
  if steps == 1:
    return
  if p.forward_only:
    raise error(
      '%s=%d: training runs only (not --forward_only); use 1' % (FLAG, steps)
    )
  if getattr(p, 'staged_vars', False):
    raise error(
      '%s=%d: not with --staged_vars (a micro-step would take staged '
      'variables that only an update stages again); use 1 or drop '
      '--staged_vars' % (FLAG, steps)
    )
