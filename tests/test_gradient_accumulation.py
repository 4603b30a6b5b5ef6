"""--gradient_accumulation_steps=K (issue 56, item 6), in every manager.

K micro-steps of batch B train exactly as one step of batch K*B (every
local manager of the registry; every cluster manager with two workers, in
the slow suite; synthetic data and records; compressors); the reduction and
the optimizers run once per K micro-steps; a checkpoint taken between
micro-steps resumes exactly; the fp16 loss scale moves once per update; the
global step, the learning rate, epochs and the MLPerf log count updates;
bad values are one line.
"""

import collections
import io
import json

import numpy as np
import pytest
import tensorflow as tf

from tests import helpers
from tests import testing_models
from tests.test_driver import Session
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.reporting import run_header
from tf_cnn_benchmarks.training import step_loop
import variable_mgr

tf1 = tf.compat.v1

B = 4
K = 2
# Every manager that runs in one process, from the registry, and the
# relaxed-consistency variant of replicated (the one setting that changes
# when an update lands).
MANAGER_RUNS = [
  pytest.param(dict(variable_update=name), id=name)
  for name in variable_mgr.local_names()
] + [
  pytest.param(
    dict(variable_update='replicated', variable_consistency='relaxed'),
    id='replicated-relaxed',
  )
]
# float32 means of the same numbers summed in another order (the mean of K
# micro-batch means against one mean of K*B): a few ulps (2**-23 ~ 1.2e-7)
# per value, compounded over 3 updates. A weight that ends near zero (a
# difference of values ~0.1) keeps the absolute error of its terms: a few
# ulps of 0.1 (ulp 7.5e-9).
RTOL = 1e-6
ATOL = 3e-8


def linear_params(**kw):
  testing_models.ensure_registered()
  fields = {
    **helpers.LINEAR_ON_CPU,
    'optimizer': 'momentum',
    'num_gpus': 2,
    'display_every': 100,
    'num_batches': 3,
    'num_warmup_batches': 0,
    **kw,
  }
  return params_lib.make_params(**fields)


def run(**kw):
  """The results line (a dict) of a run of test_linear."""
  p = linear_params(**kw)
  return benchmark_cnn.run_benchmark(p, out=io.StringIO()).to_record()


def model_weights(train_dir):
  """The model's variables (and optimizer slots) in the last checkpoint of
  train_dir, by name; the accumulation's own state left out."""
  reader = tf.train.load_checkpoint(str(train_dir))
  names = [n for n in reader.get_variable_to_shape_map() if 'linear/' in n]
  names = [n for n in names if not n.startswith('gradient_accumulation')]
  assert len(names) >= 4, names  # weights, biases and their momenta
  return {n: reader.get_tensor(n) for n in names}


def accumulation_state(train_dir):
  reader = tf.train.load_checkpoint(str(train_dir))
  return {
    n: reader.get_tensor(n)
    for n in reader.get_variable_to_shape_map()
    if n.startswith('gradient_accumulation')
  }


@pytest.mark.parametrize('manager', MANAGER_RUNS)
def test_k_micro_steps_of_b_train_as_one_step_of_k_times_b(tmp_path, manager):
  accumulated = run(
    batch_size=B,
    gradient_accumulation_steps=K,
    train_dir=str(tmp_path / 'a'),
    **manager,
  )
  whole = run(batch_size=K * B, train_dir=str(tmp_path / 'w'), **manager)
  alone = run(batch_size=B, **manager)
  np.testing.assert_allclose(accumulated['losses'], whole['losses'], rtol=RTOL)
  weights, expected = (
    model_weights(tmp_path / 'a'),
    model_weights(tmp_path / 'w'),
  )
  assert sorted(weights) == sorted(expected)
  for name, value in expected.items():
    np.testing.assert_allclose(weights[name], value, rtol=RTOL, atol=ATOL)
  # After an update the buffers and the count are zero again.
  state = accumulation_state(tmp_path / 'a')
  assert 'gradient_accumulation/micro_steps_done' in state
  assert len(state) > 2  # the count, the loss sum and the buffers
  for name, value in state.items():
    assert not np.any(value), name
  # The figures count updates of K*B images, as the K*B run's.
  assert accumulated['gradient_accumulation_steps'] == K
  assert whole['gradient_accumulation_steps'] == 1
  assert accumulated['global_batch_size'] == whole['global_batch_size']
  assert accumulated['global_batch_size'] == K * B * 2
  assert accumulated['num_steps'] == whole['num_steps'] == 3
  assert accumulated['end_step'] == whole['end_step'] == 3
  # A run of B alone trains otherwise: the comparison can fail.
  assert np.max(np.abs(np.array(alone['losses']) - whole['losses'])) > 1e-3


