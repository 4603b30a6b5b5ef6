"""Tests for variable_mgr/relaxed.py (the one-step delay of relaxed mode)."""

import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.device_testing import cpu_devices
from tests.device_testing import same_device
from tests.device_testing import session_config
from tests.test_batch_allreduce import GRADS
from tests.test_batch_allreduce import batch_all_reduce
from tests.test_batch_allreduce import exact_sums
from tests.test_batch_allreduce import feed_dict
from tests.test_batch_allreduce import make_inputs
from tests.test_batch_allreduce import make_values
from tests.test_batch_allreduce import tolerance
from variable_mgr import relaxed  # pylint: disable=g-import-not-at-top

tf1 = tf.compat.v1


def defer_one_step(tower_tensors, devices):
  """(last step's values, op storing this step's) per tower/device.

  Step 1 yields zeros; step k yields the values given at step k-1.
  """
  delay = relaxed.OneStepDelay(tower_tensors, devices)
  return delay.delayed, delay.update_op


def test_defer_one_step():
  n = 3
  rng = np.random.default_rng(11)
  steps = [make_values(rng, n) for _ in range(3)]
  g = tf.Graph()
  with g.as_default():
    towers, phs = make_inputs(n)
    reduced = batch_all_reduce(towers, cpu_devices(n), 'xring', num_packs=2)
    delayed, update_op = defer_one_step(reduced, cpu_devices(n))
    local_vars = tf1.local_variables()
    init = tf1.local_variables_initializer()
  assert len(local_vars) == n * len(GRADS)
  assert not g.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES)
  assert not g.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES)
  for i, tower in enumerate(delayed):
    for t, (shape, dtype) in zip(tower, GRADS):
      assert same_device(t.device, cpu_devices(n)[i])
      assert t.dtype == dtype and t.shape == shape
  with tf1.Session(graph=g, config=session_config(n)) as sess:
    sess.run(init)
    seen = [sess.run([delayed, update_op], feed_dict(phs, v))[0] for v in steps]
  for i in range(n):
    for j, (shape, dtype) in enumerate(GRADS):
      np.testing.assert_array_equal(seen[0][i][j], np.zeros(shape))
      for step in (1, 2):
        want = exact_sums(steps[step - 1])[j]
        np.testing.assert_allclose(
          seen[step][i][j].astype(np.float64),
          want,
          atol=tolerance(dtype, n, {}) + 1e-12,
        )


def test_one_step_delay_object():
  with tf.Graph().as_default():
    towers, _ = make_inputs(2)
    delay = relaxed.OneStepDelay(towers, cpu_devices(2))
    assert sum(len(variables) for variables in delay.variables) == 2 * len(
      GRADS
    )
    for i, variables in enumerate(delay.variables):
      for v in variables:
        assert same_device(v.device, cpu_devices(2)[i])
        assert not v.trainable
    assert delay.update_op.type == 'NoOp'


def test_one_step_delay_needs_a_device_per_tower():
  with tf.Graph().as_default():
    towers, _ = make_inputs(2)
    with pytest.raises(ValueError, match='2 towers for 3 devices'):
      relaxed.OneStepDelay(towers, cpu_devices(3))


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q'] + sys.argv[1:]))
