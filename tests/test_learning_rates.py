"""Learning-rate schedules: values step by step against hand-computed tables,
the classic refusals, the results line's learning_rates, and the cluster's
epoch (every worker's images)."""

import io
import json

import numpy as np
import pytest
import tensorflow as tf

import models
from tests import test_distributed
from tests.test_classic_compat import run_main
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.config import schedules
from tf_cnn_benchmarks.training import learning_rates

tf1 = tf.compat.v1

# 10 steps per epoch in the tables below: 100 examples, 10 per step.
EXAMPLES, PER_STEP = 100, 10


def schedule_values(config, steps, model=None, examples=EXAMPLES, per=PER_STEP):
  """The schedule's value at each global step in `steps`."""
  model = model or models.create_model('trivial', 'cifar10')
  with tf.Graph().as_default():
    step = tf1.placeholder(tf.int64, [])
    lr = learning_rates.learning_rate(config, model, step, per, examples)
    with tf1.Session() as sess:
      return [float(sess.run(lr, {step: s})) for s in steps]


def config(**kw):
  if 'piecewise' in kw:
    kw['piecewise'] = schedules.parse_piecewise(kw['piecewise'])
  return learning_rates.ScheduleConfig(**kw)


# (schedule, {global step: learning rate}), computed by hand.
TABLES = [
  # Warm-up over 0.5 epochs = 5 steps to 0.4: 0.4 * step / 5, then 0.4.
  (
    config(init_learning_rate=0.4, warmup_epochs=0.5),
    {0: 0.0, 1: 0.08, 2: 0.16, 3: 0.24, 4: 0.32, 5: 0.4, 6: 0.4, 50: 0.4},
  ),
  # Piecewise: 1.0 until epoch 0.3 (step 3), 0.5 until epoch 0.6 (step 6).
  (
    config(piecewise='1.0;0.3;0.5;0.6;0.1'),
    {0: 1.0, 2: 1.0, 3: 0.5, 5: 0.5, 6: 0.1, 100: 0.1},
  ),
  # Classic whole-number epochs: 2 epochs = 20 steps.
  (config(piecewise='0.2;2;0.02'), {0: 0.2, 19: 0.2, 20: 0.02}),
  # Piecewise with a warm-up of 0.2 epochs (2 steps) to LR0.
  (
    config(piecewise='1.0;0.3;0.5', warmup_epochs=0.2),
    {0: 0.0, 1: 0.5, 2: 1.0, 3: 0.5},
  ),
  # Staircase decay: x0.5 every 0.2 epochs (2 steps), floored at 0.2.
  (
    config(
      init_learning_rate=1.0,
      num_epochs_per_decay=0.2,
      learning_rate_decay_factor=0.5,
      minimum_learning_rate=0.2,
    ),
    {0: 1.0, 1: 1.0, 2: 0.5, 3: 0.5, 4: 0.25, 5: 0.25, 6: 0.2, 20: 0.2},
  ),
  # The minimum floors a piecewise schedule, not the warm-up ramp.
  (
    config(piecewise='1.0;0.3;0.01', minimum_learning_rate=0.05),
    {0: 1.0, 2: 1.0, 3: 0.05, 30: 0.05},
  ),
  (
    config(
      init_learning_rate=1.0, warmup_epochs=0.4, minimum_learning_rate=0.5
    ),
    {0: 0.0, 1: 0.25, 3: 0.75, 4: 1.0},
  ),
  # A constant --init_learning_rate, and the model's own (trivial: 0.005).
  (config(init_learning_rate=0.3), {0: 0.3, 1000: 0.3}),
  (config(), {0: 0.005, 99: 0.005}),
  (config(minimum_learning_rate=0.01), {0: 0.01, 99: 0.01}),
]


@pytest.mark.parametrize('schedule,table', TABLES)
def test_schedule_values_step_by_step(schedule, table):
  steps = sorted(table)
  np.testing.assert_allclose(
    schedule_values(schedule, steps), [table[s] for s in steps], rtol=1e-6
  )


