"""Tests for variable_mgr/sizes.py and the greedy placer that uses it."""

import pytest
import tensorflow as tf

from tests.device_testing import same_device
from variable_mgr import local
from variable_mgr import sizes

tf1 = tf.compat.v1


@pytest.mark.parametrize(
  'shape,dtype,want',
  [
    ([], tf.float32, 4),
    ([3, 5], tf.float32, 60),
    ((7,), tf.float16, 14),
    (tf.TensorShape([2, 2]), tf.bfloat16, 8),
    ([4], tf.int64, 32),
    ([0, 9], tf.float32, 0),
    # Not fully known: counts nothing, so never "big".
    (None, tf.float32, 0),
    ([None, 10], tf.float32, 0),
    (tf.TensorShape(None), tf.float32, 0),
  ],
)
def test_num_bytes(shape, dtype, want):
  assert sizes.num_bytes(shape, dtype) == want


def test_num_bytes_of_a_reference_dtype_and_a_shape_attribute():
  with tf.Graph().as_default():
    var = tf1.Variable(tf.zeros([3, 4]), use_resource=False)
    assert var.dtype != tf.float32  # float32_ref
    assert sizes.num_bytes(var.shape, var.dtype) == 48
    op = var.op
    assert sizes.num_bytes(op.get_attr('shape'), op.get_attr('dtype')) == 48


@pytest.mark.parametrize(
  'total,parts,want',
  [
    (7, 3, [3, 2, 2]),
    (6, 3, [2, 2, 2]),
    (2, 4, [1, 1, 0, 0]),
    (0, 2, [0, 0]),
    (5, 1, [5]),
  ],
)
def test_even_sizes(total, parts, want):
  got = sizes.even_sizes(total, parts)
  assert got == want and sum(got) == total


def test_placer_gives_the_least_loaded_device():
  placer = local.GreedyVariablePlacer(['/cpu:0', '/cpu:1', '/cpu:2'])
  assert placer.place(100) == '/cpu:0'
  assert placer.place(10) == '/cpu:1'
  assert placer.place(10) == '/cpu:2'
  assert placer.place(5) == '/cpu:1'
  assert placer.place(0) == '/cpu:2'
  assert placer.bytes_on == [100, 15, 10]


def test_placer_device_fn_places_variables_only():
  placer = local.GreedyVariablePlacer(['/cpu:1', '/cpu:2'])
  with tf.Graph().as_default():
    with tf1.device(placer.device_fn('/cpu:0')):
      big = tf1.get_variable('big', shape=[100], use_resource=True)
      small = tf1.get_variable('small', shape=[10], use_resource=True)
      other = tf.identity(big)
  assert same_device(big.device, '/cpu:1')
  assert same_device(small.device, '/cpu:2')
  assert same_device(other.device, '/cpu:0')
  assert placer.bytes_on == [400, 40]
