"""Step timing statistics, as the classic console table reports them."""

from __future__ import annotations

import dataclasses
import math

import numpy as np


@dataclasses.dataclass(frozen=True)
class SpeedSummary:
  """images/sec over some steps: mean, its standard error, and jitter."""

  mean: float
  uncertainty: float
  jitter: float

  def __str__(self) -> str:
    return 'images/sec: %.1f +/- %.1f (jitter = %.1f)' % (
      self.mean,
      self.uncertainty,
      self.jitter,
    )


def speed_summary(
  images_per_step: int, step_times, ewma: float | None = None
) -> SpeedSummary:
  """Summarises per-step times (seconds) as images/sec.

  mean: total images / total time; with `ewma` (--display_perf_ewma, the
  classic formula), images per step / the exponentially weighted mean of
  the step times, the newest weighted 1, the one before (1 - ewma), then
  (1 - ewma)**2, .... uncertainty: standard error of the per-step speeds.
  jitter: 1.4826 * median absolute deviation of the per-step speeds (a
  robust standard deviation).
  """
  times = np.asarray(step_times, dtype=np.float64)
  speeds = images_per_step / times
  mean = images_per_step * len(times) / times.sum()
  if ewma:
    weights = (1.0 - ewma) ** np.arange(len(times) - 1, -1, -1, dtype=float)
    mean = images_per_step / np.average(times, weights=weights)
  uncertainty = speeds.std() / np.sqrt(len(speeds)) if len(speeds) > 1 else 0.0
  jitter = 1.4826 * np.median(np.abs(speeds - np.median(speeds)))
  return SpeedSummary(float(mean), float(uncertainty), float(jitter))


def step_time_ms(step_times) -> dict:
  """Per-step times in ms: mean, p50, p90, and the mean's spread.

  stderr, ci95_low / ci95_high: the batch-means standard error of the mean
  and its Student t 95% interval (batch_means_interval; with under 20
  steps, each step is its own batch: s / sqrt(n), n - 1 degrees of
  freedom); None under 2 steps. n: the number of timed steps.
  """
  ms = np.asarray(step_times, dtype=np.float64) * 1e3
  if not len(ms):
    return {
      'mean': None,
      'p50': None,
      'p90': None,
      'stderr': None,
      'ci95_low': None,
      'ci95_high': None,
      'n': 0,
    }
  interval = batch_means_interval(ms)
  stderr, half = interval.stderr, interval.half_width
  return {
    'mean': float(ms.mean()),
    'p50': float(np.percentile(ms, 50)),
    'p90': float(np.percentile(ms, 90)),
    'stderr': stderr,
    'ci95_low': None if half is None else interval.mean - half,
    'ci95_high': None if half is None else interval.mean + half,
    'n': int(len(ms)),
  }


# --- The batch-means interval (issue 57) -----------------------------------
#
# Step times are autocorrelated (a slow step is often followed by another:
# a noisy neighbour, a frequency change), so s / sqrt(n) understates the
# error of their mean. The method of non-overlapping batch means (Law and
# Kelton, Simulation Modeling and Analysis, 3rd ed. 2000, section 9.5.3;
# Schmeiser, "Batch size effects in the analysis of simulation output",
# Operations Research 30(3), 1982) splits the n steps into k batches of
# consecutive steps and treats the k batch means as nearly independent.
# Schmeiser recommends 10 to 30 batches: the count is fixed (10, then 20
# from 60 steps, so that no batch holds fewer than 3 steps once there are
# enough for batches) and the batch size grows with the run. Every step is used:
# when k does not divide n, the first n mod k batches hold one step more,
# and each batch mean is weighted by its size, so that the interval is
# centred on the mean of all the steps (the line's images/sec):
#   sigma^2 = sum_j n_j (Y_j - mean)**2 / (k - 1),  stderr = sigma / sqrt(n),
#   half-width = t(0.975, k - 1) * stderr;
# with equal batches this is the textbook sd(batch means) / sqrt(k).

MIN_STEPS_FOR_BATCHES = 20  # under this, each step is its own batch
_FEW_BATCHES, _MANY_BATCHES, _MANY_FROM = 10, 20, 60


def batch_layout(n: int) -> tuple:
  """(number of batches k, steps per batch b) for n steps (n >= 2); the
  first n - k * b batches hold b + 1 steps."""
  if n < MIN_STEPS_FOR_BATCHES:
    return n, 1
  k = _MANY_BATCHES if n >= _MANY_FROM else _FEW_BATCHES
  return k, n // k


@dataclasses.dataclass(frozen=True)
class Interval:
  """A 95% interval of a mean by batch means.

  mean: the mean of the values. half_width, stderr: None under 2 values.
  batches, batch_size: the layout used (batch_layout).
  """

  mean: float
  stderr: float | None
  half_width: float | None
  batches: int
  batch_size: int

  @property
  def relative(self) -> float | None:
    """The half-width as a share of the mean (None when unknown)."""
    if self.half_width is None or self.mean <= 0:
      return None
    return self.half_width / self.mean


def batch_means_interval(values) -> Interval:
  """The Student t 95% interval of the mean of `values` by batch means."""
  x = np.asarray(values, dtype=np.float64)
  n = len(x)
  if n < 2:
    return Interval(float(x.mean()) if n else math.nan, None, None, n, 1)
  k, b = batch_layout(n)
  batches = np.array_split(x, k)  # sizes b + 1 first, then b
  sizes = np.array([len(batch) for batch in batches], dtype=np.float64)
  means = np.array([batch.mean() for batch in batches])
  mean = float(x.mean())
  variance = float(np.sum(sizes * (means - mean) ** 2) / (k - 1))
  stderr = math.sqrt(variance / n)
  return Interval(mean, stderr, t_quantile_975(k - 1) * stderr, k, b)


