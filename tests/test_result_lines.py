"""The one appender of results lines, the reader, and typed results records."""

import dataclasses
import json
import math
import os
import subprocess
import sys

import pytest

from tests.result_testing import make_result
from tf_cnn_benchmarks.reporting import result_lines
from tf_cnn_benchmarks.reporting import results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def strict_loads(line: str):
  """json.loads that rejects NaN, Infinity and -Infinity, as RFC 8259 does."""

  def reject(name):
    raise ValueError('non-standard JSON constant %s' % name)

  return json.loads(line, parse_constant=reject)


def test_a_file_missing_its_final_newline_gets_one_before_the_record(tmp_path):
  path = tmp_path / 'r.jsonl'
  path.write_text('{"a": 1}')  # a complete record, no final newline
  result_lines.append_json_line(str(path), {'b': 2})
  text = path.read_text()
  assert text == '{"a": 1}\n{"b": 2}\n'
  assert [strict_loads(line) for line in text.splitlines()] == [
    {'a': 1},
    {'b': 2},
  ]
  assert [r for _, r in result_lines.read_json_lines(str(path))] == [
    {'a': 1},
    {'b': 2},
  ]


def test_several_records_are_one_write_and_none_is_nothing(tmp_path):
  path = tmp_path / 'r.jsonl'
  result_lines.append_json_lines(str(path), [{'a': 1}, {'b': 2}])
  result_lines.append_json_lines(str(path), [])
  assert path.read_text() == '{"a": 1}\n{"b": 2}\n'


def test_non_finite_numbers_are_written_as_null(tmp_path):
  path = tmp_path / 'r.jsonl'
  result_lines.append_json_line(
    str(path),
    {
      'final_loss': math.nan,
      'losses': [2.5, math.inf, -math.inf, math.nan],
      'nested': {'x': (math.nan, 1)},
      'n': 3,
    },
  )
  line = path.read_text()
  assert 'NaN' not in line and 'Infinity' not in line
  assert strict_loads(line) == {
    'final_loss': None,
    'losses': [2.5, None, None, None],
    'nested': {'x': [None, 1]},
    'n': 3,
  }


def test_a_diverged_loss_is_null_in_the_results_line(tmp_path):
  diverged = dataclasses.replace(make_result(), losses=[3.0, math.nan])
  path = tmp_path / 'r.jsonl'
  result_lines.append_json_line(str(path), diverged.to_record())
  record = strict_loads(path.read_text())
  assert record['losses'] == [3.0, None] and record['final_loss'] is None


# The keys and values the driver's `extra` dicts added before results were
# typed: a training line of worker 1 of a cluster, and an eval line.
BASE_KEYS = {
  'schema_version',
  'status',
  'error',
  'utc_time',
  'params',
  'env',
  'model',
  'data_name',
  'variable_update',
  'all_reduce_spec',
  'all_reduce_spec_description',  # schema_version 2 (issue 28)
  'precision',
  'num_devices',
  'num_workers',
  'batch_size_per_device',
  'global_batch_size',
  'num_steps',
  'num_warmup_steps',
  'images_per_sec',
  'images_per_sec_per_device',
  'step_time_ms',
  'losses',
  'flops_per_image',
  'tflops_per_sec',
  'peak_tflops_per_device',
  'mfu',
  'peak_tflops_origin',
  'final_loss',
  'step_times_ms',  # issue 28: the spread of the run
  'images_per_sec_spread',
  'gradient_compression',  # issue 56: the compressor and its setting
  'powersgd_rank',
  'gradient_accumulation_steps',  # issue 56, item 6: micro-steps per update
  'collective_implementation',  # issue 56: the collectives and settings
  'collective_bytes_per_pack',
  'collective_merge_scope',
}
EVAL_KEYS = {
  'checkpoint_step': 4,
  'top_1_accuracy': 0.25,
  'top_5_accuracy': 0.75,
  'eval_examples': 8,
  'eval_examples_per_sec': 80.0,
}
OLD_TRAIN_EXTRA = {
  'data_dir': '/data',
  'loss_scale': 128.0,
  'skipped_steps': 1,
  'mode': 'train',
  'start_step': 2,
  'end_step': 6,
  'evals': [EVAL_KEYS],
  'time_to_accuracy_sec': None,  # --stop_at_top_1_accuracy (issue 14)
  'steps_to_accuracy': None,
  'images_per_sec_per_worker': 5.0,
  'task': {'job_name': 'worker', 'task_index': 1},
  'benchmark_test_id': None,  # added with --benchmark_test_id (issue 14)
}
OLD_EVAL_EXTRA = {
  'data_dir': None,
  'mode': 'eval',
  'benchmark_test_id': None,
  **EVAL_KEYS,
}
EVAL_INFO = results.EvalInfo(
  checkpoint_step=4,
  top_1_accuracy=0.25,
  top_5_accuracy=0.75,
  eval_examples=8,
  eval_examples_per_sec=80.0,
)


