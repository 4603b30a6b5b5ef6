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


def fit_line(xs, ys, relative: bool = False) -> tuple:
  """(intercept, slope) of the least-squares line y = a + b x, both >= 0.

  relative=True weighs each point by 1/y^2 (least relative error), so a few
  large, slow points do not decide the fit alone.

  A negative slope (noise, or no size effect) is fitted as 0 with the
  (weighted) mean as intercept; a negative intercept as 0 with the slope
  through the origin. Equal xs: the mean as intercept when x is 0, else
  intercept 0 and the slope through the origin.
  """
  xs, ys = [float(x) for x in xs], [float(y) for y in ys]
  if not xs:
    raise ValueError('fit of no points')
  ws = [1.0 / (y * y) if relative and y > 0 else 1.0 for y in ys]
  sw = sum(ws)
  mx = sum(w * x for w, x in zip(ws, xs)) / sw
  my = sum(w * y for w, y in zip(ws, ys)) / sw
  sxx = sum(w * (x - mx) ** 2 for w, x in zip(ws, xs))
  through_origin = _through_origin(xs, ys, ws)
  if sxx == 0:
    return (0.0, through_origin) if mx > 0 else (max(0.0, my), 0.0)
  slope = sum(w * (x - mx) * (y - my) for w, x, y in zip(ws, xs, ys)) / sxx
  intercept = my - slope * mx
  if slope < 0:
    return max(0.0, my), 0.0
  if intercept < 0:
    return 0.0, through_origin
  return intercept, slope


def _through_origin(xs, ys, ws) -> float:
  """The weighted least-squares slope of y = b x (>= 0)."""
  sxx = sum(w * x * x for w, x in zip(ws, xs))
  if sxx == 0:
    return 0.0
  return max(0.0, sum(w * x * y for w, x, y in zip(ws, xs, ys)) / sxx)
