"""--num_warmup_batches=auto and --num_batches=auto: checks and defaults.

The rules themselves (MSER-5, the batch-means interval, when to stop) are
in reporting/run_length.py; this module says which flag combinations may use
them and fills in the bounds of an automatic length. It imports no
TensorFlow.

Automatic lengths are refused in a cluster: every worker of a synchronous
run must stop at the same step (a collective or a sync queue waits for the
others), and each worker's own step times would pick a different one. They
are refused with --eval too: an evaluation times its batches as a whole.
"""

from __future__ import annotations

import dataclasses
import math

from tf_cnn_benchmarks.config import fields
from tf_cnn_benchmarks.config import run_fields

# The flags that bound --num_batches=auto (unset otherwise).
_BOUND_FLAGS = ('target_interval', 'max_run_seconds', 'max_auto_batches')
# The evaluations during training, whose schedule counts timed steps (and
# whose batch count may be --num_batches).
_EVAL_DURING_TRAINING = (
  'eval_during_training_every_n_steps',
  'eval_during_training_every_n_epochs',
  'eval_during_training_at_specified_steps',
  'eval_during_training_at_specified_epochs',
  'stop_at_top_1_accuracy',
)


def is_auto(value) -> bool:
  """Whether a count field holds the word 'auto'."""
  return isinstance(value, str) and value == fields.AUTO


def uses_auto(p) -> bool:
  """Whether Params p asks for an automatic warm-up or length."""
  return is_auto(p.num_batches) or is_auto(p.num_warmup_batches)


def _auto_flags(p) -> str:
  names = [
    '--%s=auto' % name
    for name in ('num_warmup_batches', 'num_batches')
    if is_auto(getattr(p, name))
  ]
  return ' and '.join(names)


def check(p, cluster, error_cls) -> None:
  """Raises error_cls (one line naming the flag) for a bad combination.

  cluster: the run's cluster spec, None in a local run.
  """
  for name in _BOUND_FLAGS:
    if getattr(p, name) is not None and not is_auto(p.num_batches):
      raise error_cls('--%s: only with --num_batches=auto' % name)
  _check_bounds(p, error_cls)
  if not uses_auto(p):
    return
  given = _auto_flags(p)
  if cluster is not None:
    raise error_cls(
      '%s: not in a cluster run (every worker must stop at the same step); '
      'give numbers of batches there' % given
    )
  if p.eval:
    raise error_cls(
      '%s: not with --eval (an evaluation times its batches as a whole); '
      'give --num_eval_batches or numbers' % given
    )
  for name in _EVAL_DURING_TRAINING:
    if getattr(p, name):
      raise error_cls(
        '%s: not with --%s (its schedule counts timed steps known in '
        'advance); give numbers of batches' % (given, name)
      )


def _check_bounds(p, error_cls) -> None:
  target = p.target_interval
  if target is not None and not (math.isfinite(target) and 0 < target < 1):
    raise error_cls(
      '--target_interval=%s: must be in (0, 1), a share of the mean '
      '(0.01: +/- 1%%)' % target
    )
  seconds = p.max_run_seconds
  if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
    raise error_cls('--max_run_seconds=%s: must be a number > 0' % seconds)
  cap = p.max_auto_batches
  if cap is not None and cap < 2:
    raise error_cls('--max_auto_batches=%s: must be >= 2' % cap)


def with_defaults(p):
  """p with the bounds of --num_batches=auto filled in (p unchanged else)."""
  if not is_auto(p.num_batches):
    return p
  return dataclasses.replace(
    p,
    target_interval=(
      run_fields.DEFAULT_TARGET_INTERVAL
      if p.target_interval is None
      else p.target_interval
    ),
    max_run_seconds=(
      run_fields.DEFAULT_MAX_RUN_SECONDS
      if p.max_run_seconds is None
      else p.max_run_seconds
    ),
    max_auto_batches=(
      run_fields.DEFAULT_MAX_AUTO_BATCHES
      if p.max_auto_batches is None
      else p.max_auto_batches
    ),
  )
