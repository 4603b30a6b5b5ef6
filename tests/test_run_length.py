"""Automatic run lengths (issue 57): MSER-5, the batch-means interval, the
online stopping rule, the flags, and a real run's results line.

The statistics are checked on seeded synthetic series (numpy), the stopping
rule with a fake clock; one tiny real run checks the line against
results/schema.json.
"""

import json
import math
import os

import jsonschema
import numpy as np
import pytest

from tests import helpers
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.reporting import result_schema
from tf_cnn_benchmarks.reporting import run_length
from tf_cnn_benchmarks.reporting import timing


def _transient(rng, n, steps, start=3.0, level=1.0, noise=0.02):
  """Step times (seconds): a decay from `start` to `level` over `steps`
  steps, then stationary noise."""
  times = level + rng.normal(0.0, noise, n)
  ramp = np.linspace(start - level, 0.0, steps, endpoint=False)
  times[:steps] += ramp
  return times


# ---- MSER-5 -----------------------------------------------------------------


@pytest.mark.parametrize('steps', [10, 25, 40])
def test_mser5_cuts_the_known_transient_and_not_much_more(steps):
  rng = np.random.default_rng(7)
  times = _transient(rng, 300, steps)
  cut = run_length.mser5(times)
  # MSER-5 may cut a few stationary batches too (a noise minimum).
  assert steps - 5 <= cut.steps <= steps + 30
  assert cut.steps % run_length.MSER_BATCH == 0
  assert cut.statistic < cut.untruncated
  # The kept steps' mean is the stationary level (the transient is gone).
  assert np.mean(times[cut.steps :]) == pytest.approx(1.0, abs=0.01)


def test_mser5_matches_the_definition_by_brute_force():
  rng = np.random.default_rng(3)
  times = _transient(rng, 103, 12, noise=0.1)
  z = (times[:100] * 1e3).reshape(20, 5).mean(axis=1)
  values = [
    np.sum((z[d:] - z[d:].mean()) ** 2) / (20 - d) ** 2 for d in range(11)
  ]
  cut = run_length.mser5(times)
  assert cut.steps == 5 * int(np.argmin(values))
  assert cut.statistic == pytest.approx(min(values))
  assert cut.untruncated == pytest.approx(values[0])
  assert cut.bound == 50  # half of the 20 batches


def test_mser5_stays_within_its_bounds():
  rising = np.linspace(1.0, 0.1, 400)  # never stationary: the bound holds
  cut = run_length.mser5(rising)
  assert cut.steps == cut.bound == 200
  long = np.concatenate([np.full(1500, 5.0), np.ones(3000)])
  assert run_length.mser5(long).steps == run_length.MAX_AUTO_WARMUP_STEPS
  assert run_length.mser5([1.0] * 9) == run_length.Truncation(0, None, None, 0)


def test_mser5_on_a_stationary_series_cuts_little():
  rng = np.random.default_rng(11)
  cuts = [
    run_length.mser5(1 + rng.normal(0, 0.05, 500)).steps for _ in range(50)
  ]
  assert np.median(cuts) <= 50


# ---- the batch-means interval -----------------------------------------------


def test_batch_means_interval_against_a_hand_computation():
  values = list(np.arange(1.0, 61.0) ** 1.5)  # 60 values: 20 batches of 3
  got = timing.batch_means_interval(values)
  assert (got.batches, got.batch_size) == (20, 3)
  means = [sum(values[3 * i : 3 * i + 3]) / 3 for i in range(20)]
  mean = sum(values) / 60
  sd = math.sqrt(sum((m - mean) ** 2 for m in means) / 19)
  assert got.mean == pytest.approx(mean)
  assert got.stderr == pytest.approx(sd / math.sqrt(20))
  assert got.half_width == pytest.approx(2.0930240544 * sd / math.sqrt(20))
  assert got.relative == pytest.approx(got.half_width / mean)


def test_uneven_batches_weigh_by_size_and_centre_on_every_step():
  values = [1.0, 2.0, 4.0, 8.0, 16.0] * 13  # 65: 5 batches of 4, 15 of 3
  got = timing.batch_means_interval(values)
  assert (got.batches, got.batch_size) == (20, 3)
  mean = sum(values) / 65
  assert got.mean == pytest.approx(mean)  # the rate's own mean
  sizes = [4] * 5 + [3] * 15
  starts = np.cumsum([0] + sizes[:-1])
  means = [sum(values[s : s + z]) / z for s, z in zip(starts, sizes)]
  variance = sum(z * (m - mean) ** 2 for z, m in zip(sizes, means)) / 19
  assert got.stderr == pytest.approx(math.sqrt(variance / 65))


def test_batch_layout_keeps_10_to_20_batches_and_grows_the_batches():
  assert timing.batch_layout(5) == (5, 1)
  assert timing.batch_layout(19) == (19, 1)
  assert timing.batch_layout(30) == (10, 3)
  assert timing.batch_layout(59) == (10, 5)
  assert timing.batch_layout(60) == (20, 3)
  assert timing.batch_layout(100) == (20, 5)
  assert timing.batch_layout(10000) == (20, 500)


