"""Packed transfers: the same values arrive, in fewer cross-device tensors."""

import numpy as np
import tensorflow as tf

from variable_mgr import transfers

tf1 = tf.compat.v1


def _graph_with_cpus(n):
  config = tf1.ConfigProto(device_count={'CPU': n})
  return tf.Graph(), config


def test_packed_transfer_delivers_exact_values_on_the_destination():
  graph, config = _graph_with_cpus(3)
  rng = np.random.default_rng(0)
  values = [
    rng.standard_normal(shape).astype(np.float32)
    for shape in [(3, 3, 2, 4), (4,), (), (5, 2)]
  ]
  with graph.as_default():
    with tf.device('/cpu:0'):
      tensors = [tf.constant(v) for v in values]
      ints = tf.constant([7, 8, 9])
    tensors.append(ints)
    dsts = ['/cpu:1', '/cpu:1', '/cpu:2', '/cpu:1', '/cpu:1']
    out = transfers.packed_transfer(tensors, ['/cpu:0'] * 5, dsts)
    ops = {op.name: op for op in graph.get_operations()}
  # Three float32 tensors for /cpu:1 travel as one concat; the tensor alone
  # in its group (/cpu:2) and the int32 one travel as they are.
  concats = [op for op in ops.values() if op.type == 'ConcatV2']
  assert len(concats) == 1
  assert concats[0].device.endswith('CPU:0')
  assert len(concats[0].inputs) == 3 + 1  # 3 values + the axis
  assert out[2] is tensors[2] and out[4] is tensors[4]
  for i in (0, 1, 3):
    assert out[i].device.endswith('CPU:1')
    assert out[i].shape == values[i].shape
  with tf1.Session(graph=graph, config=config) as sess:
    got = sess.run(out)
  for want, have in zip(values + [np.array([7, 8, 9])], got):
    np.testing.assert_array_equal(have, want)


def test_same_device_and_unknown_shapes_are_left_alone():
  graph = tf.Graph()
  with graph.as_default():
    a = tf.constant([1.0, 2.0])
    b = tf1.placeholder(tf.float32, [None])
    c = tf1.placeholder(tf.float32, [None])
    out = transfers.packed_transfer(
      [a, a, b, c],
      ['/cpu:0', '/cpu:0', '/cpu:0', '/cpu:0'],
      ['/cpu:0', '/cpu:0', '/cpu:1', '/cpu:1'],
    )
  assert out[0] is a and out[1] is a and out[2] is b and out[3] is c
