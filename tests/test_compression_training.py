"""--gradient_compression in training runs: resume, exactness, refusals,
and a 2-worker collective run against a local one.

The compressors come from the registry (variable_mgr/compression); the
managers that reduce gradients from the manager registry.
"""

import numpy as np
import pytest
import tensorflow as tf

from tests import helpers
from tests import test_distributed
from tests.helpers import LINEAR_ON_CPU
from tf_cnn_benchmarks.config import params as params_lib
import variable_mgr
from variable_mgr.compression import catalog
from variable_mgr.compression import registry

pytestmark = pytest.mark.usefixtures('test_models_registered')

LINEAR = dict(
  **LINEAR_ON_CPU,
  optimizer='momentum',
  init_learning_rate=0.1,
  num_warmup_batches=0,
  display_every=100,
  batch_size=4,
)
LOSSY = [n for n in registry.names() if not catalog.declared(n).exact]
EXACT = [n for n in registry.names() if catalog.declared(n).exact]
STATEFUL = [n for n in registry.names() if catalog.declared(n).error_feedback]


def run(**kw):
  return helpers.run_in_process(**{**LINEAR, **kw})


def _reducing_local_managers():
  return [
    n
    for n in variable_mgr.local_names()
    if variable_mgr.catalog.MANAGERS[n].shares_gradients
  ]


def _fits(manager, compressor) -> bool:
  """Whether resolution accepts the pair (powersgd needs an all-reduce)."""
  if not catalog.declared(compressor).two_phase:
    return True
  return variable_mgr.get(manager).traits.all_reduce


CASES = [
  (m, c) for m in _reducing_local_managers() for c in STATEFUL if _fits(m, c)
]


@pytest.mark.parametrize('manager,compression', CASES)
def test_resume_with_compression_state_is_exact(tmp_path, manager, compression):
  """3 steps, checkpoint, 3 resumed == 6 in one run, with the error
  buffers (and PowerSGD's Q) saved and restored; the state is not zero,
  and the run differs from an uncompressed one (the state matters)."""
  flags = dict(
    variable_update=manager, num_gpus=2, gradient_compression=compression
  )
  whole = run(num_batches=6, **flags)
  plain = run(num_batches=6, variable_update=manager, num_gpus=2)
  train_dir = str(tmp_path / 'train')
  run(num_batches=3, train_dir=train_dir, **flags)
  part2 = run(num_batches=3, train_dir=train_dir, **flags)
  assert part2.training.start_step == 3
  np.testing.assert_allclose(part2.losses, whole.losses[3:], rtol=1e-6)
  assert np.abs(np.array(whole.losses) - plain.losses).max() > 0
  reader = tf.train.load_checkpoint(train_dir)
  saved = reader.get_variable_to_shape_map()
  errors = [n for n in saved if n.startswith('gradient_compression/')]
  # Every replica's buffer of every gradient it compresses: PowerSGD
  # sends the biases (a vector) as they are.
  compressed = 1 if catalog.declared(compression).two_phase else 2
  assert len(errors) == 2 * compressed, sorted(saved)
  assert any(np.abs(reader.get_tensor(n)).max() > 0 for n in errors)
  if compression == 'powersgd':
    assert 'linear/weights/powersgd_q' in saved


@pytest.mark.parametrize('compression', EXACT)
def test_two_towers_train_like_one_double_batch(compression):
  """1 x 2B == 2 x B where the compressor is exact."""
  two = run(
    num_batches=4,
    num_gpus=2,
    variable_update='replicated',
    gradient_compression=compression,
  )
  one = run(
    num_batches=4,
    num_gpus=1,
    batch_size=8,
    variable_update='replicated',
    gradient_compression=compression,
  )
  np.testing.assert_allclose(two.losses, one.losses, rtol=1e-6)


@pytest.mark.parametrize('compression', LOSSY)
def test_lossy_compressors_train(compression):
  """Each lossy compressor lowers test_linear's loss at every step (one
  batch, a convex loss), on a path of its own (not the uncompressed one)."""
  flags = dict(num_batches=10, num_gpus=2, variable_update='replicated')
  plain = run(**flags)
  lossy = run(gradient_compression=compression, **flags)
  assert (np.diff(lossy.losses) < 0).all(), lossy.losses
  assert np.abs(np.array(lossy.losses) - plain.losses).max() > 0


REFUSED = [
  (
    dict(variable_update='parameter_server', gradient_compression='powersgd'),
    '--gradient_compression=powersgd: needs a manager that all-reduces',
  ),
  (
    dict(variable_update='independent', gradient_compression='fp16'),
    '--gradient_compression=fp16: --variable_update=independent reduces no',
  ),
  (
    dict(gradient_compression='fp16', powersgd_rank=2),
    '--powersgd_rank: only with --gradient_compression=powersgd',
  ),
  (
    dict(
      variable_update='replicated',
      gradient_compression='powersgd',
      powersgd_rank=0,
    ),
    '--powersgd_rank=0: must be >= 1',
  ),
]


