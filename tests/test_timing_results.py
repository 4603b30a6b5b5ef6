"""Step statistics and the results line."""

import io
import json
import os
import re

import numpy as np
import pytest

from tests import result_testing
from tf_cnn_benchmarks.reporting import result_lines
from tf_cnn_benchmarks.reporting import results
from tf_cnn_benchmarks.reporting import timing


def test_speed_summary_numbers():
  times = [0.5, 0.25, 0.25, 1.0]  # speeds at 8 images/step: 16, 32, 32, 8
  summary = timing.speed_summary(8, times)
  assert summary.mean == pytest.approx(32 / 2.0)  # 32 images in 2 s
  speeds = np.array([16, 32, 32, 8.0])
  assert summary.uncertainty == pytest.approx(speeds.std() / 2)
  assert summary.jitter == pytest.approx(1.4826 * 8.0)  # MAD of speeds = 8
  assert str(summary) == 'images/sec: 16.0 +/- %.1f (jitter = 11.9)' % (
    speeds.std() / 2
  )


def test_step_time_percentiles():
  stats = timing.step_time_ms([0.001 * k for k in range(1, 11)])
  assert stats['mean'] == pytest.approx(5.5)
  assert stats['p50'] == pytest.approx(5.5)
  assert stats['p90'] == pytest.approx(9.1)


def test_append_json_line_appends_whole_lines(tmp_path):
  path = tmp_path / 'sub' / 'r.jsonl'
  result_lines.append_json_line(str(path), {'a': 1})
  result_lines.append_json_line(str(path), {'b': [1.5, 2]})
  assert [json.loads(line) for line in path.read_text().splitlines()] == [
    {'a': 1},
    {'b': [1.5, 2]},
  ]


def documented_keys(table_heading: str) -> dict:
  """Key -> meaning, from the table under `table_heading` in results/README.md.

  A row's first cell may name several keys (`start_step`, `end_step`).
  """
  readme = open(
    os.path.join(os.path.dirname(__file__), '..', 'results', 'README.md')
  ).read()
  section = readme.split(table_heading, 1)[1].split('\n\n', 2)[1]
  keys = {}
  for line in section.splitlines():
    if line.startswith('| `'):
      first, rest = line[2:].split('|', 1)
      for key in re.findall(r'`([^`]+)`', first):
        keys[key] = rest
  return keys


def test_record_has_the_schema_keys():
  result = result_testing.make_result(
    num_workers=1,
    global_batch_size=8,
    images_per_sec_per_device=5.0,
    precision_info=results.PrecisionInfo(loss_scale=128.0, skipped_steps=0),
  )
  record = result.to_record()
  documented = {
    k
    for k, meaning in documented_keys('## Schema').items()
    if 'multi-worker runs only' not in meaning
  }
  assert len(documented) > 20
  assert documented <= set(record), documented - set(record)
  assert record['final_loss'] == 2.0 and record['loss_scale'] == 128.0


def test_driver_records_have_the_run_keys(tmp_path):
  """A training run's line has every run key; an eval line the eval keys."""
  from tests import testing_models
  from tf_cnn_benchmarks import benchmark_cnn
  from tf_cnn_benchmarks.config import params as params_lib

  testing_models.ensure_registered()
  keys = documented_keys('Keys added by real data')
  eval_only = {
    k
    for k, meaning in keys.items()
    if 'eval lines' in meaning and 'not in eval lines' not in meaning
  }
  train_dir = str(tmp_path / 'train')
  common = dict(
    model='test_linear',
    data_name='cifar10',
    device='cpu',
    batch_size=4,
    num_warmup_batches=0,
    display_every=100,
    train_dir=train_dir,
  )
  train = benchmark_cnn.run_benchmark(
    params_lib.make_params(num_batches=2, **common), out=io.StringIO()
  )
  record = train.to_record()
  # Keys not always there (`run_length`: automatic lengths only).
  optional = {k for k, meaning in keys.items() if '| no |' in meaning}
  expected = set(keys) - eval_only - optional
  assert expected <= set(record), expected - set(record)
  assert (record['mode'], record['start_step'], record['end_step']) == (
    'train',
    0,
    2,
  )
  evaluated = benchmark_cnn.run_benchmark(
    params_lib.make_params(eval=True, num_batches=1, **common),
    out=io.StringIO(),
  ).to_record()
  assert eval_only <= set(evaluated), eval_only - set(evaluated)
  assert (evaluated['mode'], evaluated['checkpoint_step']) == ('eval', 2)


