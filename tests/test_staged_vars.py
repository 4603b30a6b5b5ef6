"""--staged_vars: parameter_server with variables staged ahead of the step.

The losses of a staged run are checked against a float64 numpy simulation of
the classic staged pipeline (see variable_mgr/staged.py for its derivation):
step t's forward pass reads the values staged by step t-1 (step 0: V_0),
and step t applies the gradients of step t-1's forward pass (step 0 its
own), so with V_t the variables when step t starts:

  loss_t = L(V_{max(t-1, 0)}),
  V_1 = V_0 - lr g(V_0),  V_{t+1} = V_t - lr g(V_{max(t-2, 0)}).
"""

import io

import numpy as np
import pytest
import tensorflow as tf

from tests import testing_models
from tests.test_numpy_reference import LEARNING_RATES
from tests.test_numpy_reference import NUM_CLASSES
from tests.test_numpy_reference import PER_DEVICE_BATCH
from tests.test_numpy_reference import SEED
from tests.test_numpy_reference import STEPS
from tests.test_numpy_reference import WEIGHT_DECAY
from tests.test_numpy_reference import NumpyOptimizer
from tests.test_numpy_reference import simulate
from tests.test_numpy_reference import synthetic_global_batch
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import params as params_lib
import variable_mgr
from variable_mgr import staged

tf1 = tf.compat.v1


def loss_and_grads(x, onehot, w, b):
  """Mean cross-entropy + L2 of the linear model, and its gradients."""
  logits = x @ w + b
  logits -= logits.max(axis=1, keepdims=True)
  probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
  xent = -np.mean(np.log((probs * onehot).sum(axis=1)))
  loss = xent + WEIGHT_DECAY * 0.5 * ((w * w).sum() + (b * b).sum())
  dlogits = (probs - onehot) / len(x)
  return (
    loss,
    x.T @ dlogits + WEIGHT_DECAY * w,
    dlogits.sum(0) + WEIGHT_DECAY * b,
  )


def simulate_staged(optimizer, num_towers):
  """The losses of the classic staged pipeline, in float64."""
  images, labels = synthetic_global_batch(PER_DEVICE_BATCH * num_towers)
  x = images.reshape(len(images), -1).astype(np.float64)
  onehot = np.eye(NUM_CLASSES)[labels]
  values = [testing_models.linear_initial_weights(x.shape[1], NUM_CLASSES)]
  opt = NumpyOptimizer(optimizer, LEARNING_RATES[optimizer])
  losses, grads = [], []
  for t in range(STEPS):
    read = values[max(t - 1, 0)]  # staged by the previous step
    loss, grad_w, grad_b = loss_and_grads(x, onehot, *read)
    losses.append(loss)
    grads.append((grad_w, grad_b))
    apply_w, apply_b = grads[max(t - 1, 0)]  # the previous step's gradients
    opt.t += 1
    w, b = values[t]
    values.append((opt.step('w', w, apply_w), opt.step('b', b, apply_b)))
  return np.array(losses)


def run_losses(optimizer, num_towers, **flags):
  testing_models.ensure_registered()
  p = params_lib.make_params(
    model='test_linear',
    data_name='cifar10',
    device='cpu',
    num_gpus=num_towers,
    batch_size=PER_DEVICE_BATCH,
    variable_update='parameter_server',
    optimizer=optimizer,
    init_learning_rate=LEARNING_RATES[optimizer],
    weight_decay=WEIGHT_DECAY,
    num_batches=STEPS - 1,
    num_warmup_batches=1,
    tf_random_seed=SEED,
    **flags,
  )
  result = benchmark_cnn.run_benchmark(p, out=io.StringIO())
  return np.array(result.losses)


@pytest.mark.parametrize(
  'optimizer,num_towers,flags',
  [
    ('sgd', 1, {'staged_vars': True}),
    ('momentum', 2, {'staged_vars': True}),
    ('adam', 3, {'staged_vars': True, 'use_resource_vars': True}),
    ('sgd', 2, {'staged_vars': True, 'local_parameter_device': 'gpu'}),
  ],
)
def test_staged_losses_match_the_numpy_pipeline(optimizer, num_towers, flags):
  expected = simulate_staged(optimizer, num_towers)
  unstaged = simulate(optimizer, num_towers)
  # The pipeline must differ from plain training, or this proves nothing.
  assert np.abs(expected - unstaged).max() > 1e-3
  actual = run_losses(optimizer, num_towers, **flags)
  assert len(actual) == STEPS
  np.testing.assert_allclose(actual, expected, rtol=1e-5)


def test_unstaged_run_is_plain_training():
  np.testing.assert_allclose(
    run_losses('sgd', 2, staged_vars=False), simulate('sgd', 2), rtol=1e-5
  )


def test_the_setting_selects_the_staged_manager():
  p = params_lib.make_params(model='trivial', device='cpu', staged_vars=True)
  cls = variable_mgr.select('parameter_server', p)
  assert cls is staged.StagedParameterServer
  assert cls.name == 'parameter_server'
  assert variable_mgr.setting_variants() == {'staged_vars': cls}
  plain = params_lib.make_params(model='trivial', device='cpu')
  assert variable_mgr.select('parameter_server', plain) is not cls
  # The same choice from the run's ManagerSettings (how the driver builds).
  settings = variable_mgr.ManagerSettings(staged_vars=True)
  assert variable_mgr.select('parameter_server', settings) is cls


