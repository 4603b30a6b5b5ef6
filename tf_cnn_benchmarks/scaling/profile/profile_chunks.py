"""The all-reduce messages each spec and packing option makes of a model.

The harness's own BatchAllReduce (variable_mgr/batch_allreduce.py) cuts the
gradients into units: one per gradient, or the packs of
--gradient_repacking, or the small-gradient runs of
--agg_small_grads_max_bytes/--agg_small_grads_max_group. Each unit is one
call of the spec's algorithm, chosen by the unit's element count
(AllReduceSpec.alg_for, the `pscpu:32k:xring` size ranges). Here the units
are recorded instead of reduced: a recording reduction takes the place of
the algorithm, in a throw-away graph of zeros shaped like the gradients.

How an algorithm cuts a unit further (a ring's n chunks, `#N` shards)
depends on the target's device count; the cost model does that from the
algorithm's name (chunk_algorithms).
"""

from __future__ import annotations

import tensorflow as tf

from variable_mgr import allreduce_spec
from variable_mgr import batch_allreduce

tf1 = tf.compat.v1

# Packing options profiled: key -> BatchAllReduce keyword arguments.
PACKINGS = {
  'repacking=0': {},
  'repacking=1': {'num_packs': 1},
  'repacking=2': {'num_packs': 2},
  'repacking=4': {'num_packs': 4},
  'repacking=8': {'num_packs': 8},
  'agg_small=16384:10': {
    'agg_small_grads_max_bytes': 16384,
    'agg_small_grads_max_group': 10,
  },
  'agg_small=65536:32': {
    'agg_small_grads_max_bytes': 65536,
    'agg_small_grads_max_group': 32,
  },
}

# Specs profiled beside every registered algorithm: size ranges and the
# two-level intra/inter form.
EXTRA_SPECS = ('pscpu:32k:xring', 'pscpu/xring', 'nccl/xring', 'xring#2')


class _RecordingReduction:
  """Stands in for a spec's algorithm: records each unit, returns it."""

  def __init__(self):
    self.units = []  # (num_elements, dtype) per unit, in reduction order

  def sum_unit(self, unit, devices, index):
    del devices, index
    self.units.append((unit[0].shape.num_elements(), unit[0].dtype))
    return list(unit)


def packing_units(gradients, packing: dict, num_towers: int = 2) -> list:
  """[(num_elements, dtype name)] of each all-reduce unit, in order.

  Args:
    gradients: [(shape, dtype name)] in model variable order.
    packing: BatchAllReduce keyword arguments (a PACKINGS value).
    num_towers: towers in the throw-away graph (the units do not depend on
      it; two make it a real reduction).
  """
  recorder = _RecordingReduction()
  with tf.Graph().as_default():
    devices = ['/cpu:%d' % i for i in range(num_towers)]
    towers = []
    for d in devices:
      with tf.device(d):
        towers.append([tf.zeros(shape, dtype) for shape, dtype in gradients])
    batch_allreduce.BatchAllReduce(recorder, **packing).sum(towers, devices)
  return [(n, tf.as_dtype(dtype).name) for n, dtype in recorder.units]


def spec_names() -> tuple:
  """Every registered algorithm's name, then EXTRA_SPECS."""
  return tuple(allreduce_spec.algorithm_names()) + EXTRA_SPECS


def measure_chunks(gradients, specs=None, packings=None) -> tuple:
  """(chunks, chunk_algorithms) of the profile.

  chunks: {packing key: [bytes per unit]} and {'spec=S' or 'spec=S,P':
  [bytes per unit]}; chunk_algorithms: the same 'spec=...' keys -> the
  algorithm (AlgSpec text, e.g. 'xring#2', 'pscpu/xring') of each unit.

  Args:
    gradients: [(shape, dtype name)] in model variable order.
    specs: --all_reduce_spec strings (default: spec_names()).
    packings: {key: BatchAllReduce kwargs} (default: PACKINGS).
  """
  specs = spec_names() if specs is None else specs
  packings = PACKINGS if packings is None else packings
  parsed = [(s, allreduce_spec.parse_all_reduce_spec(s)) for s in specs]
  chunks, algorithms = {}, {}
  for key, packing in packings.items():
    units = packing_units(gradients, packing)
    sizes = tuple(n * tf.as_dtype(dtype).size for n, dtype in units)
    chunks[key] = sizes
    for text, spec in parsed:
      spec_key = 'spec=%s' % text
      if key != 'repacking=0':
        spec_key += ',' + key
      chunks[spec_key] = sizes
      algorithms[spec_key] = tuple(str(spec.alg_for(n)) for n, _ in units)
  return chunks, algorithms
