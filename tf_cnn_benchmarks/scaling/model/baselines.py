"""Two naive predictions to score the cost model against (issue 31, item 6).

Both take the profiled step as the compute of every tower (devices in
parallel, nothing shared) and add communication after it, with no overlap:

paleo: bandwidth only (Paleo-style): the bytes on the busiest link over its
  bandwidth. ps-held strategies push and then pull the model through the ps
  tasks' links (W workers x S bytes / num_ps, each way); all-reduce moves
  2(N-1)/N x S per device. No latency, no overlap, no CPU interference.
daydream: size / (0.85 x bandwidth) (Daydream-style): the model's bytes once
  per direction, with no fan-in and no latency.

Bandwidth: --link_mbits, or the profile's gRPC rate when unthrottled.
"""

from __future__ import annotations

from variable_mgr import catalog

# Managers whose variables a ps task holds in a cluster (their traits).
PS_HELD = tuple(
  n
  for n in catalog.names(in_cluster=True)
  if catalog.traits_of(n, True).needs_ps
)


def _bandwidth(profile, target) -> float:
  """Bytes per microsecond between hosts."""
  if target.link_mbits is not None:
    return target.link_mbits / 8.0
  return profile.transports['grpc'].bytes_per_us


def _rate(profile, target, comm_us) -> float:
  step_us = profile.compute.step_ms * 1000.0 + comm_us
  images = profile.run.batch_size * target.num_devices
  return images / step_us * 1e6


def _one_host(target) -> bool:
  return target.num_workers == 1 and target.num_ps == 0


def paleo_images_per_sec(profile, target, strategy) -> float:
  """Bandwidth only, no overlap (see the module docstring)."""
  size, bw = profile.total_gradient_bytes, _bandwidth(profile, target)
  if _one_host(target):
    return _rate(profile, target, 0.0)
  if strategy.variable_update in PS_HELD:
    per_ps = target.num_workers * size / max(1, target.num_ps)
    return _rate(profile, target, 2.0 * per_ps / bw)
  n = target.num_devices
  return _rate(profile, target, 2.0 * (n - 1) / n * size / bw)


def daydream_images_per_sec(profile, target, strategy, efficiency=0.85):
  """size / (efficiency x bandwidth), no fan-in, no latency."""
  size, bw = profile.total_gradient_bytes, _bandwidth(profile, target)
  if _one_host(target):
    return _rate(profile, target, 0.0)
  ways = 2.0 if strategy.variable_update in PS_HELD else 1.0
  return _rate(profile, target, ways * size / (efficiency * bw))