@pytest.mark.parametrize('compression', ['fp16_ef', 'powersgd'])
def test_compressors_see_the_update_once(tmp_path, compression):
  # The compressor acts on the update's reduction of the mean gradient:
  # its state (error feedback, PowerSGD's Q) moves once per update, as in
  # one step of K*B.
  kw = dict(variable_update='replicated', gradient_compression=compression)
  accumulated = run(
    batch_size=B,
    gradient_accumulation_steps=K,
    train_dir=str(tmp_path / 'a'),
    **kw,
  )
  whole = run(batch_size=K * B, train_dir=str(tmp_path / 'w'), **kw)
  np.testing.assert_allclose(accumulated['losses'], whole['losses'], rtol=RTOL)
  weights, expected = (
    model_weights(tmp_path / 'a'),
    model_weights(tmp_path / 'w'),
  )
  assert sorted(weights) == sorted(expected)
  for name, value in expected.items():
    if name.startswith('gradient_compression/'):
      # Residuals of 16-bit roundings: a last-bit change of the gradient
      # is large against them; what they feed, the weights, is compared.
      continue
    # A last-bit float32 difference of a mean can flip the 16-bit rounding
    # of one element: one float16 ulp (2**-10 relative) of the array's
    # largest value.
    atol = 2.0**-10 * float(np.max(np.abs(value)))
    np.testing.assert_allclose(weights[name], value, rtol=0, atol=atol)


@pytest.fixture(scope='module')
def cifar_dir(tmp_path_factory):
  return helpers.fake_cifar10(tmp_path_factory)[0]


def test_records_each_micro_step_reads_the_next_batch(cifar_dir):
  # One tower's stream: K batches of B are the K*B examples of one batch.
  kw = dict(data_dir=cifar_dir, num_gpus=1, optimizer='sgd')
  accumulated = run(batch_size=B, gradient_accumulation_steps=K, **kw)
  whole = run(batch_size=K * B, **kw)
  alone = run(batch_size=B, **kw)
  np.testing.assert_allclose(accumulated['losses'], whole['losses'], rtol=RTOL)
  assert np.max(np.abs(np.array(alone['losses']) - whole['losses'])) > 1e-4


def test_lenet_without_batch_norm_accumulates_like_the_whole_batch():
  common = dict(
    model='lenet',
    data_name='imagenet',
    device='cpu',
    variable_update='replicated',
    init_learning_rate=0.005,
    num_batches=3,
    num_warmup_batches=0,
    display_every=100,
  )
  accumulated = helpers.run_in_process(
    **common, batch_size=2, gradient_accumulation_steps=3
  )
  whole = helpers.run_in_process(**common, batch_size=6)
  # lenet's sums run over 5x5x32 and 800-wide layers: float32 rounding of
  # two summation orders, not the 1e-6 of a linear model.
  np.testing.assert_allclose(accumulated.losses, whole.losses, rtol=2e-5)


# ---- one reduction per K micro-steps ------------------------------------


def executed_nodes(sess, fetch):
  """Names of the graph nodes a run of `fetch` executed (step stats)."""
  metadata = tf1.RunMetadata()
  sess.run(
    fetch,
    options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE),
    run_metadata=metadata,
  )
  return [
    node.node_name
    for device in metadata.step_stats.dev_stats
    for node in device.node_stats
  ]