# ---- issue 28: spread of the step times and of images/sec -------------------


@pytest.mark.parametrize(
  'df, table_value',
  [(1, 12.706), (2, 4.303), (4, 2.776), (10, 2.228), (29, 2.045), (30, 2.042)],
)
def test_t_quantile_matches_the_printed_table(df, table_value):
  assert timing.t_quantile_975(df) == pytest.approx(table_value, abs=5e-4)


def test_t_quantile_large_df_tends_to_the_normal_and_is_continuous():
  # Tables: 1.984 at 100, 1.962 at 1000; the normal's 1.95996 in the limit.
  assert timing.t_quantile_975(100) == pytest.approx(1.984, abs=5e-4)
  assert timing.t_quantile_975(1000) == pytest.approx(1.962, abs=5e-4)
  assert timing.t_quantile_975(10**7) == pytest.approx(1.959964, abs=1e-5)
  # Where the exact series hands over to the expansion: no jump.
  series = timing.t_quantile_975(timing._SERIES_MAX_DF)
  expansion = timing.t_quantile_975(timing._SERIES_MAX_DF + 1)
  assert 0 < series - expansion < 1e-4
  with pytest.raises(ValueError):
    timing.t_quantile_975(0)


def test_t_quantile_covers_95_percent_of_simulated_t_samples():
  """A numpy reference: 95% of standard t samples lie within +/- t."""
  rng = np.random.default_rng(0)
  for df in (3, 7):
    samples = rng.standard_t(df, size=400_000)
    inside = np.mean(np.abs(samples) < timing.t_quantile_975(df))
    assert inside == pytest.approx(0.95, abs=2e-3)


STEP_TIMES = [0.010, 0.012, 0.011, 0.020, 0.009]


def test_step_time_ms_has_stderr_interval_and_n():
  stats = timing.step_time_ms(STEP_TIMES)
  ms = np.array(STEP_TIMES) * 1e3
  stderr = ms.std(ddof=1) / np.sqrt(5)
  assert stats['n'] == 5
  assert stats['mean'] == pytest.approx(ms.mean())
  assert stats['stderr'] == pytest.approx(stderr)
  assert stats['ci95_low'] == pytest.approx(ms.mean() - 2.7764451 * stderr)
  assert stats['ci95_high'] == pytest.approx(ms.mean() + 2.7764451 * stderr)
  one = timing.step_time_ms([0.01])
  assert one['n'] == 1 and one['mean'] == pytest.approx(10.0)
  assert one['stderr'] is one['ci95_low'] is one['ci95_high'] is None
  assert timing.step_time_ms([])['n'] == 0


def test_images_per_sec_spread_is_the_step_time_interval_as_rates():
  spread = timing.images_per_sec_spread(32, STEP_TIMES)
  times = np.array(STEP_TIMES)
  mean, se = times.mean(), times.std(ddof=1) / np.sqrt(5)
  rate = 32 / mean  # = total images / total time
  assert rate == pytest.approx(32 * 5 / times.sum())
  assert spread['stderr'] == pytest.approx(rate * se / mean)  # delta method
  assert spread['ci95_low'] == pytest.approx(32 / (mean + 2.7764451 * se))
  assert spread['ci95_high'] == pytest.approx(32 / (mean - 2.7764451 * se))
  assert spread['ci95_low'] < rate < spread['ci95_high']
  speeds = 32 / times
  mad = np.median(np.abs(speeds - np.median(speeds)))
  assert spread['jitter'] == pytest.approx(1.4826 * mad)
  # The console's jitter is the same figure.
  assert spread['jitter'] == pytest.approx(
    timing.speed_summary(32, STEP_TIMES).jitter
  )


def test_images_per_sec_spread_under_two_steps_and_unbounded():
  assert set(timing.images_per_sec_spread(8, [0.1]).values()) == {None}
  # Two very different steps: the time's lower bound is below 0.
  wide = timing.images_per_sec_spread(8, [0.01, 0.5])
  assert wide['ci95_high'] is None and wide['ci95_low'] > 0
  assert timing.interval_line(wide, 2).startswith(
    'images/sec 95% CI: [' + '%.2f' % wide['ci95_low'] + ', inf] (n=2 steps'
  )
  assert timing.interval_line(timing.images_per_sec_spread(8, [0.1]), 1) is None


def test_step_times_ms_are_rounded_to_microseconds():
  assert timing.step_times_ms([0.0123456789, 1.0]) == [12.346, 1000.0]


