"""Replicated training through every all-reduce algorithm and batch option."""

import io

import numpy as np
import pytest

from tests.test_driver import Session
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import params as params_lib
from variable_mgr import allreduce

COMMON = dict(
  model='lenet',
  device='cpu',
  variable_update='replicated',
  num_gpus=3,
  batch_size=4,
  optimizer='momentum',
  init_learning_rate=0.005,
  num_batches=4,
  num_warmup_batches=1,
  display_every=100,
)


def losses(**kw):
  p = params_lib.make_params(**dict(COMMON, **kw))
  return np.array(benchmark_cnn.run_benchmark(p, out=io.StringIO()).losses)


@pytest.fixture(scope='module')
def reference():
  return losses()


CPU_SPECS = list(allreduce.algorithm_names(cpu_only=True)) + [
  'xring#2',
  'pscpu:2k:rechd',
  'shuffle#2:64k:collective',
]


@pytest.mark.parametrize('spec', CPU_SPECS)
def test_every_algorithm_trains_like_the_copy_reduction(spec, reference):
  assert abs(reference[-1] - reference[0]) > 1e-3
  np.testing.assert_allclose(losses(all_reduce_spec=spec), reference, rtol=1e-5)


@pytest.mark.parametrize(
  'options',
  [
    dict(gradient_repacking=1),
    dict(gradient_repacking=3),
    dict(all_reduce_spec='xring', gradient_repacking=2),
    dict(agg_small_grads_max_bytes=4096, agg_small_grads_max_group=3),
    dict(all_reduce_spec='collective', allreduce_merge_scope=4),
  ],
)
def test_batch_options_train_like_the_plain_reduction(options, reference):
  np.testing.assert_allclose(losses(**options), reference, rtol=1e-5)


def test_relaxed_consistency_applies_gradients_one_step_late():
  p = params_lib.make_params(
    **dict(COMMON, variable_consistency='relaxed', optimizer='sgd')
  )
  run = Session(p)
  initial = run.values('v0/')
  run.step()  # applies the (zero) gradients of "step 0"
  after_one = run.values('v0/')
  for name, value in initial.items():
    # The one-step-delay stores ('.../delayed') hold step 1's gradients.
    if name != 'global_step' and not name.endswith('/delayed'):
      np.testing.assert_array_equal(after_one[name], value, err_msg=name)
  run.step()  # applies step 1's gradients
  after_two = run.values('v0/')
  assert any(not np.array_equal(after_two[k], initial[k]) for k in initial)
  run.close()
  trained = losses(variable_consistency='relaxed', num_batches=10)
  assert np.all(np.isfinite(trained)) and trained[-1] < trained[0]


@pytest.mark.parametrize(
  'flags,message',
  [
    (dict(all_reduce_spec='xring:12q:pscpu'), 'position 6'),
    (dict(all_reduce_spec='ring'), 'ring'),
    (dict(all_reduce_spec='nccl'), 'needs GPUs'),
    (dict(all_reduce_spec='pscpu/nccl'), 'needs GPUs'),
    (
      dict(variable_update='parameter_server', all_reduce_spec='xring'),
      'only used by',
    ),
    (
      dict(variable_update='independent', variable_consistency='relaxed'),
      'only used by',
    ),
    (dict(gradient_repacking=2, agg_small_grads_max_bytes=10), 'not both'),
    (dict(gradient_repacking=-1), '--gradient_repacking'),
    (dict(allreduce_merge_scope=0), '--allreduce_merge_scope'),
  ],
)
def test_bad_all_reduce_flags_are_refused(flags, message):
  with pytest.raises(params_lib.ParamsError, match=message):
    params_lib.make_params(**dict(COMMON, **flags))