class RecordedReduction:
  """A manager's build_train_op that notes the ops it builds (the
  reduction, the loss-scale check and the optimizers' updates)."""

  def __init__(self, manager):
    self.calls = []
    self._build = manager.build_train_op
    manager.build_train_op = self

  def __call__(self, tower_grads, step_update):
    graph = tf1.get_default_graph()
    before = {op.name for op in graph.get_operations()}
    out = self._build(tower_grads, step_update)
    self.calls.append(
      {op.name for op in graph.get_operations()} - before - {out.name}
    )
    return out


def reduction_runs(p, fetch_names):
  """{fetch name: [executions of the manager's ops]}: one run of each."""
  bench = benchmark_cnn.BenchmarkCNN(p, out=io.StringIO())
  recorded = RecordedReduction(bench.manager)
  built = bench.build()
  assert len(recorded.calls) == 1  # one reduction in the graph
  manager_ops = {
    name: built.graph.get_operation_by_name(name).type
    for name in recorded.calls[0]
  }
  out = {}
  config = bench._session_config()
  # Grappler off: the executed nodes are the graph's own, by name.
  config.graph_options.rewrite_options.disable_meta_optimizer = True
  with tf1.Session(graph=built.graph, config=config) as sess:
    sess.run(built.init_ops)
    if built.post_init_ops:
      sess.run(built.post_init_ops)
    for name in fetch_names:
      fetch = getattr(built, name)
      out[name] = collections.Counter(
        manager_ops[n]
        for n in executed_nodes(sess, fetch)
        if n in manager_ops and _reduces_or_applies(manager_ops[n])
      )
  return out


def _reduces_or_applies(op_type: str) -> bool:
  """A reduction's sums and collectives, a compression's casts, an
  optimizer's apply (constants, reads and control no-ops are left out)."""
  return any(
    word in op_type for word in ('Apply', 'AddN', 'Collective', 'AllReduce')
  ) or op_type in ('Cast', 'Add', 'AddV2', 'RealDiv', 'Mul')


@pytest.mark.parametrize(
  'manager',
  MANAGER_RUNS
  + [
    pytest.param(
      dict(variable_update='replicated', all_reduce_spec='pscpu'),
      id='replicated-pscpu',
    ),
    pytest.param(
      dict(variable_update='replicated', gradient_compression='fp16'),
      id='replicated-fp16-compression',
    ),
  ],
)
def test_micro_steps_run_no_reduction_and_the_update_runs_one(manager):
  runs = reduction_runs(
    linear_params(batch_size=B, gradient_accumulation_steps=K, **manager),
    ['micro_step_op', 'step_op'],
  )
  plain = reduction_runs(linear_params(batch_size=B, **manager), ['step_op'])
  assert runs['micro_step_op'] == collections.Counter()
  assert any('Apply' in t for t in runs['step_op'])  # the updates ran
  # The same reductions and applies as one step without accumulation.
  assert runs['step_op'] == plain['step_op']


# ---- a checkpoint between micro-steps -----------------------------------


def test_checkpoint_between_micro_steps_resumes_exactly(tmp_path):
  kw = dict(batch_size=B, gradient_accumulation_steps=3, num_batches=2)
  whole = run(**kw, train_dir=str(tmp_path / 'whole'))
  # One micro-step, a checkpoint, the process ends; the run resumes.
  cut = str(tmp_path / 'cut')
  first = Session(linear_params(**kw, train_dir=cut))
  first.sess.run(first.built.micro_step_op)
  assert first.sess.run(first.built.micro_steps_done) == 1
  assert first.built.checkpointer.save(first.sess)
  first.close()
  first.built.checkpointer.release()
  resumed = run(**kw, train_dir=cut)
  assert resumed['start_step'] == 0
  assert resumed['end_step'] == 2
  np.testing.assert_array_equal(resumed['losses'], whole['losses'])
  weights, expected = model_weights(cut), model_weights(tmp_path / 'whole')
  for name, value in expected.items():
    np.testing.assert_array_equal(weights[name], value, err_msg=name)