def test_one_registry_entry_holds_every_parameter_server_class():
  from variable_mgr import distributed  # pylint: disable=g-import-not-at-top
  from variable_mgr import local  # pylint: disable=g-import-not-at-top
  from variable_mgr import registry  # pylint: disable=g-import-not-at-top

  entry = registry.Entry(
    manager=local.ParameterServer,
    cluster=distributed.ClusterParameterServer,
    variants=(('staged_vars', staged.StagedParameterServer),),
  )
  assert registry._ENTRIES['parameter_server'] == entry  # pylint: disable=protected-access
  in_cluster = variable_mgr.select('parameter_server', None, in_cluster=True)
  assert in_cluster is distributed.ClusterParameterServer
  assert variable_mgr.get('parameter_server') is local.ParameterServer
  with pytest.raises(ValueError, match="unknown variable manager 'nope'"):
    variable_mgr.select('nope')


def _refused(**flags):
  with pytest.raises(params_lib.ParamsError) as e:
    params_lib.make_plan(model='trivial', staged_vars=True, **flags)
  return str(e.value)


def test_refused_outside_local_parameter_server_training():
  assert _refused(device='cpu', variable_update='replicated') == (
    '--staged_vars: only with --variable_update=parameter_server'
  )
  assert 'training runs only' in _refused(device='cpu', forward_only=True)
  assert 'training runs only' in _refused(device='cpu', eval=True)
  assert 'fp16_enable_auto_loss_scale' in _refused(
    device='cpu', use_fp16=True, fp16_enable_auto_loss_scale=True
  )
  assert _refused(
    device='cpu',
    job_name='worker',
    task_index=0,
    worker_hosts='127.0.0.1:2000',
    ps_hosts='127.0.0.1:2001',
  ) == ('--staged_vars: local runs only (not built for a cluster)')


def test_cli_refusal_is_one_line_exit_2(capfd):
  from tf_cnn_benchmarks import __main__ as entry  # pylint: disable=g-import-not-at-top

  status = entry.main(
    ['prog', '--device=cpu', '--staged_vars', '--variable_update=replicated']
  )
  err = capfd.readouterr().err.strip().splitlines()
  assert status == 2
  assert err[-1].endswith(
    '--staged_vars: only with --variable_update=parameter_server'
  )
  assert len([line for line in err if 'staged_vars' in line]) == 1


def test_gpu_build_only_stages_on_each_tower():
  num_gpus = 2
  plan = params_lib.make_plan(
    device='gpu',
    num_gpus=num_gpus,
    model='trivial',
    data_name='cifar10',
    num_batches=1,
    build_only=True,
    staged_vars=True,
    local_parameter_device='cpu',
  )
  bench = benchmark_cnn.BenchmarkCNN(plan, out=io.StringIO())
  report = bench.build_only().to_dict()
  kernels = report['summary']['kernel_check']
  assert kernels['missing_gpu_kernel'] == []
  by_type = {}
  for op in report['ops']:
    by_type.setdefault(op['type'], []).append(op)
  # A read buffer per (tower, trainable variable), gradients per tower.
  towers = report['run']['tower_devices']
  assert len(towers) == num_gpus and all('GPU' in d.upper() for d in towers)
  unstage = by_type['Unstage']
  num_vars = (len(unstage) - num_gpus) // num_gpus
  assert num_vars > 0
  for device in towers:
    mine = [op for op in unstage if op['device'] == device]
    assert len(mine) == num_vars + 1, (device, len(mine))
  assert {op['device'] for op in by_type['Stage']} == set(towers)
  # The variables stay on the parameter device (the towers read copies).
  variables = [
    op
    for op in by_type.get('VariableV2', []) + by_type.get('VarHandleOp', [])
    if op['name'].startswith('v/')
  ]
  assert len(variables) == num_vars
  assert all(op['device'] == '/device:CPU:0' for op in variables), variables


def _staged_run(train_dir, num_batches, optimizer='momentum', **flags):
  """Losses of a staged 2-tower run of `num_batches` steps in train_dir."""
  testing_models.ensure_registered()
  p = params_lib.make_params(
    model='test_linear',
    data_name='cifar10',
    device='cpu',
    num_gpus=2,
    batch_size=PER_DEVICE_BATCH,
    variable_update='parameter_server',
    staged_vars=True,
    optimizer=optimizer,
    init_learning_rate=LEARNING_RATES[optimizer],
    weight_decay=WEIGHT_DECAY,
    num_batches=num_batches,
    num_warmup_batches=0,
    tf_random_seed=SEED,
    train_dir=None if train_dir is None else str(train_dir),
    **flags,
  )
  return np.array(benchmark_cnn.run_benchmark(p, out=io.StringIO()).losses)


def _final_weights(train_dir):
  reader = tf.train.load_checkpoint(str(train_dir))
  return {
    n: reader.get_tensor(n)
    for n in reader.get_variable_to_shape_map()
    if n.endswith(('weights', 'biases')) and not n.startswith('staged')
  }


@pytest.mark.parametrize(
  'optimizer,flags',
  [('momentum', {}), ('adam', {'use_resource_vars': True})],
)
def test_staged_run_resumes_exactly(tmp_path, optimizer, flags):
  """3 steps, then 3 resumed steps == 6 straight (issue 29, item 18): the
  staged values and the held-back gradients are checkpointed too."""
  whole = _staged_run(tmp_path / 'whole', 6, optimizer, **flags)
  first = _staged_run(tmp_path / 'parts', 3, optimizer, **flags)
  then = _staged_run(tmp_path / 'parts', 3, optimizer, **flags)
  np.testing.assert_allclose(np.concatenate([first, then]), whole, rtol=1e-6)
  straight, resumed = (
    _final_weights(tmp_path / 'whole'),
    _final_weights(tmp_path / 'parts'),
  )
  assert sorted(straight) == sorted(resumed) and straight
  for name in straight:
    np.testing.assert_allclose(
      resumed[name], straight[name], rtol=1e-6, atol=1e-7
    )