@pytest.mark.parametrize('flags,says', REFUSED)
def test_bad_combinations_are_refused(flags, says):
  with pytest.raises(params_lib.ParamsError) as info:
    params_lib.make_params(**LINEAR, **flags)
  assert str(info.value).startswith(says)


def test_a_refusal_is_one_line_and_exit_2():
  flags, says = REFUSED[0]
  status, lines = helpers.cli_status(
    *helpers.TRIVIAL_FLAGS,
    '--num_batches=1',
    *('--%s=%s' % item for item in flags.items()),
  )
  assert status == 2
  assert len(lines) == 1 and lines[0].startswith('error: ' + says), lines


@pytest.mark.slow
def test_two_collective_workers_train_like_a_local_run(tmp_path):
  """2 workers x 1 tower with powersgd (two phases of collectives, Q
  broadcast) == one process x 2 towers with powersgd."""
  flags = ['--gradient_compression=powersgd', '--powersgd_rank=2']
  out, records = test_distributed.launch_ok(
    tmp_path,
    2,
    test_distributed.LINEAR
    + ['--variable_update=collective_all_reduce']
    + flags,
    launcher_flags=test_distributed.TASKS['collective_all_reduce'],
    every_worker_reports=True,
  )
  per_worker = test_distributed.worker_losses(records, 2)
  expected = test_distributed.local_losses(
    variable_update='replicated',
    num_gpus=2,
    batch_size=test_distributed.B,
    gradient_compression='powersgd',
    powersgd_rank=2,
  )
  plain = test_distributed.local_losses(
    variable_update='replicated', num_gpus=2, batch_size=test_distributed.B
  )
  mean = (per_worker[0] + per_worker[1]) / 2
  np.testing.assert_allclose(mean, expected, rtol=1e-5)
  assert np.abs(mean - plain).max() > 0
  assert records[0]['gradient_compression'] == 'powersgd'


@pytest.mark.parametrize('compression', STATEFUL)
def test_overflowing_steps_are_skipped_and_leave_the_state_finite(
  tmp_path, compression
):
  """fp16 with an automatic loss scale that starts far too high: the
  reduced, decompressed gradients of the first steps hold inf, the loss
  scale's check skips them, and the compressor's state stays finite (a
  poisoned error buffer would make every later step inf too)."""
  flags = dict(
    use_fp16=True,
    fp16_enable_auto_loss_scale=True,
    fp16_loss_scale=2.0**30,
    fp16_inc_loss_scale_every_n=3,
    variable_update='replicated',
    num_gpus=2,
    gradient_compression=compression,
  )
  train_dir = str(tmp_path / 'train')
  result = run(num_batches=40, train_dir=train_dir, **flags)
  plain = run(num_batches=40, **dict(flags, gradient_compression='none'))
  skipped = result.precision_info.skipped_steps
  assert skipped > 0
  assert skipped == plain.precision_info.skipped_steps
  assert np.isfinite(result.losses).all()
  assert result.losses[-1] < result.losses[0]
  reader = tf.train.load_checkpoint(train_dir)
  state = [
    reader.get_tensor(n)
    for n in reader.get_variable_to_shape_map()
    if n.startswith('gradient_compression/') or n.endswith('powersgd_q')
  ]
  assert state and all(np.isfinite(s).all() for s in state)


# One mode per cluster manager (parameter_server over two ps tasks, its
# weights split over both; hybrid with its weights on the ps).
CLUSTER_MODES = [
  m for k, m in enumerate(test_distributed.MODES) if k in (0, 2, 3, 4, 5)
]


def test_cluster_modes_cover_every_cluster_manager():
  assert sorted(m[0] for m in CLUSTER_MODES) == variable_mgr.cluster_names()


@pytest.mark.slow
@pytest.mark.parametrize('mode,launcher_flags,extra', CLUSTER_MODES)
def test_every_cluster_manager_trains_with_a_cast(
  tmp_path, mode, launcher_flags, extra
):
  """fp16_ef in each cluster manager (its error buffers on every worker):
  the cluster's losses stay within float16's rounding (relative 2^-11 per
  gradient) of an uncompressed local run of the same global batch."""
  one_graph = mode == 'distributed_all_reduce'
  out, records = test_distributed.launch_ok(
    tmp_path,
    2,
    test_distributed.LINEAR
    + ['--variable_update=' + mode, '--gradient_compression=fp16_ef']
    + extra,
    launcher_flags=launcher_flags,
    every_worker_reports=not one_graph,
  )
  assert {r['gradient_compression'] for r in records} == {'fp16_ef'}
  expected = test_distributed.local_losses(batch_size=2 * test_distributed.B)
  if one_graph:
    losses = np.array(records[0]['losses'])
  else:
    per_worker = test_distributed.worker_losses(records, 2)
    losses = (per_worker[0] + per_worker[1]) / 2
  np.testing.assert_allclose(losses, expected, rtol=2.0**-11)