def test_resnet_base_lr_scales_the_resnet_schedule():
  # 256 images per step, 2560 per epoch: 10 steps per epoch. Base 0.05 at
  # a batch of 256 -> peak 0.05; warm-up over 5 epochs (50 steps), then
  # /10 after epochs 30, 60, 80, 90 (steps 300, 600, 800, 900).
  resnet50 = models.create_model('resnet50', 'imagenet')
  table = {
    0: 0.0,
    25: 0.025,
    49: 0.049,
    50: 0.05,
    300: 0.05,
    301: 0.005,
    601: 5e-4,
    801: 5e-5,
    901: 5e-6,
  }
  steps = sorted(table)
  got = schedule_values(
    config(resnet_base_lr=0.05), steps, resnet50, examples=2560, per=256
  )
  np.testing.assert_allclose(got, [table[s] for s in steps], rtol=1e-5)
  # Without the flag: the classic base 0.128; a batch of 512 doubles it.
  default = schedule_values(config(), [50], resnet50, examples=5120, per=512)
  np.testing.assert_allclose(default, [0.256], rtol=1e-6)
  # The minimum floors the model's schedule too.
  floored = schedule_values(
    config(resnet_base_lr=0.05, minimum_learning_rate=0.001),
    [301, 601],
    resnet50,
    examples=2560,
    per=256,
  )
  np.testing.assert_allclose(floored, [0.005, 0.001], rtol=1e-6)


def test_minimum_learning_rate_leaves_the_resnet_warmup_ramp():
  # 10 steps per epoch, peak 0.05: the 5-epoch ramp climbs from 0 whatever
  # the floor (classic never floored it); the floor holds after the ramp.
  resnet50 = models.create_model('resnet50', 'imagenet')
  got = schedule_values(
    config(resnet_base_lr=0.05, minimum_learning_rate=0.01),
    [0, 1, 10, 49, 50, 601],
    resnet50,
    examples=2560,
    per=256,
  )
  np.testing.assert_allclose(
    got, [0.0, 0.001, 0.01, 0.049, 0.05, 0.01], rtol=1e-6
  )


def test_official_resnets_keep_their_classic_schedule():
  # No warm-up and 0.1 at a global batch of 256, --resnet_base_lr or not
  # (it warns: classic ignored it for these models).
  official = models.create_model('official_resnet50', 'imagenet')
  for schedule in (config(), config(resnet_base_lr=0.05)):
    got = schedule_values(schedule, [0, 300, 301], official, 2560, 256)
    np.testing.assert_allclose(got, [0.1, 0.1, 0.01], rtol=1e-6)
  plan = params_lib.make_plan(
    device='cpu', model='official_resnet50', resnet_base_lr=0.05
  )
  assert len(plan.warnings) == 1 and 'no effect' in plan.warnings[0]


def test_images_per_global_step():
  # 32 per tower, 2 towers, 3 workers stepping together: 192 per step; a
  # worker moving the shared step alone: its own 64.
  assert learning_rates.images_per_global_step(32, 2, 3, False) == 192
  assert learning_rates.images_per_global_step(32, 2, 3, True) == 64


@pytest.mark.parametrize(
  'flags,needle',
  [
    (
      dict(piecewise_learning_rate_schedule='0.1;5', init_learning_rate=0.1),
      'odd number',
    ),
    (dict(piecewise_learning_rate_schedule='0.1;x;0.01'), "epoch 'x'"),
    (dict(piecewise_learning_rate_schedule='0.1;5;0.01;3;0.001'), 'ascending'),
    (dict(piecewise_learning_rate_schedule='0.1;5;-1'), 'learning rate'),
    (
      dict(piecewise_learning_rate_schedule='0.1;5;0.01', init_learning_rate=1),
      'no other schedule flag',
    ),
    (
      dict(
        piecewise_learning_rate_schedule='0.1;5;0.01',
        init_learning_rate=0.1,
        num_epochs_per_decay=2,
        learning_rate_decay_factor=0.5,
      ),
      '--init_learning_rate, --num_epochs_per_decay',
    ),
    (
      dict(init_learning_rate=0.1, num_epochs_per_decay=2),
      'give both',
    ),
    (dict(resnet_base_lr=-1.0, model='resnet50'), '--resnet_base_lr=-1.0'),
    (
      dict(init_learning_rate=0.1, num_learning_rate_warmup_epochs=-1.0),
      'num_learning_rate_warmup_epochs=-1.0',
    ),
    (dict(display_perf_ewma=0.0), '--display_perf_ewma=0.0'),
    (dict(display_perf_ewma=1.5), '--display_perf_ewma=1.5'),
  ],
)
def test_contradictory_schedule_flags_are_refused(flags, needle):
  with pytest.raises(params_lib.ParamsError) as e:
    params_lib.make_params(device='cpu', **flags)
  assert needle in str(e.value) and '\n' not in str(e.value)


