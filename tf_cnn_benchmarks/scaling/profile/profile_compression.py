"""Each gradient compressor's compute on this host, without the network.

For the profiled model's gradients (their shapes and dtypes, as the profile
lists them) one graph holds, per compressor of the registry, its reduce()
over a one-replica Wire whose reduction is the identity: what one replica
computes to compress its gradients and to decompress the reduced ones
(casts and error feedback; PowerSGD's matmuls, orthogonalisation and state
updates), with no bytes sent. The gradients are variables of random
values, so every run reads the same inputs and fetches nothing back.

Runs of the compressors alternate (rounds of a few runs each), so a load
that comes and goes on a shared host falls on every compressor alike. Each
figure is the median of a compressor's runs less the median of the
identity's (the same variables read, nothing computed: the session's own
cost), with the p10/p90 of its runs less that same median. Grappler's
dependency optimizer is off for these runs (_config says why).
"""

from __future__ import annotations

import time

import tensorflow as tf

from tf_cnn_benchmarks.scaling.model import profile_format as fmt
from tf_cnn_benchmarks.scaling.profile import profile_stats as stats
from variable_mgr.compression import base
from variable_mgr.compression import catalog
from variable_mgr.compression import registry

tf1 = tf.compat.v1

NONE = 'none'
DEFAULT_ROUNDS = 6
DEFAULT_RUNS_PER_ROUND = 5
WARMUP_RUNS = 2
# How the figures were taken (CompressorCosts.measured).
MEASURED = (
  "each compressor's reduce() on a one-replica Wire whose reduction is the "
  'identity, for the %d gradients of the profile on its %s: wall-clock ms '
  'per run, median less the median of the identity run'
)


def measure_compressors(
  gradients,
  names,
  *,
  device: str = 'cpu',
  rank: int = catalog.DEFAULT_POWERSGD_RANK,
  config=None,
  rounds: int = DEFAULT_ROUNDS,
  runs_per_round: int = DEFAULT_RUNS_PER_ROUND,
) -> fmt.CompressorCosts | None:
  """The compute of each compressor in `names` for `gradients` (see the
  module docstring); None when `names` is empty.

  Args:
    gradients: fmt.Gradient (or anything with .shape and .dtype names).
    names: compressors of the registry ('none' is the baseline, left out).
    device: 'cpu' or 'gpu': the profile's device.
    rank: PowerSGD's rank.
    config: the session ConfigProto (None: TensorFlow's default).
    rounds, runs_per_round: timed runs per compressor = their product.
  """
  names = [n for n in names if n != NONE]
  if not names:
    return None
  graph = tf.Graph()
  with graph.as_default():
    ops = _build(gradients, [NONE] + names, '/%s:0' % device, rank)
    init = tf1.global_variables_initializer()
  with tf1.Session(graph=graph, config=_config(config)) as sess:
    sess.run(init)
    times = _timed(sess, ops, rounds, runs_per_round)
  base_ms = stats.median(times[NONE])
  per_step = {}
  for name in names:
    t = [max(0.0, x - base_ms) for x in times[name]]
    ms = stats.median(t)
    per_step[name] = fmt.CompressorCost(
      ms, min(ms, stats.percentile(t, 10)), max(ms, stats.percentile(t, 90))
    )
  return fmt.CompressorCosts(
    per_step=per_step,
    rank=rank,
    baseline_ms=base_ms,
    runs=rounds * runs_per_round,
    measured=MEASURED % (len(gradients), device),
  )


def _build(gradients, names, device: str, rank: int) -> dict:
  """{name: the op that runs one replica's compress + decompress}."""
  with tf.device(device):
    grads = [
      tf1.Variable(
        # Random values drawn in the graph (no copy of them in its GraphDef).
        tf.cast(tf.random.normal([int(n) for n in g.shape], seed=j), g.dtype),
        trainable=False,
        use_resource=True,
        name='gradient_%d' % j,
      )
      for j, g in enumerate(gradients)
    ]
  ops = {}
  for name in names:
    wire = base.Wire(
      devices=(device,),
      reduce=_identity,
      num_replicas=1,
      # Each compressor's own state variables (no name is shared).
      names=tuple('%s/grad_%d' % (name, j) for j in range(len(grads))),
    )
    with tf1.name_scope(name), tf.device(device):
      reads = [[v.read_value() for v in grads]]
      out = registry.create(name, rank).reduce(reads, wire)
      ops[name] = tf.group(*out[0])
  return ops


def _config(given):
  """`given` (or the default) with Grappler's dependency optimizer off.

  Each compressor's outputs are run through a control-only group (nothing
  fetched); that optimizer turns an op whose outputs only such a group
  consumes into a no-op, and so would remove a plain cast and its way back.
  In the training step the reduced gradients feed the update, so they run.
  """
  config = tf1.ConfigProto()
  if given is not None:
    config.CopyFrom(given)
  options = config.graph_options.rewrite_options
  options.dependency_optimization = type(options).OFF
  return config


def _identity(tower_tensors) -> list:
  """A one-replica reduction: every tensor as it is."""
  return [list(tensors) for tensors in tower_tensors]


def _timed(sess, ops: dict, rounds: int, runs_per_round: int) -> dict:
  """{name: wall-clock ms of each timed run}, the names taking turns."""
  for op in ops.values():
    for _ in range(WARMUP_RUNS):
      sess.run(op)
  times = {name: [] for name in ops}
  for _ in range(rounds):
    for name, op in ops.items():
      for _ in range(runs_per_round):
        start = time.perf_counter()
        sess.run(op)
        times[name].append((time.perf_counter() - start) * 1e3)
  return times


def summary_line(costs) -> str:
  """The profile summary's line of the compressors' compute."""
  if costs is None:
    return 'compressors: not measured'
  return 'compressors (ms per step, p10-p90; net of %.3f ms): %s' % (
    costs.baseline_ms,
    ', '.join(
      '%s%s %.3f (%.3f-%.3f)'
      % (
        name,
        costs.rank if catalog.declared(name).two_phase else '',
        c.ms,
        c.ms_p10,
        c.ms_p90,
      )
      for name, c in costs.per_step.items()
    ),
  )
