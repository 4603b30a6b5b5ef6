"""Transport microbenchmarks: one message's time, free of session overhead.

Each measurement is a chain of hops in one graph: a tensor passed back and
forth between two devices (gRPC tasks, or logical CPUs in one process), or
summed by H all-reduces in a row. One session.run of the chain costs the
run's overhead plus H hops, so runs with a short chain and with H more hops
are interleaved, and (long - short) / H is one hop's time. Grappler is off
in these sessions so that it cannot fold the identities of a chain away.

Used in the measuring task (transport_task.py) with its servers up.
"""

from __future__ import annotations

import dataclasses
import time

import tensorflow as tf

from tf_cnn_benchmarks.scaling.profile import profile_stats as stats
from variable_mgr import allreduce

tf1 = tf.compat.v1


def sizes_up_to(max_bytes: int) -> tuple:
  """Message sizes 64 B, 256 B, ... (by 4x) up to `max_bytes`."""
  return tuple(s for s in (64 * 4**k for k in range(16)) if s <= max_bytes)


# Message sizes profiled by default: 64 B .. 64 MiB, by 4x.
DEFAULT_SIZES = sizes_up_to(64 << 20)


@dataclasses.dataclass(frozen=True)
class HopSample:
  """One message size's hop time over the interleaved repeats (us)."""

  nbytes: int
  median_us: float
  p10_us: float
  p90_us: float
  # The mean of the (unclamped) differences: what every run pays on
  # average, for a figure added to each step (the controller's).
  mean_us: float = 0.0


def plain_config(config=None):
  """`config` (or a new one) with grappler off: chains stay as built."""
  config = config or tf1.ConfigProto()
  config.graph_options.rewrite_options.disable_meta_optimizer = True
  return config


def _elements(nbytes: int) -> int:
  return max(1, nbytes // 4)  # float32 elements


def source_variable(nbytes: int, device: str):
  """A float32 variable of `nbytes` on `device` (the chain's start)."""
  with tf.device(device):
    return tf.Variable(tf.zeros([_elements(nbytes)], tf.float32))


def tip(tensor):
  """One element of `tensor`, on its device: the fetch ends there."""
  with tf.device(tensor.device):
    return tf.slice(tensor, [0], [1])


def pass_chain(start, devices, hops: int):
  """`start` passed `hops` times, device to device round `devices`."""
  x = tf.convert_to_tensor(start)
  for h in range(hops):
    with tf.device(devices[(h + 1) % len(devices)]):
      x = tf.identity(x)
  return tip(x)


def reduce_chain(starts, devices, rounds: int):
  """`rounds` collective all-reduces in a row over `devices` (the
  harness's collective algorithm); fetches one element of each output."""
  xs = [tf.convert_to_tensor(s) for s in starts]
  for _ in range(rounds):
    xs = allreduce.collective_all_reduce(xs, devices)
  return tf.group(*[tip(x) for x in xs])


def _run_ms(sess, fetch) -> float:
  start = time.perf_counter()
  sess.run(fetch)
  return (time.perf_counter() - start) * 1e3


def hop_sample(sess, short, long, extra_hops: int, reps: int, nbytes: int):
  """The HopSample of (long - short) / extra_hops over interleaved runs."""
  for fetch in (short, long):  # first runs build the executors
    sess.run(fetch)
    sess.run(fetch)
  diffs = []
  for _ in range(reps):
    t_short = _run_ms(sess, short)
    t_long = _run_ms(sess, long)
    diffs.append((t_long - t_short) * 1e3 / extra_hops)
  per_hop = [max(0.0, d) for d in diffs]
  return HopSample(
    nbytes,
    stats.median(per_hop),
    stats.percentile(per_hop, 10),
    stats.percentile(per_hop, 90),
    max(0.0, sum(diffs) / len(diffs)),
  )


def plan_for(nbytes: int) -> tuple:
  """(extra hops, repeats) for a message size: fewer for big messages."""
  if nbytes >= 4 << 20:
    return 2, 5
  if nbytes >= 256 << 10:
    return 8, 9
  # Small messages: enough hops that they, not the noise of session.run
  # on a loaded machine, make the difference.
  return 64, 15


def measure_pass(target, config, devices, sizes) -> list:
  """HopSamples of passing tensors between `devices` (a chain per size).

  The first hop reads a variable on devices[0] from devices[1]; later ones
  alternate direction.
  """
  out = []
  for nbytes in sizes:
    extra, reps = plan_for(nbytes)
    graph = tf.Graph()
    with graph.as_default():
      source = source_variable(nbytes, devices[0])
      short = pass_chain(source, devices, 1)
      long = pass_chain(source, devices, 1 + 2 * (extra // 2 or 1))
      init = tf1.global_variables_initializer()
    hops = 2 * (extra // 2 or 1)
    with tf1.Session(target, graph=graph, config=config) as sess:
      sess.run(init)
      out.append(hop_sample(sess, short, long, hops, reps, nbytes))
  return out


def measure_collective(target, config, devices, sizes) -> list:
  """HopSamples of one collective all-reduce over `devices` per size.

  One graph holds every size's chains: the tasks remember collective
  instance keys across graphs, and one graph's allocator never repeats one.
  """
  graph = tf.Graph()
  chains = []
  with graph.as_default():
    for nbytes in sizes:
      extra, reps = plan_for(nbytes)
      sources = [source_variable(nbytes, d) for d in devices]
      chains.append(
        (
          reduce_chain(sources, devices, 1),
          reduce_chain(sources, devices, 1 + extra),
          extra,
          reps,
          nbytes,
        )
      )
    init = tf1.global_variables_initializer()
  with tf1.Session(target, graph=graph, config=config) as sess:
    sess.run(init)
    return [hop_sample(sess, *chain) for chain in chains]


def measure_controller_step(target, config, remote_devices, reps=100):
  """The HopSample (bytes 0) of what one step driven from this process over
  `remote_devices` costs beyond a step of this process alone.

  A one-graph manager's controller starts every step on every worker
  (RunGraph over gRPC) and waits for all of them; a worker's own session
  does not. The long step adds 1 to a variable on each remote device, the
  short one on this task's CPU (the master runs here, so its partition
  needs no RPC).
  """
  graph = tf.Graph()
  with graph.as_default():
    here = source_variable(4, '/job:worker/replica:0/task:0/device:CPU:0')
    short = tf1.assign_add(here, tf.ones_like(here)).op
    remote = [source_variable(4, d) for d in remote_devices]
    long = tf.group(*[tf1.assign_add(v, tf.ones_like(v)) for v in remote])
    init = tf1.global_variables_initializer()
  with tf1.Session(target, graph=graph, config=config) as sess:
    sess.run(init)
    return hop_sample(sess, short, long, 1, reps, 0)
