"""XLA: --xla (auto-clustering for the session) and --xla_compile (per tower).

--xla sets the session's global JIT level (ConfigProto
graph_options.optimizer_options.global_jit_level = ON_1), as the classic
harness did. On a CPU that alone compiles nothing in TensorFlow 2.21: CPU
auto-clustering also needs TF_XLA_FLAGS=--tf_xla_cpu_global_jit, read once
per process before its first session, so the package sets it on import (see
__init__.py; with the JIT level off it changes nothing).

--xla_compile marks every op of a tower's forward and backward pass for
compilation (tf.xla.experimental.jit_scope with compile_ops=True, one scope
for the forward pass and its gradients): the public TF 2.21 way to ask for
it in a graph. The classic harness used tf.xla.experimental.compile, which
cannot take reference variables nor leave the batch-norm statistic updates
to the variable manager. Grappler's remapper would fuse convolutions into
oneDNN kernels that XLA cannot compile and split the tower, so it is off
with --xla_compile (TensorFlow turns it off itself under global JIT).

Initial values and synthetic inputs are never compiled (explicit
_XlaCompile=False): XLA's stateless random ops draw other numbers than
TensorFlow's kernels, and a run's starting point must not depend on XLA.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses

import tensorflow as tf

tf1 = tf.compat.v1

CPU_AUTO_CLUSTERING_FLAG = '--tf_xla_cpu_global_jit'

# The ops TensorFlow runs a compiled cluster with (partition graphs, step
# stats): _XlaCompile/_XlaRun for auto-clustering and jit_scope clusters,
# XlaLaunch for a whole compiled function.
XLA_LAUNCH_OPS = ('_XlaCompile', '_XlaRun', 'XlaLaunch')


def configure_session(config, *, auto_jit: bool, compile_towers: bool):
  """Sets the XLA parts of a session config in place; returns it."""
  if auto_jit:
    config.graph_options.optimizer_options.global_jit_level = (
      tf1.OptimizerOptions.ON_1
    )
  if compile_towers:
    # RewriterConfig.OFF: fused oneDNN kernels would split the cluster.
    config.graph_options.rewrite_options.remapping = 2
  return config


def tower_scope(compile_towers: bool):
  """Context for one tower's forward and backward pass (--xla_compile)."""
  if not compile_towers:
    return contextlib.nullcontext()
  return tf.xla.experimental.jit_scope(
    compile_ops=True, separate_compiled_gradients=False
  )


def not_compiled():
  """Ops made inside are never XLA-compiled (inputs, initial values)."""
  return tf.xla.experimental.jit_scope(compile_ops=False)


@dataclasses.dataclass(frozen=True)
class XlaOps:
  """The XLA launch ops of one step, read from its partition graphs."""

  # device -> number of compiled clusters run there (_XlaCompile/XlaLaunch)
  clusters_by_device: dict
  # device -> {op type: count} of the other ops (what XLA did not take)
  other_ops_by_device: dict

  @property
  def num_clusters(self) -> int:
    return sum(self.clusters_by_device.values())


def xla_ops(run_metadata) -> XlaOps:
  """What a step ran under XLA; run it with output_partition_graphs=True."""
  clusters = collections.Counter()
  others = collections.defaultdict(collections.Counter)
  for graph in run_metadata.partition_graphs:
    for node in graph.node:
      if node.op in ('_XlaCompile', 'XlaLaunch'):
        clusters[node.device] += 1
      elif node.op not in XLA_LAUNCH_OPS:
        others[node.device][node.op] += 1
  return XlaOps(dict(clusters), {d: dict(c) for d, c in others.items()})


def partition_graph_options() -> tf1.RunOptions:
  """RunOptions that return a step's partition graphs (for xla_ops)."""
  return tf1.RunOptions(output_partition_graphs=True)
