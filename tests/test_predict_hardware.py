"""Predicting a described GPU cluster: paper profiles, the hardware flags,
no TensorFlow, and the score on the published tables."""

import json
import os
import statistics
import subprocess
import sys

import pytest

from tf_cnn_benchmarks.commands import predict_scaling
from tf_cnn_benchmarks.commands import validate_on_paper
from tf_cnn_benchmarks.scaling import published
from tf_cnn_benchmarks.scaling.model import profile_format

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRADIENTS = os.path.join(REPO, 'results', 'gradients')
REPORT = os.path.join(REPO, 'results', 'published', 'validation.md')


def _paper(tmp_path, *extra):
  out = tmp_path / 'paper.json'
  args = [
    sys.executable,
    os.path.join(REPO, 'scripts', 'profile_host.py'),
    '--paper',
    '--model=resnet50',
    '--data_name=imagenet',
    '--batch_size=64',
    '--images_per_sec=219',
    '--device_name=P100',
    '--paper_gradients=' + os.path.join(GRADIENTS, 'resnet50_imagenet.json'),
    '--out=%s' % out,
    *extra,
  ]
  return subprocess.run(args, capture_output=True, text=True), out


def test_paper_profile_from_one_command(tmp_path):
  done, out = _paper(tmp_path)
  assert done.returncode == 0, done.stderr
  profile = profile_format.load_profile(str(out))
  assert profile.compute.step_ms == pytest.approx(64 / 219 * 1000)
  assert profile.host.device == 'gpu' and profile.host.device_name == 'P100'
  ready = [g.ready_ms for g in profile.gradients]
  # reverse variable order: the first variable's gradient is ready last
  assert ready[0] == pytest.approx(profile.compute.step_ms)
  assert min(ready) >= profile.compute.forward_ms
  for word in ('forward:backward = 1:2', 'FLOPs', 'assumed'):
    assert word in profile.notes


def test_paper_profile_bad_input_is_one_line(tmp_path):
  done, out = _paper(tmp_path, '--images_per_sec=-3')
  assert done.returncode == 2
  assert done.stderr.strip().count('\n') == 0
  assert '--images_per_sec' in done.stderr and not out.exists()


_NO_TF = """
import sys
from tf_cnn_benchmarks.commands import predict_scaling
status = predict_scaling.main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'tensorflow')
print(json.dumps({'status': status, 'tensorflow': loaded}))
"""


@pytest.mark.parametrize(
  'flags',
  [
    ['--intra_link=nvlink2', '--network=rdma', '--num_workers=4'],
    ['--num_workers=2', '--num_ps=1', '--link_mbits=100'],
  ],
)
def test_a_prediction_from_a_profile_loads_no_tensorflow(tmp_path, flags):
  done, out = _paper(tmp_path)
  assert done.returncode == 0
  profile = (
    str(out)
    if '--intra_link=nvlink2' in flags
    else (os.path.join(REPO, 'tests', 'data', 'profile_resnet20_cpu.json'))
  )
  run = subprocess.run(
    [sys.executable, '-c', 'import json\n' + _NO_TF, '--profile=' + profile]
    + flags,
    capture_output=True,
    text=True,
    cwd=REPO,
    env=dict(os.environ, PYTHONPATH=REPO),
  )
  last = json.loads(run.stdout.strip().splitlines()[-1])
  assert last == {'status': 0, 'tensorflow': []}, run.stderr


def test_hardware_flags_reach_the_json_lines(tmp_path, capsys):
  done, profile = _paper(tmp_path)
  out = tmp_path / 'p.jsonl'
  status = predict_scaling.main(
    [
      '--profile=%s' % profile,
      '--num_workers=2,16',
      '--devices_per_worker=8',
      '--intra_link=nvlink1',
      '--network=rdma',
      '--link_mbits=100000',
      '--num_ps=2',
      '--ps_placement=worker_hosts',
      '--gradient_precision=fp16',
      '--variable_update=horovod,parameter_server,collective_all_reduce',
      '--json_out=%s' % out,
    ]
  )
  assert status == 0
  lines = [json.loads(x) for x in out.read_text().splitlines()]
  assert {x['variable_update'] for x in lines} == {
    'horovod',
    'parameter_server',
    'collective_all_reduce',
  }
  for x in lines:
    assert x['intra'] == 'nvlink1' and x['network'] == 'rdma'
    assert x['gradient_precision'] == 'fp16' and x['num_ps'] == 2
    assert x['band_low'] <= x['predicted_images_per_sec'] <= x['band_high']
  assert 'NVLink 1' in capsys.readouterr().out


