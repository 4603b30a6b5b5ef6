"""`python -m tf_cnn_benchmarks` as users run it: output, results, bad flags."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cli(*flags, timeout=300):
  return subprocess.run(
    [sys.executable, '-m', 'tf_cnn_benchmarks', *flags],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=timeout,
  )


def test_replicated_run_prints_table_and_appends_a_json_line(tmp_path):
  result_file = tmp_path / 'r.jsonl'
  result_file.write_text('{"earlier": "line"}\n')
  proc = run_cli(
    '--device=cpu',
    '--model=trivial',
    '--data_name=cifar10',
    '--num_gpus=2',
    '--variable_update=replicated',
    '--batch_size=8',
    '--num_batches=4',
    '--num_warmup_batches=2',
    '--display_every=2',
    '--result_file=%s' % result_file,
  )
  assert proc.returncode == 0, proc.stderr
  out = proc.stdout
  for expected in (
    'Model:       trivial',
    'Batch size:  16 global',
    'Running warm up',
    'Done warm up',
    'Step\tImg/sec\ttotal_loss',
    'total images/sec: ',
  ):
    assert expected in out
  rows = [line for line in out.splitlines() if '\timages/sec: ' in line]
  assert [row.split('\t')[0] for row in rows] == ['1', '2', '4']
  lines = result_file.read_text().splitlines()
  assert len(lines) == 2 and json.loads(lines[0]) == {'earlier': 'line'}
  record = json.loads(lines[1])
  assert record['status'] == 'ok'
  assert record['num_devices'] == 2 and record['global_batch_size'] == 16
  assert record['batch_size_per_device'] == 8
  assert record['variable_update'] == 'replicated'
  assert record['params']['num_gpus'] == 2
  assert len(record['losses']) == 6  # warm-up included
  assert record['num_steps'] == 4 and record['num_warmup_steps'] == 2
  assert record['images_per_sec'] > 0
  assert record['images_per_sec_per_device'] == pytest.approx(
    record['images_per_sec'] / 2
  )
  assert record['flops_per_image'] > 0
  total = float(out.split('total images/sec: ')[1].split()[0])
  assert total == pytest.approx(record['images_per_sec'], rel=1e-3)
  for key in ('tensorflow', 'python', 'cpu_model', 'num_cores', 'device_kind'):
    assert key in record['env']
  # issue 28 added the spread of the mean to the classic three.
  assert set(record['step_time_ms']) == {
    'mean',
    'p50',
    'p90',
    'stderr',
    'ci95_low',
    'ci95_high',
    'n',
  }
  assert record['step_time_ms']['n'] == len(record['step_times_ms']) == 4


@pytest.mark.parametrize(
  'flags,names',
  [
    (['--model=resnet9000'], '--model'),
    (['--variable_update=magic'], '--variable_update'),
    (['--optimizer=lamb'], '--optimizer'),
    (['--device=cpu', '--num_gpus=0'], '--num_gpus'),
    (['--device=cpu', '--batch_size=-1'], '--batch_size'),
    (['--device=gpu'], '--device'),
    (['--data_format=NWHC'], '--data_format'),
    (['--num_gpus=two'], '--num_gpus'),
    (['--no_such_flag=1'], 'no_such_flag'),
    (['--num_batches=10', '--num_epochs=1'], '--num_epochs'),
    (['--use_fp16', '--use_bf16'], '--use_fp16 and --use_bf16'),
    (
      [
        '--device=cpu',
        '--all_reduce_spec=nccl',
        '--variable_update=replicated',
      ],
      'nccl',
    ),
  ],
)
def test_bad_flags_exit_2_with_one_line(flags, names, tmp_path):
  result_file = tmp_path / 'r.jsonl'
  proc = run_cli(*flags, '--result_file=%s' % result_file, timeout=120)
  assert proc.returncode == 2
  lines = proc.stderr.strip().splitlines()
  if '--device=gpu' in flags:  # issue 30: TensorFlow's reasons come first
    from tf_cnn_benchmarks.platform import quiet  # pylint: disable=g-import-not-at-top

    lines = lines[len(quiet.gpu_reason_lines(proc.stderr)) :]
  assert len(lines) == 1, proc.stderr
  assert names in lines[0]
  assert 'Traceback' not in proc.stderr
  assert not result_file.exists()
