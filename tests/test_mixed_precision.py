"""fp16 with loss scaling and the inf/nan skip in every manager; bf16."""

import io

import numpy as np
import pytest
import tensorflow as tf

from tests import testing_models
from tests.test_driver import Session
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import params as params_lib
import variable_mgr

tf1 = tf.compat.v1

# Every manager that runs in one process (from the registry).
MANAGERS = variable_mgr.local_names()


def injectable_run(variable_update, **kw):
  testing_models.ensure_injectable_registered()
  p = params_lib.make_params(
    **dict(
      dict(
        model='test_injectable',
        data_name='cifar10',
        device='cpu',
        num_gpus=2,
        batch_size=4,
        variable_update=variable_update,
        optimizer='momentum',
        init_learning_rate=0.1,
        use_fp16=True,
        fp16_enable_auto_loss_scale=True,
        fp16_loss_scale=64.0,
        fp16_inc_loss_scale_every_n=2,
        num_warmup_batches=0,
      ),
      **kw,
    )
  )
  return Session(p)


def poison_tower(run, tower):
  """feed_dict making `tower`'s logits inf (the other towers stay finite)."""
  placeholders = [
    op
    for op in run.built.graph.get_operations()
    if op.type == 'PlaceholderWithDefault'
    and op.name.endswith(testing_models.INJECT_NAME)
  ]
  assert len(placeholders) == 2
  return {
    sorted(placeholders, key=lambda op: op.name)[tower].outputs[0]: np.inf
  }


def state(run):
  """Every global variable except the loss-scale state, by name."""
  with run.built.graph.as_default():
    variables = [
      v
      for v in tf1.global_variables()
      if not v.op.name.startswith('loss_scale_state/')
    ]
  return dict(zip([v.op.name for v in variables], run.sess.run(variables)))


def scale_and_skips(run):
  report = run.sess.run(run.built.report)
  return float(report['loss_scale']), int(report['skipped_steps'])


@pytest.mark.parametrize('variable_update', MANAGERS)
@pytest.mark.parametrize('poisoned_tower', [0, 1])
def test_inf_step_moves_nothing_and_halves_the_scale(
  variable_update, poisoned_tower
):
  run = injectable_run(variable_update)
  run.step(2)  # 2 finite steps: the scale doubles once
  assert scale_and_skips(run) == (128.0, 0)
  before = state(run)
  assert any('Momentum' in name for name in before)  # slots exist and count
  run.sess.run(run.built.step_op, feed_dict=poison_tower(run, poisoned_tower))
  after = state(run)
  assert sorted(after) == sorted(before)
  for name, value in before.items():
    np.testing.assert_array_equal(after[name], value, err_msg=name)
  assert scale_and_skips(run) == (64.0, 1)
  run.step(1)  # trains again ...
  trained = state(run)
  assert any(
    not np.array_equal(trained[k], before[k])
    for k in before
    if k != 'global_step'
  )
  assert trained['global_step'] == before['global_step'] + 1
  assert scale_and_skips(run) == (64.0, 1)
  run.step(1)  # ... and doubles after 2 finite steps
  assert scale_and_skips(run) == (128.0, 1)
  run.close()


def test_huge_initial_scale_is_halved_until_steps_are_finite(tmp_path):
  testing_models.ensure_injectable_registered()
  p = params_lib.make_params(
    model='test_injectable',
    data_name='cifar10',
    device='cpu',
    num_gpus=2,
    batch_size=4,
    variable_update='replicated',
    use_fp16=True,
    fp16_enable_auto_loss_scale=True,
    fp16_loss_scale=1e30,
    init_learning_rate=0.1,
    num_batches=120,
    num_warmup_batches=0,
    display_every=1000,
    result_file=str(tmp_path / 'r.jsonl'),
  )
  result = benchmark_cnn.run_benchmark(p, out=io.StringIO()).to_record()
  assert result['precision'] == 'float16'
  skipped = result['skipped_steps']
  # Each skip halves the scale exactly, and nothing else changes it here.
  assert result['loss_scale'] == pytest.approx(1e30 / 2**skipped)
  assert 60 < skipped < 120
  losses = np.array(result['losses'])
  assert np.all(losses[:skipped] == losses[0])  # skipped steps: no update
  assert losses[-1] < losses[0]


@pytest.mark.parametrize(
  'precision',
  [
    dict(use_fp16=True),
    dict(use_fp16=True, fp16_vars=True),
    dict(use_bf16=True),
  ],
)
def test_16_bit_lenet_follows_float32(precision):
  common = dict(
    model='lenet',
    device='cpu',
    num_gpus=2,
    # Small: CPU fp16 kernels are slow (about 3 s a step at batch 8).
    batch_size=4,
    variable_update='replicated',
    init_learning_rate=0.01,
    num_batches=5,
    num_warmup_batches=1,
    display_every=100,
  )

  def losses(**kw):
    p = params_lib.make_params(**dict(common, **kw))
    return np.array(benchmark_cnn.run_benchmark(p, out=io.StringIO()).losses)

  reference = losses()
  assert reference[-1] < reference[0] - 0.1
  np.testing.assert_allclose(losses(**precision), reference, rtol=3e-2)


@pytest.mark.parametrize(
  'flags,message',
  [
    (dict(use_fp16=True, use_bf16=True), 'choose one'),
    (dict(fp16_vars=True), 'only with --use_fp16'),
    (dict(fp16_enable_auto_loss_scale=True), 'only with --use_fp16'),
    (dict(fp16_loss_scale=8.0), 'only with --use_fp16'),
    (dict(use_fp16=True, fp16_loss_scale=0.0), '--fp16_loss_scale'),
    (
      dict(
        use_fp16=True, fp16_enable_auto_loss_scale=True, use_resource_vars=False
      ),
      'resource variables',
    ),
  ],
)
def test_bad_precision_flags(flags, message):
  with pytest.raises(params_lib.ParamsError, match=message):
    params_lib.make_params(device='cpu', **flags)
