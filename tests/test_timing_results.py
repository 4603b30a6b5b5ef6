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
  assert set(keys) - eval_only <= set(record), set(keys) - set(record)
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
