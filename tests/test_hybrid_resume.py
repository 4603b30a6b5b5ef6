"""hybrid resumes another mode's checkpoint exactly (issue 29, item 17).

hybrid's ps-held variables have their own optimizer, whose non-slot state
(Adam's beta powers) is saved under 'ps_optimizer/'; a checkpoint of another
mode holds one set of beta powers under the plain names. Resumed without
them, the ps group's bias correction started again at step 1.
"""

import numpy as np
import pytest
import tensorflow as tf

from tests.test_distributed import LINEAR
from tests.test_distributed import TASKS
from tests.test_distributed import B
from tests.test_distributed import launch_ok
from tests.test_distributed import local_losses
from tests.test_distributed import worker_losses

ADAM = [
  f for f in LINEAR if not f.startswith(('--num_batches', '--optimizer'))
] + ['--optimizer=adam', '--num_warmup_batches=0']


def _local(train_dir, num_batches):
  """Losses of `num_batches` local steps (one tower x 2B), in train_dir."""
  return local_losses(
    batch_size=2 * B,
    optimizer='adam',
    num_batches=num_batches,
    num_warmup_batches=0,
    train_dir=str(train_dir),
  )


def _hybrid(tmp_path, name, train_dir, num_batches, threshold):
  """The cluster's losses of a 2-worker hybrid run in train_dir."""
  run_dir = tmp_path / name
  run_dir.mkdir()
  _, records = launch_ok(
    run_dir,
    2,
    ADAM
    + [
      '--variable_update=hybrid',
      '--hybrid_threshold_bytes=%d' % threshold,
      '--num_batches=%d' % num_batches,
      '--train_dir=%s' % train_dir,
    ],
    launcher_flags=TASKS['hybrid'],
    every_worker_reports=True,
    timeout=150,
  )
  return sum(worker_losses(records, 2)) / 2


def _whole():
  return local_losses(
    batch_size=2 * B, optimizer='adam', num_batches=5, num_warmup_batches=0
  )


@pytest.mark.slow  # a cluster
def test_hybrid_resumes_a_local_adam_checkpoint_exactly(tmp_path):
  """3 local steps, then 2 hybrid steps (weights on the ps, biases
  all-reduced) == 5 local steps."""
  train_dir = tmp_path / 'train'
  whole = _whole()
  np.testing.assert_allclose(_local(train_dir, 3), whole[:3], rtol=1e-6)
  then = _hybrid(tmp_path, 'then', train_dir, 2, threshold=100)
  np.testing.assert_allclose(then, whole[3:], rtol=1e-5)


@pytest.mark.slow
def test_local_run_resumes_a_hybrid_adam_checkpoint_exactly(tmp_path):
  """Every variable on the ps (only the ps optimizer's beta powers are
  saved): 3 hybrid steps, then 2 local steps == 5 local steps."""
  train_dir = tmp_path / 'train'
  whole = _whole()
  first = _hybrid(tmp_path, 'first', train_dir, 3, threshold=1)
  np.testing.assert_allclose(first, whole[:3], rtol=1e-5)
  names = tf.train.load_checkpoint(str(train_dir)).get_variable_to_shape_map()
  assert 'beta1_power' not in names, sorted(names)
  np.testing.assert_allclose(_local(train_dir, 2), whole[3:], rtol=1e-5)