def test_a_resumed_loop_runs_only_the_micro_steps_left(tmp_path):
  p = linear_params(
    batch_size=B, gradient_accumulation_steps=3, train_dir=str(tmp_path)
  )
  s = Session(p)
  s.sess.run(s.built.micro_step_op)
  micro = step_loop._MicroSteps(s.sess, s.built)
  micro.run_before_update()  # the one micro-step left
  assert s.sess.run(s.built.micro_steps_done) == 2
  s.sess.run(s.built.step_op)
  assert s.sess.run(s.built.micro_steps_done) == 0
  micro.run_before_update()  # then K-1 before every update
  assert s.sess.run(s.built.micro_steps_done) == 2
  s.close()
  s.built.checkpointer.release()


# ---- fp16 loss scale: once per update -----------------------------------


def injectable(**kw):
  testing_models.ensure_injectable_registered()
  return Session(
    params_lib.make_params(
      model='test_injectable',
      data_name='cifar10',
      device='cpu',
      num_gpus=2,
      batch_size=B,
      optimizer='momentum',
      init_learning_rate=0.1,
      use_fp16=True,
      fp16_enable_auto_loss_scale=True,
      fp16_loss_scale=64.0,
      fp16_inc_loss_scale_every_n=1,
      num_warmup_batches=0,
      gradient_accumulation_steps=3,
      **kw,
    )
  )


def poison(s):
  """A feed making tower 0's logits inf."""
  inject = sorted(
    (
      op
      for op in s.built.graph.get_operations()
      if op.type == 'PlaceholderWithDefault'
      and op.name.endswith(testing_models.INJECT_NAME)
    ),
    key=lambda op: op.name,
  )[0]
  return {inject.outputs[0]: np.inf}


def model_state(s):
  with s.built.graph.as_default():
    variables = [
      v
      for v in tf1.global_variables()
      if not v.op.name.startswith(('loss_scale_state/', 'gradient_accum'))
    ]
  return dict(zip([v.op.name for v in variables], s.sess.run(variables)))


def scale_and_skips(s):
  report = s.sess.run(s.built.report)
  return float(report['loss_scale']), int(report['skipped_steps'])


@pytest.mark.parametrize('variable_update', variable_mgr.local_names())
def test_loss_scale_moves_once_per_update(variable_update):
  s = injectable(variable_update=variable_update)
  for _ in range(2):
    s.sess.run(s.built.micro_step_op)
    assert scale_and_skips(s) == (64.0, 0)  # a micro-step moves nothing
  s.sess.run(s.built.step_op)
  assert scale_and_skips(s) == (128.0, 0)  # doubles once per update
  before = model_state(s)
  # An inf in one micro-step reaches the update's check: the whole update
  # is skipped and the scale halves once.
  s.sess.run(s.built.micro_step_op, feed_dict=poison(s))
  assert scale_and_skips(s) == (128.0, 0)
  s.sess.run(s.built.micro_step_op)
  s.sess.run(s.built.step_op)
  assert scale_and_skips(s) == (64.0, 1)
  after = model_state(s)
  for name, value in before.items():
    np.testing.assert_array_equal(after[name], value, err_msg=name)
  # The buffers were emptied: the next update trains again.
  for _ in range(2):
    s.sess.run(s.built.micro_step_op)
  s.sess.run(s.built.step_op)
  assert scale_and_skips(s) == (128.0, 1)
  trained = model_state(s)
  assert trained['global_step'] == before['global_step'] + 1
  s.close()


def moving_statistics(s):
  with s.built.graph.as_default():
    variables = [v for v in tf1.global_variables() if 'moving_' in v.op.name]
  assert variables
  return s.sess.run(variables)


