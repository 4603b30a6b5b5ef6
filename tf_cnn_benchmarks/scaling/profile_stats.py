"""Small statistics the profile shares: percentiles and a line fit."""

from __future__ import annotations

import statistics


def percentile(values, q: float) -> float:
  """The q-th percentile (0..100) of `values`, linearly interpolated."""
  ordered = sorted(float(v) for v in values)
  if not ordered:
    raise ValueError('percentile of no values')
  pos = (len(ordered) - 1) * q / 100.0
  low = int(pos)
  high = min(low + 1, len(ordered) - 1)
  return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def median(values) -> float:
  """The median of `values` (a float)."""
  return float(statistics.median(float(v) for v in values))


def fit_line(xs, ys) -> tuple:
  """(intercept, slope) of the least-squares line y = a + b x, both >= 0.

  A negative slope (noise, or no size effect) is fitted as 0 with the mean
  as intercept; a negative intercept as 0 with the slope through the
  origin. One point (or equal xs): intercept 0 and y/x as slope, or the
  mean as intercept when x is 0.
  """
  xs, ys = [float(x) for x in xs], [float(y) for y in ys]
  if not xs:
    raise ValueError('fit of no points')
  mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
  sxx = sum((x - mx) ** 2 for x in xs)
  if sxx == 0:
    return (0.0, my / mx) if mx > 0 else (max(0.0, my), 0.0)
  slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
  intercept = my - slope * mx
  if slope < 0:
    return max(0.0, my), 0.0
  if intercept < 0:
    sxy0 = sum(x * y for x, y in zip(xs, ys))
    sxx0 = sum(x * x for x in xs)
    return 0.0, max(0.0, sxy0 / sxx0)
  return intercept, slope
