"""Measured trials for --variable_update=auto: when the prediction cannot
order the top strategies, run each for a few steps and keep the fastest.

The cost model gives each strategy a figure and a band. When the
runner-up's band reaches the best's, the prediction cannot say which of the
two is faster. Most of auto's misses on the validation grid were such
near-ties: strategies predicted within 1-3% of each other whose measured
order differed by 7-15% (docs/predicting.md).

A launcher that starts every task itself (scripts/launch_local_cluster.py
--auto_trials=K) can run up to K of those close strategies for a few steps
each, on the network and cluster shape the real run will use. It then
starts the one that measured fastest. Every task gets the trials' figures
(--auto_trials_measured, a JSON list), so each one derives the same pick
from them (auto.choose), and its results line records them beside the
prediction.

This module imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Optional

from absl import flags as absl_flags

from tf_cnn_benchmarks.config import fields
from tf_cnn_benchmarks.config import params_value
from tf_cnn_benchmarks.platform import json_input

# A trial writes none of the run's files (checkpoints, summaries, traces,
# results lines), so it leaves out every flag of these topics.
LEFT_OUT_TOPICS = (fields.CHECKPOINTS, fields.OBSERVABILITY)
# The flags a trial sets itself.
SET_BY_TRIAL = (
  'variable_update',
  'all_reduce_spec',
  'num_batches',
  'num_epochs',
  'num_warmup_batches',
  'auto_trials_measured',
)
# Warm-up steps of a trial: a cluster's first steps open its connections
# and let the runtime settle; the validation grid's cells skip three.
TRIAL_WARMUP_BATCHES = 3


class TrialsError(ValueError):
  """A bad --auto_trials_measured value; the message is one line."""


@dataclasses.dataclass(frozen=True)
class Trial:
  """One close strategy, run briefly on the cluster shape it needs.

  measured: the chief's total images/sec, or None when the trial failed.
  """

  variable_update: str
  all_reduce_spec: Optional[str]
  num_ps: int
  controller: bool
  predicted: float
  measured: Optional[float] = None

  def label(self) -> str:
    """'hybrid' or 'distributed_all_reduce xring'."""
    spec = self.all_reduce_spec
    return self.variable_update + (' ' + spec if spec else '')

  def shape_text(self) -> str:
    """'1 ps', or '0 ps, a controller'."""
    return '%d ps%s' % (
      self.num_ps,
      ', a controller' if self.controller else '',
    )

  def record(self) -> dict:
    """The trial as the tasks' flag and the results line carry it."""
    return {
      'variable_update': self.variable_update,
      'all_reduce_spec': self.all_reduce_spec,
      'num_ps': self.num_ps,
      'controller': self.controller,
      'predicted_images_per_sec': round(self.predicted, 3),
      'measured_images_per_sec': (
        None if self.measured is None else round(self.measured, 3)
      ),
    }


def close_calls(best, others, limit: int) -> list:
  """The strategies to try: the best (num_ps, controller, Prediction) and,
  fastest first, those of `others` whose band reaches its band, at most
  `limit` in all; [] when fewer than two qualify (nothing to tell apart)."""
  rivals = [e for e in others if e[2].high >= best[2].low]
  rivals.sort(key=lambda e: -e[2].images_per_sec)  # stable: ties keep order
  chosen = [best] + rivals[: max(0, limit - 1)]
  if len(chosen) < 2:
    return []
  return [
    Trial(
      p.strategy.variable_update,
      p.strategy.all_reduce_spec,
      num_ps,
      bool(controller),
      p.images_per_sec,
    )
    for num_ps, controller, p in chosen
  ]


def given_flags(argv: list) -> tuple:
  """({name: absl flag} of the benchmark flags `argv` sets, the rest of
  `argv` that names no benchmark flag)."""
  values = absl_flags.FlagValues()
  params_value.define_flags(values)
  try:
    rest = values(['benchmark'] + list(argv), known_only=True)[1:]
  except absl_flags.Error as e:
    raise TrialsError(str(e).splitlines()[0]) from None
  given = {n: values[n] for n in params_value.FIELDS if values[n].present}
  return given, rest


def trial_argv(argv: list, trial: Trial, batches: int) -> list:
  """The benchmark flags of one trial: `argv` less the flags of
  LEFT_OUT_TOPICS and SET_BY_TRIAL, with the trial's strategy and length."""
  given, rest = given_flags(argv)
  out = []
  for name, flag in given.items():
    topic = params_value.FIELDS[name].metadata['topic']
    if name in SET_BY_TRIAL or topic in LEFT_OUT_TOPICS:
      continue
    out.append(flag.serialize())
  out += rest
  out.append('--variable_update=' + trial.variable_update)
  if trial.all_reduce_spec:
    out.append('--all_reduce_spec=' + trial.all_reduce_spec)
  out += [
    '--num_batches=%d' % batches,
    '--num_warmup_batches=%d' % TRIAL_WARMUP_BATCHES,
  ]
  return out


def fastest(trials) -> Optional[Trial]:
  """The trial that measured fastest (the first of equals), or None when
  none measured."""
  done = [t for t in trials if t.measured is not None]
  if not done:
    return None
  return max(done, key=lambda t: t.measured)


def encode(trials) -> str:
  """The --auto_trials_measured value of `trials` (compact JSON)."""
  return json.dumps([t.record() for t in trials], separators=(',', ':'))


def decode(text: str) -> tuple:
  """The Trials of an --auto_trials_measured value.

  Raises:
    TrialsError: not a JSON list of trial records.
  """
  bad = '--auto_trials_measured: %s'
  try:
    raw = json_input.loads(text)
  except json_input.JsonInputError as e:
    problem = e.problem.removeprefix('not valid JSON: ')
    raise TrialsError(bad % ('not JSON (%s)' % problem)) from None
  if not isinstance(raw, list) or not raw:
    raise TrialsError(bad % 'want a non-empty JSON list of trials')
  out = []
  for item in raw:
    try:
      out.append(_trial_of(item))
    except (KeyError, TypeError, ValueError):
      raise TrialsError(
        bad
        % (
          'a trial needs variable_update, all_reduce_spec, num_ps, '
          'controller, predicted_images_per_sec and '
          'measured_images_per_sec: %s' % json.dumps(item)[:120]
        )
      ) from None
  return tuple(out)


def _trial_of(item: dict) -> Trial:
  """One Trial from its record (KeyError, TypeError, ValueError if bad)."""
  measured = item['measured_images_per_sec']
  spec = item['all_reduce_spec']
  if not isinstance(item['variable_update'], str):
    raise TypeError('variable_update')
  if spec is not None and not isinstance(spec, str):
    raise TypeError('all_reduce_spec')
  return Trial(
    item['variable_update'],
    spec,
    int(item['num_ps']),
    bool(item['controller']),
    float(item['predicted_images_per_sec']),
    None if measured is None else float(measured),
  )


def index_of(ranked, trial: Trial) -> Optional[int]:
  """The index in `ranked` (cost_model.Predictions) of the trial's
  strategy, or None when it is not among them."""
  for index, p in enumerate(ranked):
    strategy = p.strategy
    if (strategy.variable_update, strategy.all_reduce_spec) == (
      trial.variable_update,
      trial.all_reduce_spec,
    ):
      return index
  return None
