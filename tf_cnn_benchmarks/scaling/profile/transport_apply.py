"""Optimizer-apply cost on a given device (a ps task's, in the profile).

The model's variables and as many gradients are made on the device, the
run's optimizer (training/optimizers.py) applies the gradients, and a few
traced steps give each apply op's time on that device's own executor.
"""

from __future__ import annotations

import tensorflow as tf

from tf_cnn_benchmarks.scaling.profile import profile_stats as stats
from tf_cnn_benchmarks.scaling.profile import profile_trace
from tf_cnn_benchmarks.training import optimizers
from variable_mgr import sizes as sizes_lib

tf1 = tf.compat.v1


def _apply_graph(device, shapes, optimizer_config):
  """(graph, train op, init op, [(variable op name, bytes)])."""
  graph = tf.Graph()
  with graph.as_default(), tf.device(device):
    variables, grads = [], []
    for k, shape in enumerate(shapes):
      # Reference variables, as the parameter_server manager makes them.
      variables.append(
        tf1.Variable(tf.zeros(shape), name='var%d' % k, use_resource=False)
      )
      grads.append(tf.fill(shape, 1e-3, name='grad%d' % k))
    optimizer = optimizers.optimizer_factory(optimizer_config, 0.01)()
    train = optimizer.apply_gradients(list(zip(grads, variables)))
    init = tf1.global_variables_initializer()
  rows = [
    (v.op.name, sizes_lib.num_bytes(s, tf.float32))
    for v, s in zip(variables, shapes)
  ]
  return graph, train, init, rows


def measure_apply(target, config, device, shapes, optimizer_config, traced=5):
  """[(bytes, apply ms)] per variable shape, medians of traced steps.

  Args:
    target: the session target ('' for in-process).
    config: the session ConfigProto.
    device: where the variables and their apply ops live.
    shapes: the variables' shapes (float32).
    optimizer_config: a training.optimizers.OptimizerConfig.
    traced: traced steps after two untraced ones.
  """
  graph, train, init, rows = _apply_graph(device, shapes, optimizer_config)
  applies = profile_trace.apply_ops(graph)
  seen = {name: [] for name, _ in rows}
  with tf1.Session(target, graph=graph, config=config) as sess:
    sess.run(init)
    sess.run(train)
    sess.run(train)
    for _ in range(traced):
      times = profile_trace.node_times(profile_trace.run_traced(sess, train))
      for name, _ in rows:
        op_name = applies.get(name)
        if op_name in times:
          seen[name].append(times[op_name].busy_us / 1e3)
  return [
    (nbytes, stats.median(seen[name])) for name, nbytes in rows if seen[name]
  ]