@pytest.mark.parametrize(
  'flags, needle',
  [
    (dict(num_learning_rate_warmup_epochs=1), '--num_learning_rate_warmup'),
    (dict(resnet_base_lr=0.05), '--model=trivial'),
    (
      dict(model='resnet50', resnet_base_lr=0.05, init_learning_rate=0.1),
      '--init_learning_rate',
    ),
  ],
)
def test_flags_the_classic_harness_ignored_warn_and_run(flags, needle):
  plan = params_lib.make_plan(device='cpu', **flags)
  assert len(plan.warnings) == 1
  assert needle in plan.warnings[0] and 'no effect' in plan.warnings[0]


def test_accepted_combinations():
  for flags in (
    dict(
      piecewise_learning_rate_schedule='0.1;5;0.01', minimum_learning_rate=1e-3
    ),
    dict(
      piecewise_learning_rate_schedule='0.1;5;0.01',
      num_learning_rate_warmup_epochs=1,
    ),
    dict(minimum_learning_rate=1e-3),  # floors the model's own schedule
    dict(model='resnet50', resnet_base_lr=0.05, minimum_learning_rate=1e-4),
    dict(model='official_resnet50', resnet_base_lr=0.05),
    dict(display_perf_ewma=1.0),
  ):
    params_lib.make_params(device='cpu', **flags)


def test_refusal_is_one_line_and_exit_2(capfd):
  status, _, err = run_main(
    [
      '--device=cpu',
      '--only_check_args',
      '--piecewise_learning_rate_schedule=0.1;2;0.01',
      '--init_learning_rate=0.1',
    ],
    capfd,
  )
  assert status == 2
  assert len(err.strip().splitlines()) == 1
  assert '--piecewise_learning_rate_schedule' in err


def _run(result_file, **kw):
  p = params_lib.make_params(
    **{
      'model': 'trivial',
      'data_name': 'cifar10',
      'device': 'cpu',
      'batch_size': 8,
      'num_batches': 4,
      'num_warmup_batches': 2,
      'display_every': 1,
      'peak_tflops_per_device': 'none',
      'result_file': str(result_file),
      **kw,
    }
  )
  benchmark_cnn.run_benchmark(p, out=io.StringIO())
  return json.loads(result_file.read_text().splitlines()[-1])


def test_results_line_has_the_learning_rate_of_every_step(tmp_path):
  # CIFAR-10: 50000 images, 16 per step (2 towers x 8): 3125 steps per
  # epoch. Piecewise boundary at epoch 0.00096 = step 3; warm-up over
  # 0.00064 epochs = 2 steps to 0.1.
  record = _run(
    tmp_path / 'r.jsonl',
    num_gpus=2,
    variable_update='replicated',
    piecewise_learning_rate_schedule='0.1;0.00096;0.02',
    num_learning_rate_warmup_epochs=0.00064,
  )
  np.testing.assert_allclose(
    record['learning_rates'], [0.0, 0.05, 0.1, 0.02, 0.02, 0.02], rtol=1e-6
  )
  assert len(record['learning_rates']) == len(record['losses'])
  # A step at learning rate 0 leaves the variables (and the loss) as they
  # were; the next one moves them.
  assert record['losses'][0] == record['losses'][1]
  assert record['losses'][2] != record['losses'][1]
  assert record['params']['piecewise_learning_rate_schedule'] == (
    '0.1;0.00096;0.02'
  )


def test_forward_only_line_has_no_learning_rates(tmp_path):
  record = _run(tmp_path / 'r.jsonl', forward_only=True)
  assert record['learning_rates'] is None


def test_two_workers_count_the_clusters_images_per_epoch(tmp_path):
  # 2 workers x 1 tower x 4: 8 images per step, 6250 steps per epoch; a
  # warm-up of 0.00064 epochs is 4 steps (a single worker would count 2).
  rc, out, records = test_distributed.launch(
    tmp_path,
    2,
    test_distributed.LINEAR
    + [
      '--variable_update=collective_all_reduce',
      '--init_learning_rate=0.2',
      '--num_learning_rate_warmup_epochs=0.00064',
      '--num_batches=5',
    ],
    launcher_flags=['--num_ps=0', '--no-controller'],
    every_worker_reports=True,
  )
  assert rc == 0, out[-3000:]
  assert len(records) == 2, out[-2000:]
  for record in records:
    np.testing.assert_allclose(
      record['learning_rates'], [0.0, 0.05, 0.1, 0.15, 0.2, 0.2], rtol=1e-6
    )