@pytest.mark.parametrize('initial_scale, moves', [(128.0, True), (1e30, False)])
def test_a_micro_step_with_inf_gradients_moves_no_statistic(
  initial_scale, moves
):
  # resnet20 has batch norm; a scale of 1e30 overflows float16 gradients.
  s = Session(
    params_lib.make_params(
      model='resnet20',
      data_name='cifar10',
      device='cpu',
      batch_size=2,
      use_fp16=True,
      fp16_enable_auto_loss_scale=True,
      fp16_loss_scale=initial_scale,
      gradient_accumulation_steps=2,
      num_warmup_batches=0,
    )
  )
  before = moving_statistics(s)
  s.sess.run(s.built.micro_step_op)
  after = moving_statistics(s)
  changed = any(not np.array_equal(a, b) for a, b in zip(before, after))
  assert changed == moves
  s.close()


# ---- steps, learning rates and epochs count updates ---------------------


def test_learning_rate_schedule_and_epochs_count_updates():
  # Decay every 16 images: the schedule's epoch unit is an update's K*B*2.
  schedule = dict(
    init_learning_rate=0.1,
    num_epochs_per_decay=16 / 50000,
    learning_rate_decay_factor=0.5,
    num_batches=None,
    num_epochs=48 / 50000,  # cifar10's 50000 training images
  )
  accumulated = run(batch_size=B, gradient_accumulation_steps=K, **schedule)
  whole = run(batch_size=K * B, **schedule)
  alone = run(batch_size=B, **schedule)
  # 48 images are 3 updates of 16, as 3 steps of 16; 6 steps of 8.
  assert accumulated['num_steps'] == whole['num_steps'] == 3
  assert alone['num_steps'] == 6
  rates = accumulated['learning_rates']
  assert rates == whole['learning_rates']
  assert len(set(rates)) > 1  # the schedule decays within the run
  assert rates != alone['learning_rates'][:3]
  np.testing.assert_allclose(accumulated['losses'], whole['losses'], rtol=RTOL)


def test_warm_up_steps_are_updates_and_images_per_sec_counts_micro_batches():
  record = run(
    batch_size=B,
    gradient_accumulation_steps=K,
    num_batches=2,
    num_warmup_batches=1,
  )
  assert record['start_step'] == 0
  assert record['end_step'] == 3  # 1 warm-up + 2 timed updates
  assert record['num_steps'] == 2
  mean_seconds = record['step_time_ms']['mean'] / 1000.0
  # images/sec of steps of K micro-batches on 2 towers.
  assert record['images_per_sec'] == pytest.approx(
    K * B * 2 / mean_seconds, rel=1e-6
  )


def mlperf_events(path):
  """(key, value, metadata) of each :::MLLOG line."""
  out = []
  for line in path.read_text().splitlines():
    if line.startswith(':::MLLOG '):
      event = json.loads(line[len(':::MLLOG ') :])
      out.append((event['key'], event['value'], event['metadata']))
  return out


@pytest.mark.parametrize('steps', [1, 3])
def test_the_header_says_the_micro_steps_and_the_global_batch(steps):
  p = linear_params(batch_size=B, gradient_accumulation_steps=steps)
  bench = benchmark_cnn.BenchmarkCNN(p, out=io.StringIO())
  rows = dict(run_header.header_rows(bench.facts, bench._session_config()))
  assert rows['Batch size'] == '%d global' % (steps * B * 2)
  words = rows['Accumulation'].split()
  assert words[0] == ('none' if steps == 1 else str(steps))


def test_mlperf_log_counts_the_images_of_updates(tmp_path):
  kw = dict(batch_size=B, gradient_accumulation_steps=K, num_batches=2)
  run(**kw, train_dir=str(tmp_path / 'train'))
  log = tmp_path / 'mlperf.log'
  run(  # resumed at global step 2: 2 updates of K*B*2 images done
    **kw,
    train_dir=str(tmp_path / 'train'),
    ml_perf_compliance_logging=True,
    ml_perf_log_file=str(log),
  )
  events = mlperf_events(log)
  sizes = [value for key, value, _ in events if key == 'global_batch_size']
  assert sizes == [K * B * 2]
  starts = [meta for key, _, meta in events if key == 'block_start']
  assert starts[0]['samples_count'] == 2 * K * B * 2