def test_peer_gpus_routes_a_ring_through_host_memory(tmp_path, capsys):
  done, profile = _paper(tmp_path)
  rates = {}
  for peers in ('8', '1'):
    out = tmp_path / ('p%s.jsonl' % peers)
    status = predict_scaling.main(
      [
        '--profile=%s' % profile,
        '--devices_per_worker=8',
        '--intra_link=pcie4',
        '--peer_gpus=%s' % peers,
        '--variable_update=replicated',
        '--all_reduce_spec=nccl',
        '--json_out=%s' % out,
      ]
    )
    assert status == 0
    (line,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert line['peer_gpus'] == int(peers)
    rates[peers] = line['predicted_images_per_sec']
  assert 'through host memory' in capsys.readouterr().out
  # the same ring at NCCL's 24 GB/s host path instead of PCIe 4.0's payload
  assert rates['1'] < rates['8']


def test_a_bad_hardware_flag_is_one_line(tmp_path, capsys):
  done, profile = _paper(tmp_path)
  status = predict_scaling.main(
    ['--profile=%s' % profile, '--network=carrier_pigeon']
  )
  err = capsys.readouterr().err
  assert status == 2 and err.count('\n') == 1
  assert '--network=carrier_pigeon' in err and 'rdma' in err


def test_validate_on_paper_scores_every_multi_gpu_row(tmp_path):
  rows_file, report = tmp_path / 'rows.jsonl', tmp_path / 'v.md'
  status = validate_on_paper.main(
    ['--rows=%s' % rows_file, '--report=%s' % report]
  )
  assert status == 0
  rows = [json.loads(x) for x in rows_file.read_text().splitlines()]
  assert rows and all(r['num_gpus'] > 1 for r in rows)
  for r in rows:
    base = r['published'] / (r['num_gpus'] * r['published_eff'])
    assert r['predicted'] == pytest.approx(
      r['predicted_eff'] * r['num_gpus'] * base
    )
  errors = [abs(r['predicted_eff'] - r['published_eff']) * 100 for r in rows]
  line = '| hardware model | %d | %.1f |' % (
    len(rows),
    statistics.median(errors),
  )
  text = report.read_text()
  assert line in text
  # the committed report is this run's
  with open(REPORT, encoding='utf-8') as f:
    assert f.read() == text


def test_rows_become_targets_by_their_hardware_and_software():
  rows = published.load_tables(published.default_folder())
  by = {(r.hardware.hardware, r.variable_update, r.num_gpus): r for r in rows}
  # the ps managers' bytes go by gRPC (TCP) even over Piz Daint's Aries
  daint = by[('cscs_piz_daint_p100', 'parameter_server', 8)]
  assert validate_on_paper.hardware_of(daint).network == 'tcp'
  # peer access as the table's own log read it: 2080 Tis none, Quadros all
  ti = validate_on_paper.hardware_of(
    by[('lambda_xeon6230_rtx2080ti', 'replicated', 8)]
  )
  quadro = validate_on_paper.hardware_of(
    by[('lambda_xeon6230_quadro_rtx8000', 'replicated', 8)]
  )
  # and two 2080 Tis on each upstream link (bus ids 1a 1b, 3d 3e ...)
  assert ti.peer_gpus == 1 and ti.gpus_per_host_link == 2
  assert ti.ring_link().gb_s == pytest.approx(9.0 / 2)  # SHM, shared
  assert quadro.ring_link().gb_s == pytest.approx(15.75)
  # tf_cnn_benchmarks' default --local_parameter_device=gpu where the row
  # sets none, and distributed_replicated always has a ps task
  one = [
    r
    for r in rows
    if r.variable_update == 'distributed_replicated' and r.num_gpus == 1
  ][0]
  assert not one.local_parameter_device and not one.num_ps
  target = validate_on_paper.hardware_of(one)
  assert target.local_parameter_device == 'gpu' and target.num_ps == 1


def test_the_manual_quotes_the_report():
  """docs/predicting.md's accuracy row is the committed report's."""
  with open(REPORT, encoding='utf-8') as f:
    row = [x for x in f if x.startswith('| hardware model |')][0]
  with open(os.path.join(REPO, 'docs', 'predicting.md'), encoding='utf-8') as f:
    assert row in f.read()
