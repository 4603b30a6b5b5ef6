"""Which gradients --agg_small_grads_max_bytes / _max_group reduce together.

Plain data in, index groups out (no TensorFlow): the batch all-reduce groups
its tensors with it, and the cost model its profile's gradients.
"""

from __future__ import annotations

from typing import Hashable, List, Sequence


def small_groups(
  nbytes: Sequence[int],
  dtypes: Sequence[Hashable],
  max_bytes: int,
  max_group: int,
) -> List[List[int]]:
  """Groups of indices to reduce together.

  Consecutive items of one dtype, each at most `max_bytes`, are grouped in
  runs of at most `max_group`; every other item is a group of its own.
  """
  groups, run = [], []

  def close_run():
    groups.extend(run[k : k + max_group] for k in range(0, len(run), max_group))
    run.clear()

  for j, (size, dtype) in enumerate(zip(nbytes, dtypes)):
    small = size <= max_bytes
    if not small or (run and dtypes[run[-1]] != dtype):
      close_run()
    if small:
      run.append(j)
    else:
      groups.append([j])
  close_run()
  return groups
