"""Automatic run lengths: the warm-up found (MSER-5), the length by interval.

--num_warmup_batches=auto keeps every step time from the first step on and
discards the start that the MSER-5 rule calls transient: the Marginal
Standard Error Rule of White (1997), "An effective truncation heuristic for
bias reduction in simulation output", Simulation 69(6), 323-334, applied
to batch means of 5 steps as in Franklin and White (2008), "Stationarity
tests and MSER-5: exploring the intuition behind mean-squared-error
reduction in detecting and correcting initialization bias", Proc. Winter
Simulation Conference, 541-546. With Z_1..Z_m the means of consecutive
batches of 5 steps, it discards the first d* batches, where d* minimises

    MSER(d) = sum_{j > d} (Z_j - mean(Z_{d+1..m}))**2 / (m - d)**2

the squared standard error of the mean that is kept: cutting the transient
lowers it, cutting stationary steps raises it. As the authors advise, d is
searched over the first half of the batches only (a minimum near the end
of a series means the run is too short, not that its end is stationary),
and at most MAX_AUTO_WARMUP_STEPS steps go.

--num_batches=auto runs until the batch-means 95% interval of the mean step
time (timing.batch_means_interval) has a half-width of at most
--target_interval of the mean, over at least MIN_AUTO_TIMED_STEPS timed
steps; or until --max_run_seconds of steps or --max_auto_batches steps.
The check is made after every step, a sequential rule: the interval a run
stops on is slightly narrower than a fixed-length run's of the same length
would be on average; MIN_AUTO_TIMED_STEPS and the batch means' t factor
keep that small (scripts/interval_coverage.py measures the coverage).

The decision is online (AutoLength): nothing is known before the steps, and
a pilot run would pay the start-up twice.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import numpy as np

from tf_cnn_benchmarks.config import auto_lengths
from tf_cnn_benchmarks.config import run_fields
from tf_cnn_benchmarks.reporting import timing

MSER_BATCH = 5  # steps per batch of MSER-5
MAX_TRUNCATED_SHARE = 0.5  # d is searched over the first half only
MAX_AUTO_WARMUP_STEPS = run_fields.MAX_AUTO_WARMUP_STEPS
# --num_batches=auto stops on its target only past this many timed steps:
# 10 batches of 3, the fewest batches Schmeiser (1982) advises for batch
# means (timing.batch_layout). A higher floor would cost more than the
# fixed protocol saves: 10 + 100 classic steps against 10 + 30 here.
MIN_AUTO_TIMED_STEPS = 30

STOPPED_BY = ('target', 'time', 'cap', 'steps')


@dataclasses.dataclass(frozen=True)
class Truncation:
  """MSER-5's cut of a series of step times.

  steps: the steps discarded (a multiple of MSER_BATCH). statistic: MSER(d*)
  in ms**2; untruncated: MSER(0) (both None under 2 batches). bound: the
  most steps the rule could have discarded.
  """

  steps: int
  statistic: float | None
  untruncated: float | None
  bound: int


def mser5(step_times, max_steps: int = MAX_AUTO_WARMUP_STEPS) -> Truncation:
  """The MSER-5 truncation of step_times (seconds), see the module doc."""
  x = np.asarray(step_times, dtype=np.float64) * 1e3
  m = len(x) // MSER_BATCH
  if m < 2:
    return Truncation(0, None, None, 0)
  z = x[: m * MSER_BATCH].reshape(m, MSER_BATCH).mean(axis=1)
  z = z - z.mean()  # centred: the sums of squares below lose no digits
  # The last d is m - 2: two batches keep a spread.
  d_max = min(int(m * MAX_TRUNCATED_SHARE), max_steps // MSER_BATCH, m - 2)
  kept = np.arange(m, 0, -1, dtype=np.float64)  # m - d for d = 0..m-1
  sums = np.cumsum(z[::-1])[::-1]  # sum of z[d:]
  squares = np.cumsum((z * z)[::-1])[::-1]
  mser = (squares - sums * sums / kept) / (kept * kept)
  d = int(np.argmin(mser[: d_max + 1]))  # the first of equal minima
  return Truncation(
    d * MSER_BATCH, float(mser[d]), float(mser[0]), d_max * MSER_BATCH
  )


@dataclasses.dataclass(frozen=True)
class LengthSettings:
  """How a loop's length is decided; None: automatic."""

  warmup: int | None  # fixed warm-up steps (run before), None: MSER-5
  num_batches: int | None  # fixed timed steps, None: by the interval
  target_interval: float | None = None
  max_run_seconds: float | None = None
  max_steps: int | None = None  # every step of the loop, warm-up included

  @classmethod
  def from_params(cls, p) -> 'LengthSettings':
    """The settings of resolved Params p."""
    auto_num = auto_lengths.is_auto(p.num_batches)
    return cls(
      warmup=None
      if auto_lengths.is_auto(p.num_warmup_batches)
      else p.num_warmup_batches,
      num_batches=None if auto_num else p.num_batches,
      target_interval=p.target_interval if auto_num else None,
      max_run_seconds=p.max_run_seconds if auto_num else None,
      max_steps=p.max_auto_batches if auto_num else None,
    )

  @property
  def is_auto(self) -> bool:
    """Whether the warm-up or the length is decided during the run."""
    return self.warmup is None or self.num_batches is None