def test_typed_results_serialise_to_the_keys_of_before():
  train = make_result(
    run=results.RunInfo(mode='train', data_dir='/data'),
    precision_info=results.PrecisionInfo(loss_scale=128.0, skipped_steps=1),
    training=results.TrainInfo(start_step=2, end_step=6, evals=(EVAL_INFO,)),
    cluster=results.ClusterInfo(
      images_per_sec_per_worker=5.0,
      task=results.TaskInfo(job_name='worker', task_index=1),
    ),
  ).to_record()
  assert set(train) == BASE_KEYS | set(OLD_TRAIN_EXTRA)
  assert {k: train[k] for k in OLD_TRAIN_EXTRA} == OLD_TRAIN_EXTRA
  evaluated = make_result(
    run=results.RunInfo(mode='eval', data_dir=None), evaluation=EVAL_INFO
  ).to_record()
  assert set(evaluated) == BASE_KEYS | set(OLD_EVAL_EXTRA)
  assert {k: evaluated[k] for k in OLD_EVAL_EXTRA} == OLD_EVAL_EXTRA
  # No optional part: only the base keys; no evaluation during training: null.
  assert set(make_result().to_record()) == BASE_KEYS
  quiet = make_result(training=results.TrainInfo(start_step=0, end_step=3))
  assert quiet.to_record()['evals'] is None
  # What is written is what to_record says (apart from the key order).
  assert json.loads(result_lines.to_json_line(train)) == train


def test_an_unknown_mode_is_refused():
  with pytest.raises(ValueError, match='mode'):
    results.RunInfo(mode='training', data_dir=None)


def test_reader_names_the_line_and_skips_blank_ones(tmp_path):
  path = tmp_path / 'r.jsonl'
  path.write_text('{"a": 1}\n\n[1]\n')
  with pytest.raises(
    result_lines.ResultsFileError,
    match=r'r\.jsonl:3: not a JSON object \(fix it\)$',
  ):
    result_lines.read_json_lines(str(path), hint='fix it')
  warnings = []
  assert result_lines.read_json_lines(
    str(path), skip_bad=True, warn=warnings.append
  ) == [(1, {'a': 1})]
  assert warnings == ['%s:3: skipped: not a JSON object' % path]
  with pytest.raises(
    result_lines.ResultsFileError, match='no such results file'
  ):
    result_lines.read_json_lines(str(tmp_path / 'nope.jsonl'))


WRITER = """
import sys
from tf_cnn_benchmarks.reporting import result_lines
path, writer = sys.argv[1], int(sys.argv[2])
for i in range(200):
  result_lines.append_json_lines(
      path, [{'writer': writer, 'i': i, 'pad': 'x' * 3000, 'part': part}
             for part in (0, 1)])
"""


def test_concurrent_appenders_leave_whole_lines_after_a_torn_one(tmp_path):
  """Four processes append 400 lines each to a file with a torn last line."""
  path = tmp_path / 'r.jsonl'
  path.write_text('{"torn": ')
  procs = [
    subprocess.Popen(
      [sys.executable, '-c', WRITER, str(path), str(w)], cwd=ROOT
    )
    for w in range(4)
  ]
  assert [p.wait(timeout=120) for p in procs] == [0] * 4
  lines = path.read_text().split('\n')
  assert lines[0] == '{"torn": ' and lines[-1] == ''
  records = [strict_loads(line) for line in lines[1:-1]]  # no blank line
  assert len(records) == 4 * 200 * 2
  for w in range(4):
    mine = [(r['i'], r['part']) for r in records if r['writer'] == w]
    assert mine == [(i, part) for i in range(200) for part in (0, 1)]