def _ar1(rng, n, phi, sd=1.0):
  """An AR(1) series x_t = phi x_{t-1} + e_t, started stationary."""
  e = rng.normal(0.0, sd, n)
  x = np.empty(n)
  x[0] = e[0] / math.sqrt(1 - phi * phi)
  for t in range(1, n):
    x[t] = phi * x[t - 1] + e[t]
  return x


def test_ar1_steps_naive_interval_undercovers_batch_means_do_not():
  rng = np.random.default_rng(57)
  naive = batch = 0
  reps, n, phi = 300, 1000, 0.8  # the true mean is 10
  for _ in range(reps):
    x = 10.0 + _ar1(rng, n, phi)
    half = timing.t_quantile_975(n - 1) * x.std(ddof=1) / math.sqrt(n)
    naive += abs(x.mean() - 10.0) <= half
    got = timing.batch_means_interval(x)
    batch += abs(got.mean - 10.0) <= got.half_width
  assert naive / reps < 0.6
  assert batch / reps >= 0.88


def test_images_per_sec_spread_says_its_batches():
  spread = timing.images_per_sec_spread(
    32, [0.1 + 0.001 * i for i in range(30)]
  )
  assert (spread['batches'], spread['batch_size']) == (10, 3)
  line = timing.interval_line(spread, 30)
  assert line.endswith('batch means: 10 batches of 3)')


# ---- the online rule --------------------------------------------------------


class _Clock:
  def __init__(self):
    self.now = 0.0

  def __call__(self):
    return self.now


def _drive(auto, times, clock):
  """Adds times until auto stops; the number of steps taken."""
  for k, seconds in enumerate(times, start=1):
    clock.now += seconds
    auto.add(seconds)
    if auto.done():
      return k
  return len(times)


def test_auto_warmup_with_fixed_length_keeps_exactly_num_batches():
  rng = np.random.default_rng(5)
  times = _transient(rng, 1000, 30, noise=0.01)
  clock = _Clock()
  auto = run_length.AutoLength(run_length.LengthSettings(None, 100), clock)
  taken = _drive(auto, times, clock)
  info = auto.info()
  assert len(auto.timed_steps()) == info['steps'] == 100
  assert taken == info['loop_steps'] == info['warmup_steps'] + 100
  assert 25 <= info['warmup_steps'] <= 45
  assert info['stopped_by'] == 'steps' and info['target_reached'] is None
  assert info['warmup_rule'] == 'mser-5' and info['length_rule'] == 'fixed'


def test_auto_length_stops_at_the_target_with_the_interval_within_it():
  rng = np.random.default_rng(9)
  times = _transient(rng, 5000, 20, noise=0.05)
  clock = _Clock()
  settings = run_length.LengthSettings(None, None, 0.01, 1e6, 5000)
  auto = run_length.AutoLength(settings, clock)
  _drive(auto, times, clock)
  info = auto.info()
  assert info['stopped_by'] == 'target' and info['target_reached'] is True
  assert info['interval_reached'] <= 0.01
  assert info['steps'] >= run_length.MIN_AUTO_TIMED_STEPS
  kept = auto.timed_steps()
  got = timing.batch_means_interval(kept)
  assert got.relative == pytest.approx(info['interval_reached'])


def test_auto_length_stops_by_time_then_by_cap():
  rng = np.random.default_rng(1)
  noisy = 1.0 + rng.normal(0, 0.5, 5000).clip(-0.9, None)
  clock = _Clock()
  timed = run_length.AutoLength(
    run_length.LengthSettings(0, None, 0.001, 100.0, 5000), clock
  )
  taken = _drive(timed, noisy, clock)
  assert timed.info()['stopped_by'] == 'time' and clock.now >= 100.0
  assert taken == len(timed.times) and timed.info()['target_reached'] is False
  clock = _Clock()
  capped = run_length.AutoLength(
    run_length.LengthSettings(5, None, 0.001, 1e9, 300), clock
  )
  assert _drive(capped, noisy, clock) == 300
  info = capped.info()
  assert info['stopped_by'] == 'cap' and info['warmup_rule'] == 'fixed'
  assert info['warmup_steps'] == 5 and info['loop_steps'] == 305


def test_console_lines_say_what_was_discarded_and_why_it_stopped():
  info = {
    'warmup_rule': 'mser-5',
    'warmup_steps': 15,
    'loop_steps': 140,
    'warmup_statistic': 0.5,
    'warmup_statistic_untruncated': 2.0,
    'warmup_bound_steps': 70,
    'length_rule': 'target',
    'interval_reached': 0.0125,
    'target_interval': 0.01,
    'steps': 125,
    'seconds': 12.5,
    'stopped_by': 'time',
  }
  warm, length = run_length.console_lines(info)
  assert 'discarded 15 of 140 steps' in warm and 'MSER 0.5 ms^2' in warm
  assert '1.25%' in length and 'target 1.00%' in length
  assert '--max_run_seconds' in length