class AutoLength:
  """The online decision of a loop with an automatic warm-up or length.

  add() each step's time (seconds) of the loop (after a fixed warm-up, if
  any); done() after each says whether to stop. Then timed_steps() are the
  kept step times and info() the results line's `run_length`.
  """

  def __init__(
    self,
    settings: LengthSettings,
    clock: Callable[[], float] = time.monotonic,
    started: float | None = None,
  ):
    self.settings = settings
    self._clock = clock
    self._started = clock() if started is None else started
    self.times: list = []
    self.stopped_by: str | None = None
    self._cut = Truncation(0, None, None, 0)
    self._interval: timing.Interval | None = None

  def add(self, seconds: float) -> None:
    """One more step of the loop."""
    self.times.append(seconds)
    n = len(self.times)
    # The cut moves when a batch of 5 completes; on long runs it is
    # recomputed every n / 500 batches only (each costs O(n)).
    due = n % MSER_BATCH == 0 and (n // MSER_BATCH) % _every(n, 500) == 0
    if self.settings.warmup is None and due:
      self._cut = mser5(self.times)

  def timed_steps(self) -> list:
    """The step times kept: those after the discarded warm-up.

    With a fixed length, the last num_batches of them: when a new batch
    moves the cut back, the few extra oldest steps count as warm-up too.
    """
    start = self._cut.steps
    if self.settings.num_batches is not None:
      start = max(start, len(self.times) - self.settings.num_batches)
    return self.times[start:]

  def _discarded(self) -> int:
    """The warm-up steps of the loop (those before timed_steps())."""
    return len(self.times) - len(self.timed_steps())

  def done(self) -> bool:
    """Whether the loop stops now (and why: `stopped_by`)."""
    s, timed = self.settings, self.timed_steps()
    if s.num_batches is not None:
      if len(timed) >= s.num_batches:
        self.stopped_by = 'steps'
      return self.stopped_by is not None
    # The interval costs O(n): checked every n / 200 steps (a stop at most
    # 0.5% late).
    due = len(self.times) % _every(len(self.times), 200) == 0
    if len(timed) >= MIN_AUTO_TIMED_STEPS and due:
      self._interval = timing.batch_means_interval(timed)
      relative = self._interval.relative
      if relative is not None and relative <= s.target_interval:
        self.stopped_by = 'target'
    if self.stopped_by is None and self.elapsed() >= s.max_run_seconds:
      self.stopped_by = 'time'
    if self.stopped_by is None and len(self.times) >= s.max_steps:
      self.stopped_by = 'cap'
    return self.stopped_by is not None

  def elapsed(self) -> float:
    """Seconds since the loop (and its fixed warm-up) started."""
    return self._clock() - self._started

  def info(self) -> dict:
    """The results line's `run_length` (results/schema.json)."""
    s, timed = self.settings, self.timed_steps()
    interval = timing.batch_means_interval(timed)
    return {
      'warmup_rule': 'fixed' if s.warmup is not None else 'mser-5',
      'warmup_steps': s.warmup if s.warmup is not None else self._discarded(),
      'warmup_statistic': self._cut.statistic,
      'warmup_statistic_untruncated': self._cut.untruncated,
      'warmup_bound_steps': None if s.warmup is not None else self._cut.bound,
      'length_rule': 'fixed' if s.num_batches is not None else 'target',
      'target_interval': s.target_interval,
      'interval_reached': interval.relative,
      'target_reached': None
      if s.num_batches is not None
      else self.stopped_by == 'target',
      'stopped_by': self.stopped_by,
      'steps': len(timed),
      'loop_steps': len(self.times) + (s.warmup or 0),
      'seconds': round(self.elapsed(), 3),
      'max_run_seconds': s.max_run_seconds,
      'max_steps': s.max_steps,
    }


def _every(n: int, checks: int) -> int:
  """A period that makes about `checks` checks over n steps (>= 1)."""
  return max(1, n // checks)


def console_lines(info: dict) -> list:
  """What the console says of an automatic warm-up and length."""
  lines = []
  if info['warmup_rule'] == 'mser-5':
    statistic = info['warmup_statistic']
    lines.append(
      'Warm-up (MSER-5, White 1997): discarded %d of %d steps%s; at most '
      '%d could go'
      % (
        info['warmup_steps'],
        info['loop_steps'],
        ''
        if statistic is None
        else ' (MSER %.4g ms^2 at the cut, %.4g without it)'
        % (statistic, info['warmup_statistic_untruncated']),
        info['warmup_bound_steps'],
      )
    )
  if info['length_rule'] == 'target':
    reached = info['interval_reached']
    lines.append(
      'Run length (batch means): %d timed steps in %.1fs, 95%% half-width '
      '%s of the mean, target %.2f%%: %s'
      % (
        info['steps'],
        info['seconds'],
        'unknown' if reached is None else '%.2f%%' % (100 * reached),
        100 * info['target_interval'],
        _WHY[info['stopped_by']],
      )
    )
  return lines


_WHY = {
  'target': 'reached',
  'time': 'not reached, stopped by --max_run_seconds',
  'cap': 'not reached, stopped by --max_auto_batches',
  'steps': 'fixed length',
}
