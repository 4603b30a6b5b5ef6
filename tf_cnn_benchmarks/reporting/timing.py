"""Step timing statistics, as the classic console table reports them."""

from __future__ import annotations

import dataclasses

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
  """mean / p50 / p90 of per-step times, in milliseconds."""
  ms = np.asarray(step_times, dtype=np.float64) * 1e3
  if not len(ms):
    return {'mean': None, 'p50': None, 'p90': None}
  return {
    'mean': float(ms.mean()),
    'p50': float(np.percentile(ms, 50)),
    'p90': float(np.percentile(ms, 90)),
  }