def format_duration(seconds: float) -> str:
  """'42s', '1m02s' or '1h05m': short elapsed-time text."""
  seconds = int(round(seconds))
  if seconds < 60:
    return '%ds' % seconds
  if seconds < 3600:
    return '%dm%02ds' % divmod(seconds, 60)
  return '%dh%02dm' % (seconds // 3600, seconds % 3600 // 60)


def format_eta(seconds: float) -> str:
  """Coarse remaining-time text: '~40s', '~3m', '~1h05m'."""
  seconds = int(round(seconds))
  if seconds < 60:
    return '~%ds' % seconds
  if seconds < 3600:
    return '~%dm' % int(round(seconds / 60.0))
  return '~%dh%02dm' % (seconds // 3600, seconds % 3600 // 60)


# --- Spread of the results line (issue 28) ---------------------------------
#
# Student t quantiles are computed here (scipy is not a dependency): the
# t distribution's CDF for an integer number of degrees of freedom has a
# finite closed form (Abramowitz & Stegun 26.7.3-4), which is inverted by
# bisection; past _SERIES_MAX_DF the Cornish-Fisher expansion around the
# normal quantile is used instead (error well under 1e-6 there).

_SERIES_MAX_DF = 400
_Z_975 = 1.959963984540054  # the standard normal's 0.975 quantile


def _t_two_sided_mass(t: float, df: int) -> float:
  """P(|T| < t) for Student's t with `df` (integer >= 1) degrees of freedom."""
  theta = math.atan(t / math.sqrt(df))
  sin, cos2 = math.sin(theta), math.cos(theta) ** 2
  if df % 2:  # odd: (2/pi) (theta + sin cos (1 + 2/3 cos^2 + ...))
    series, term = 0.0, math.cos(theta)
    if df > 1:
      series = term
      for k in range(3, df - 1, 2):
        term *= cos2 * (k - 1) / k
        series += term
    return 2.0 / math.pi * (theta + sin * series)
  series, term = 1.0, 1.0  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 ...)
  for k in range(2, df - 1, 2):
    term *= cos2 * (k - 1) / k
    series += term
  return sin * series


def _t_cornish_fisher(z: float, df: int) -> float:
  """The t quantile from the normal quantile z, for large df."""
  z3, z5, z7 = z**3, z**5, z**7
  return (
    z
    + (z3 + z) / (4 * df)
    + (5 * z5 + 16 * z3 + 3 * z) / (96 * df**2)
    + (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * df**3)
  )


def t_quantile_975(df: int) -> float:
  """The 0.975 quantile of Student's t: the 95% two-sided interval's factor.

  df: degrees of freedom, an integer >= 1 (n - 1 for n samples).
  """
  df = int(df)
  if df < 1:
    raise ValueError('degrees of freedom must be >= 1, got %d' % df)
  if df > _SERIES_MAX_DF:
    return _t_cornish_fisher(_Z_975, df)
  low, high = 0.0, 1.0
  while _t_two_sided_mass(high, df) < 0.95:
    high *= 2.0
  for _ in range(100):
    middle = 0.5 * (low + high)
    if _t_two_sided_mass(middle, df) < 0.95:
      low = middle
    else:
      high = middle
  return 0.5 * (low + high)


def step_times_ms(step_times) -> list:
  """The timed steps' durations in ms, each rounded to 3 decimals (1 us)."""
  return [round(float(t) * 1e3, 3) for t in step_times]


def images_per_sec_spread(images_per_step: int, step_times) -> dict:
  """Spread of a run's images/sec, images per step / the mean step time.

  The interval is the batch-means 95% interval of the mean step time
  (batch_means_interval) turned into rates: ci95_low = images per step /
  its high end, ci95_high = images per step / its low end (the rate is a
  monotone function of the mean time, so this is a 95% interval of the rate
  too; asymmetric; ci95_high is None when the time's low end is not above
  0, an unbounded rate). stderr: by the delta method, rate * stderr(mean
  step time) / mean step time. batches, batch_size: the interval's layout.
  jitter: 1.4826 * the median absolute deviation of the per-step speeds
  (the console's). All None under 2 timed steps.
  """
  times = np.asarray(step_times, dtype=np.float64)
  none = {'stderr': None, 'ci95_low': None, 'ci95_high': None, 'jitter': None}
  if len(times) < 2:
    return none
  interval = batch_means_interval(times)
  mean, stderr = interval.mean, interval.stderr
  rate = images_per_step / mean
  speeds = images_per_step / times
  low_time = mean - interval.half_width
  high_time = mean + interval.half_width
  return {
    'stderr': float(rate * stderr / mean),
    'ci95_low': float(images_per_step / high_time),
    'ci95_high': float(images_per_step / low_time) if low_time > 0 else None,
    'jitter': float(1.4826 * np.median(np.abs(speeds - np.median(speeds)))),
    'batches': interval.batches,
    'batch_size': interval.batch_size,
  }


def interval_line(spread: dict, num_steps: int) -> str | None:
  """The console's line after 'total images/sec:'; None under 2 steps."""
  if spread.get('stderr') is None:
    return None
  high = spread['ci95_high']
  text = 'images/sec 95%% CI: [%.2f, %s] (n=%d steps, stderr %.2f' % (
    spread['ci95_low'],
    'inf' if high is None else '%.2f' % high,
    num_steps,
    spread['stderr'],
  )
  if spread.get('batch_size', 1) > 1:
    text += ', batch means: %d batches of %d' % (
      spread['batches'],
      spread['batch_size'],
    )
  return text + ')'