def test_record_keeps_the_step_times_and_spread():
  spread = timing.images_per_sec_spread(16, STEP_TIMES)
  result = result_testing.make_result(
    step_times_ms=timing.step_times_ms(STEP_TIMES),
    images_per_sec_spread=spread,
  )
  record = json.loads(json.dumps(result.to_record()))
  assert record['step_times_ms'] == [10.0, 12.0, 11.0, 20.0, 9.0]
  assert record['images_per_sec_spread'] == spread


def _fake_recorder(num_batches, times):
  from types import SimpleNamespace  # pylint: disable=g-import-not-at-top

  from tf_cnn_benchmarks.reporting import step_report  # pylint: disable=g-import-not-at-top

  params = SimpleNamespace(
    loss_type_to_report='total_loss',
    display_perf_ewma=None,
    forward_only=False,
    num_batches=num_batches,
  )
  clock = iter(times)
  return step_report.StepRecorder(params, None, None, clock=lambda: next(clock))


def test_step_row_ends_with_elapsed_and_eta_after_the_classic_columns():
  recorder = _fake_recorder(10, [100.0, 102.0, 110.0, 190.0])
  recorder.header()  # the timed steps start: clock 100
  speed = timing.speed_summary(8, [0.1, 0.1])
  row = recorder.row(2, speed, 1.23456)  # clock 102: 1 s a step, 8 left
  fields = row.split('\t')
  assert fields[:3] == ['2', str(speed), '1.235']  # the classic columns
  assert fields[3:] == ['elapsed 2.0s, ~8.0s left']
  assert recorder.row(10, speed, 1.0).split('\t')[3:] == ['elapsed 10.0s']
  assert recorder.progress(5) == 'elapsed 1m30s, ~1m30s left'


def test_cluster_label_names_the_clusters_figure_and_the_workers():
  from types import SimpleNamespace  # pylint: disable=g-import-not-at-top

  from tf_cnn_benchmarks.reporting import run_results  # pylint: disable=g-import-not-at-top

  local = SimpleNamespace(cluster=None, num_workers=1)
  assert run_results.cluster_label(local, 100.0) is None
  worker = SimpleNamespace(
    cluster=SimpleNamespace(job_name='worker'), num_workers=2
  )
  assert run_results.cluster_label(worker, 1828.4) == (
    "(cluster of 2 workers: total images/sec is the cluster's; "
    'this worker: 914.2 images/sec)'
  )
  controller = SimpleNamespace(
    cluster=SimpleNamespace(job_name='controller'), num_workers=2
  )
  assert run_results.cluster_label(controller, 10.0).endswith(
    'printed by the controller)'
  )


def test_final_block_keeps_the_classic_line_then_the_interval():
  from tests import testing_models  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks import benchmark_cnn  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks.config import params as params_lib  # pylint: disable=g-import-not-at-top

  testing_models.ensure_registered()
  out = io.StringIO()
  result = benchmark_cnn.run_benchmark(
    params_lib.make_params(
      model='test_linear',
      data_name='cifar10',
      device='cpu',
      batch_size=4,
      num_batches=5,
      num_warmup_batches=1,
      display_every=2,
    ),
    out=out,
  )
  record = result.to_record()
  lines = out.getvalue().splitlines()
  block = lines.index('total images/sec: %.2f' % record['images_per_sec'])
  spread = record['images_per_sec_spread']
  assert lines[block - 1] == '-' * 64 and lines[block + 2] == '-' * 64
  high = spread['ci95_high']  # None: unbounded, on a very noisy machine
  assert lines[block + 1] == (
    'images/sec 95%% CI: [%.2f, %s] (n=5 steps, stderr %.2f)'
    % (
      spread['ci95_low'],
      'inf' if high is None else '%.2f' % high,
      spread['stderr'],
    )
  )
  assert len(record['step_times_ms']) == record['step_time_ms']['n'] == 5
  # The line's rate is the one of its step times.
  # Each step time is rounded to 3 decimals (1 us), so their sum can be
  # off by 0.5 us a step: on sub-millisecond steps more than 0.1%.
  assert sum(record['step_times_ms']) == pytest.approx(
    4 * 5e3 / record['images_per_sec'], abs=5 * 0.0005 + 1e-9
  )
  rows = [ln.split('\t') for ln in lines if ln[:2] in ('1\t', '2\t', '4\t')]
  assert [r[0] for r in rows] == ['1', '2', '4']
  assert all(r[-1].startswith('elapsed ') for r in rows)
  assert rows[0][-1].endswith(' left') and len(rows[0]) == 4