def test_eval_of_an_accumulating_run_takes_the_same_flags(tmp_path):
  # An evaluator task gets the training tasks' flags: --eval ignores K.
  kw = dict(batch_size=B, gradient_accumulation_steps=K, num_batches=1)
  run(**kw, train_dir=str(tmp_path))
  evaluated = run(**kw, train_dir=str(tmp_path), eval=True)
  assert evaluated['mode'] == 'eval'
  assert evaluated['checkpoint_step'] == 1
  assert evaluated['global_batch_size'] == B * 2  # no micro-steps


def test_params_changed_after_setup_are_checked_again():
  resolved = benchmark_cnn.setup(
    benchmark_cnn.make_params(
      model='trivial', device='cpu', batch_size=2, num_batches=1
    )
  )
  with pytest.raises(params_lib.ParamsError) as info:
    benchmark_cnn.BenchmarkCNN(
      resolved._replace(gradient_accumulation_steps=-1)
    )
  assert str(info.value) == (
    '--gradient_accumulation_steps=-1: must be a whole number >= 1'
  )


# ---- flags --------------------------------------------------------------


@pytest.mark.parametrize('value', ['0'])
def test_bad_values_are_one_line_exit_2(value):
  flag = '--gradient_accumulation_steps=' + value
  proc = helpers.run_benchmark(*helpers.TRIVIAL_FLAGS, '--num_batches=1', flag)
  assert proc.returncode == 2
  lines = proc.stderr.strip().splitlines()
  assert lines == ['error: %s: must be a whole number >= 1' % flag]


@pytest.mark.parametrize(
  'extra, needle',
  [
    (dict(gradient_accumulation_steps=0), 'must be a whole number >= 1'),
    (dict(gradient_accumulation_steps=2, forward_only=True), 'training'),
    (dict(gradient_accumulation_steps=True), 'whole number'),
    (
      dict(
        gradient_accumulation_steps=2,
        variable_update='parameter_server',
        staged_vars=True,
      ),
      '--staged_vars',
    ),
  ],
)
def test_the_python_api_refuses_the_same(extra, needle):
  with pytest.raises(params_lib.ParamsError) as info:
    params_lib.make_params(
      model='trivial', device='cpu', batch_size=2, num_batches=1, **extra
    )
  message = str(info.value)
  assert message.startswith('--gradient_accumulation_steps=')
  assert needle in message
  assert '\n' not in message


# ---- multi-worker managers: a 2-worker cluster on 127.0.0.1 -------------


# 35-50 s each on 2 shared cores: the slow suite.
@pytest.mark.slow
@pytest.mark.parametrize('mode', variable_mgr.cluster_names())
def test_two_workers_accumulate_like_one_tower_of_the_whole_batch(
  tmp_path, mode
):
  from tests import test_distributed as cluster  # pylint: disable=g-import-not-at-top

  one_graph = mode == 'distributed_all_reduce'
  extra = ['--all_reduce_spec=xring/pscpu'] if one_graph else []
  _, records = cluster.launch_ok(
    tmp_path,
    2,
    cluster.LINEAR
    + ['--variable_update=' + mode, '--gradient_accumulation_steps=%d' % K]
    + extra,
    launcher_flags=cluster.TASKS[mode],
    every_worker_reports=not one_graph,
  )
  record = records[0]
  assert record['gradient_accumulation_steps'] == K
  assert record['global_batch_size'] == 2 * K * cluster.B
  assert record['end_step'] == 4  # 1 warm-up + 3 timed updates
  # Each worker's K micro-batches of B are its share of one step of the
  # cluster's 2*K*B images.
  expected = cluster.local_losses(batch_size=2 * K * cluster.B)
  if one_graph:
    np.testing.assert_allclose(record['losses'], expected, rtol=1e-5)
  else:
    per_worker = cluster.worker_losses(records, 2)
    np.testing.assert_allclose(
      (per_worker[0] + per_worker[1]) / 2, expected, rtol=1e-5
    )