# ---- flags ------------------------------------------------------------------

TINY = dict(
  model='trivial',
  data_name='cifar10',
  device='cpu',
  batch_size=2,
  display_every=1000,
  peak_tflops_per_device='none',
)


def test_auto_flags_resolve_with_their_bounds():
  p = params_lib.make_params(
    **TINY, num_batches='auto', num_warmup_batches='auto'
  )
  assert p.num_batches == p.num_warmup_batches == 'auto'
  assert (p.target_interval, p.max_run_seconds, p.max_auto_batches) == (
    0.01,
    600.0,
    10000,
  )
  fixed = params_lib.make_params(**TINY, num_batches=5)
  assert fixed.target_interval is None and fixed.num_warmup_batches == 10


@pytest.mark.parametrize(
  'changes,named',
  [
    (dict(num_batches=5, target_interval=0.01), '--target_interval: only'),
    (dict(num_batches='auto', target_interval=0.0), '--target_interval=0.0'),
    (dict(num_batches='auto', target_interval=1.5), '--target_interval=1.5'),
    (dict(num_batches='auto', max_run_seconds=-1.0), '--max_run_seconds=-1'),
    (dict(num_batches='auto', max_auto_batches=1), '--max_auto_batches=1'),
    (dict(num_batches='many'), '--num_batches='),
    (
      dict(num_batches='auto', eval_during_training_every_n_steps=5),
      '--eval_during_training_every_n_steps',
    ),
    (dict(num_warmup_batches='auto', eval=True), '--eval'),
  ],
)
def test_bad_auto_flags_are_refused_naming_the_flag(changes, named):
  with pytest.raises(params_lib.ParamsError) as e:
    params_lib.make_params(**{**TINY, **changes})
  assert named in str(e.value) and '\n' not in str(e.value)


@pytest.mark.parametrize(
  'flags,named',
  [
    (['--num_batches=lots'], '--num_batches'),
    (['--num_batches=auto', '--target_interval=2'], '--target_interval'),
    (
      [
        '--num_warmup_batches=auto',
        '--job_name=worker',
        '--worker_hosts=127.0.0.1:1,127.0.0.1:2',
        '--task_index=0',
        '--variable_update=collective_all_reduce',
      ],
      'not in a cluster run',
    ),
  ],
)
def test_bad_auto_flags_on_the_command_line_exit_2_with_one_line(
  flags, named, tmp_path
):
  result_file = tmp_path / 'r.jsonl'
  proc = helpers.run_benchmark(
    *helpers.TRIVIAL_FLAGS, *flags, '--result_file=%s' % result_file
  )
  assert proc.returncode == 2
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and named in lines[0], proc.stderr
  assert not result_file.exists()


# ---- a real run -------------------------------------------------------------


def test_real_run_with_auto_lengths_writes_a_valid_run_length(tmp_path):
  path = tmp_path / 'r.jsonl'
  helpers.run_in_process(
    **TINY,
    num_batches='auto',
    num_warmup_batches='auto',
    target_interval=0.5,
    max_run_seconds=60.0,
    max_auto_batches=400,
    result_file=str(path),
  )
  record = json.loads(path.read_text().splitlines()[-1])
  assert result_schema.line_problem(record) is None
  with open(os.path.join(helpers.ROOT, 'results', 'schema.json')) as f:
    jsonschema.Draft202012Validator(json.load(f)).validate(record)
  length = record['run_length']
  assert length['steps'] == record['num_steps'] == len(record['step_times_ms'])
  assert length['warmup_steps'] == record['num_warmup_steps']
  assert length['loop_steps'] == length['steps'] + length['warmup_steps']
  assert len(record['losses']) == length['loop_steps']
  assert length['stopped_by'] in ('target', 'time', 'cap')
  assert length['target_reached'] == (length['stopped_by'] == 'target')
  assert record['params']['num_batches'] == 'auto'
  spread = record['images_per_sec_spread']
  assert record['num_steps'] >= run_length.MIN_AUTO_TIMED_STEPS
  layout = timing.batch_layout(record['num_steps'])
  assert (spread['batches'], spread['batch_size']) == layout
  assert spread['batches'] >= 10 and spread['batch_size'] >= 3


def test_forward_only_with_auto_warmup_keeps_num_batches_timed_steps(tmp_path):
  path = tmp_path / 'r.jsonl'
  helpers.run_in_process(
    **TINY,
    forward_only=True,
    num_warmup_batches='auto',
    num_batches=20,
    result_file=str(path),
  )
  record = json.loads(path.read_text().splitlines()[-1])
  assert result_schema.line_problem(record) is None
  length = record['run_length']
  assert record['mode'] == 'forward_only'
  assert record['num_steps'] == length['steps'] == 20
  assert length['stopped_by'] == 'steps' and length['length_rule'] == 'fixed'
  assert record['num_warmup_steps'] == length['loop_steps'] - 20
  assert 0 <= length['warmup_steps'] <= length['warmup_bound_steps']
