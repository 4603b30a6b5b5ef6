"""The schedule flags' grammars and checks: evaluations and learning rates.

Pure parsing and validation, called when Params are resolved (resolve.py);
the schedules themselves run in evaluation/eval_schedule.py and
training/learning_rates.py, which read the values parsed here.

  --eval_during_training_at_specified_steps / _epochs: comma-separated
    numbers, parsed once into tuples on the resolved Params.
  --piecewise_learning_rate_schedule='LR0;E1;LR1;...;En;LRn': `Piecewise`.

This module imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import functools
import math

SCHEDULE_FLAGS = (
  'eval_during_training_every_n_steps',
  'eval_during_training_every_n_epochs',
  'eval_during_training_at_specified_steps',
  'eval_during_training_at_specified_epochs',
)
# The classic list flags: comma-separated on the command line.
_LIST_FLAGS = {
  'eval_during_training_at_specified_steps': (int, 'integers'),
  'eval_during_training_at_specified_epochs': (float, 'numbers'),
}


class ScheduleError(ValueError):
  """A bad schedule flag or combination; the message is one line."""


def schedule_flags_set(p) -> list[str]:
  """Names of the --eval_during_training_* flags that Params `p` sets."""
  return [name for name in SCHEDULE_FLAGS if getattr(p, name)]


def eval_enabled(p) -> bool:
  """Whether Params `p` evaluate during training (train + eval mode)."""
  return bool(schedule_flags_set(p))


def parsed_eval_lists(p, error_cls) -> dict:
  """The list flags of `p` as tuples of numbers (flag name -> tuple).

  Raises:
    error_cls: an entry that is not a number (one line naming the flag).
  """
  out = {}
  for name, (kind, what) in _LIST_FLAGS.items():
    value = getattr(p, name) or ()
    if isinstance(value, str):  # a Python caller's '100,200'
      value = [v for v in value.split(',') if v.strip()]
    try:
      out[name] = tuple(kind(v) for v in value)
    except (TypeError, ValueError):
      raise error_cls(
        '--%s=%s: must be a comma-separated list of %s'
        % (name, ','.join(str(v) for v in value), what)
      ) from None
  return out


def check_eval(p, error_cls) -> None:
  """The evaluation flags of Params `p` (list flags already parsed).

  Raises:
    error_cls: a bad value or combination, one line naming the flag.
  """
  set_flags = schedule_flags_set(p)
  _require(
    len(set_flags) <= 1,
    '--%s: give at most one --eval_during_training_* flag'
    % ' and --'.join(set_flags),
    error_cls,
  )
  if set_flags:
    _require(
      not (p.eval or p.forward_only),
      '--%s: only when training (not with --eval or --forward_only)'
      % set_flags[0],
      error_cls,
    )
  every = p.eval_during_training_every_n_epochs
  _require(
    every is None or (every > 0 and math.isfinite(every)),
    '--eval_during_training_every_n_epochs=%s: must be > 0 and finite' % every,
    error_cls,
  )
  for step in p.eval_during_training_at_specified_steps:
    _require(
      step >= 1,
      '--eval_during_training_at_specified_steps: %d is not a step >= 1' % step,
      error_cls,
    )
  for epoch in p.eval_during_training_at_specified_epochs:
    _require(
      epoch > 0 and math.isfinite(epoch),
      '--eval_during_training_at_specified_epochs: %s is not a finite '
      'number > 0' % epoch,
      error_cls,
    )
  _check_eval_size(p, error_cls)
  _check_target(p, set_flags, error_cls)


def check_eval_interval(p, num_train_examples: int, error_cls) -> None:
  """--eval_during_training_every_n_epochs spans at least one example.

  With the classic rounding (evaluation/eval_schedule.epoch_step) an
  interval under one example is step 0: the schedule would list an
  evaluation point per fraction of an example (1e-300 epochs: more points
  than memory holds).

  Args:
    p: Params whose check_eval passed.
    num_train_examples: examples of one training epoch of the dataset.
    error_cls: raised with one line naming the flag.
  """
  every = p.eval_during_training_every_n_epochs
  _require(
    not every or every * num_train_examples >= 1,
    '--eval_during_training_every_n_epochs=%s: the interval is under one '
    'training example (%d per epoch); give at least %.3g'
    % (every, num_train_examples, 1.0 / num_train_examples),
    error_cls,
  )


def _check_eval_size(p, error_cls) -> None:
  _require(
    p.eval_batch_size >= 0,
    '--eval_batch_size=%d: must be >= 1 (or 0 for --batch_size)'
    % p.eval_batch_size,
    error_cls,
  )
  _require(
    p.num_eval_epochs is None or p.num_eval_epochs > 0,
    '--num_eval_epochs=%s: must be > 0' % p.num_eval_epochs,
    error_cls,
  )
  _require(
    p.num_eval_batches is None or p.num_eval_epochs is None,
    '--num_eval_batches and --num_eval_epochs: give at most one of them',
    error_cls,
  )


def _check_target(p, set_flags, error_cls) -> None:
  target = p.stop_at_top_1_accuracy
  if target is None:
    return
  _require(
    0 < target <= 1,
    '--stop_at_top_1_accuracy=%s: must be in (0, 1]' % target,
    error_cls,
  )
  _require(
    bool(set_flags),
    '--stop_at_top_1_accuracy: only with one of the '
    '--eval_during_training_* flags',
    error_cls,
  )


def _require(condition: bool, message: str, error_cls) -> None:
  if not condition:
    raise error_cls(message)


@dataclasses.dataclass(frozen=True)
class Piecewise:
  """A parsed --piecewise_learning_rate_schedule."""

  values: tuple  # len(epochs) + 1 learning rates
  epochs: tuple  # ascending epoch boundaries

  def boundaries(self, steps_per_epoch: float) -> list:
    """Steps after which the next value applies (tf1 piecewise_constant)."""
    return [int(e * steps_per_epoch) - 1 for e in self.epochs]


# One parse per text: resolution checks the flag, and the learning-rate
# schedule the graph is built with gets the same (frozen) value back.
@functools.lru_cache(maxsize=16)
def parse_piecewise(text: str) -> Piecewise:
  """'LR0;E1;LR1;...;En;LRn' -> Piecewise; ScheduleError if malformed.

  Epochs may be fractional (classic: whole numbers only); they must be > 0
  and strictly ascending, the rates finite and > 0.
  """
  flag = '--piecewise_learning_rate_schedule=%s' % text
  pieces = text.split(';')
  if len(pieces) % 2 == 0:
    raise ScheduleError(
      '%s: must be LR0;E1;LR1;...;En;LRn (an odd number of ;-separated '
      'parts)' % flag
    )
  values, epochs = [], []
  for i, piece in enumerate(pieces):
    kind = 'learning rate' if i % 2 == 0 else 'epoch'
    try:
      number = float(piece)
    except ValueError:
      raise ScheduleError('%s: invalid %s %r' % (flag, kind, piece)) from None
    if not math.isfinite(number) or number <= 0:
      raise ScheduleError(
        '%s: invalid %s %r (must be a finite number > 0)' % (flag, kind, piece)
      )
    (values if i % 2 == 0 else epochs).append(number)
  if any(b <= a for a, b in zip(epochs, epochs[1:])):
    raise ScheduleError('%s: the epochs must be strictly ascending' % flag)
  return Piecewise(tuple(values), tuple(epochs))


def check_learning_rate(params, uses_resnet_base_lr: bool) -> list[str]:
  """The classic refusals of contradictory schedule flags.

  uses_resnet_base_lr: whether the model's own schedule is built on
  --resnet_base_lr (the ImageNet ResNets).

  Returns:
    Warning lines for flags the schedule ignores (as the classic harness
    did, silently).

  Raises:
    ScheduleError: one line naming the contradictory flags.
  """
  decay = (params.num_epochs_per_decay, params.learning_rate_decay_factor)
  if params.piecewise_learning_rate_schedule:
    parse_piecewise(params.piecewise_learning_rate_schedule)
    others = [
      name
      for name, value in (
        ('init_learning_rate', params.init_learning_rate is not None),
        ('num_epochs_per_decay', decay[0]),
        ('learning_rate_decay_factor', decay[1]),
      )
      if value
    ]
    if others:
      raise ScheduleError(
        '--piecewise_learning_rate_schedule: no other schedule flag may be '
        'given with it (got --%s)' % ', --'.join(others)
      )
  if any(decay) and not all(decay):
    raise ScheduleError(
      '--num_epochs_per_decay and --learning_rate_decay_factor: give both '
      '(and --init_learning_rate) or neither'
    )
  return _ignored_schedule_flags(params, uses_resnet_base_lr)


def _ignored_schedule_flags(params, uses_resnet_base_lr: bool) -> list[str]:
  """Warning lines for the schedule flags this run's schedule ignores."""
  own_schedule = (
    params.init_learning_rate is None
    and not params.piecewise_learning_rate_schedule
  )
  # The classic harness ignored these two silently; a classic command line
  # must still run, so they warn instead of refusing.
  ignored = []
  if params.num_learning_rate_warmup_epochs and own_schedule:
    ignored.append(
      'warning: --num_learning_rate_warmup_epochs has no effect without '
      '--init_learning_rate or --piecewise_learning_rate_schedule (the '
      "model's own schedule is used as it is)"
    )
  if params.resnet_base_lr is not None:
    if not uses_resnet_base_lr:
      ignored.append(
        'warning: --resnet_base_lr has no effect with --model=%s (only the '
        'ImageNet ResNet models use it)' % params.model
      )
    elif not own_schedule:
      ignored.append(
        'warning: --resnet_base_lr has no effect with --init_learning_rate '
        'or --piecewise_learning_rate_schedule'
      )
  return ignored


def check_freezing(p, cluster, error_cls) -> list[str]:
  """Validates --freeze_when_forward_only; returns warning lines."""
  if not p.freeze_when_forward_only:
    return []
  if not p.forward_only:
    return [
      'warning: --freeze_when_forward_only has no effect without --forward_only'
    ]
  if p.train_dir:
    raise error_cls(
      '--freeze_when_forward_only: not with --train_dir (the frozen graph '
      'holds the initial weights, not a checkpoint)'
    )
  if cluster is not None:
    raise error_cls(
      '--freeze_when_forward_only: runs in one process; drop the cluster flags'
    )
  return []
