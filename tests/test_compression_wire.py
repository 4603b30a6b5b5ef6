"""What each compressor puts on the wire, and what the predictors make of it.

The catalog's bytes (variable_mgr/compression/catalog.py) against the
placement report of a built graph and a hand computation; the predictors
(cost_model_compression.py in the simulation and the hardware model)
against hand computations; the compression benchmark's bad input and its
table from a fixture of JSON lines.
"""

import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys

import pytest

from tests import testing_models
from tests.test_hardware_model import _hw
from tests.test_hardware_model import _profile
from tf_cnn_benchmarks import __main__ as cli
from tf_cnn_benchmarks.commands import compression_benchmark as bench
from tf_cnn_benchmarks.commands import predict_scaling
from tf_cnn_benchmarks.scaling.auto import auto
from tf_cnn_benchmarks.scaling.model import cost_model
from tf_cnn_benchmarks.scaling.model import cost_model_compression as cmc
from tf_cnn_benchmarks.scaling.model import hardware_model as hm
from tf_cnn_benchmarks.scaling.model import profile_format as fmt
from tf_cnn_benchmarks.scaling.model import target as target_lib
from variable_mgr.compression import catalog
from variable_mgr.compression import powersgd

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, 'scripts', 'compression_benchmark.py')
FIXTURE = os.path.join(REPO, 'tests', 'fixtures', 'compression_grid.jsonl')
# test_linear: weights 12 x 10, biases 10, float32.
LINEAR = [((12, 10), 'float32'), ((10,), 'float32')]


# ---- the catalog's bytes -----------------------------------------------------


def test_bytes_by_hand():
  none = (12 * 10 + 10) * 4
  assert catalog.wire_bytes('none', LINEAR) == none
  for cast in ('fp16', 'bf16', 'fp16_ef', 'bf16_ef'):
    assert catalog.wire_bytes(cast, LINEAR) == none // 2
  # rank 4: P 12 x 4 and Q 10 x 4 floats; the vector travels whole.
  assert catalog.wire_phases('powersgd', (12, 10), 'float32', 4) == (
    12 * 4 * 4,
    10 * 4 * 4,
  )
  assert catalog.wire_bytes('powersgd', LINEAR, 4) == 4 * (4 * 22 + 10)
  # a conv kernel [3, 3, 16, 32] is 144 x 32; rank 2: 2 (144 + 32) floats.
  assert catalog.wire_bytes('powersgd', [((3, 3, 16, 32), 'float32')], 2) == (
    2 * 176 * 4
  )
  # too small to gain (r (n + m) >= n m), and float16 gradients: whole.
  assert catalog.wire_phases('powersgd', (4, 4), 'float32', 4) == (64, 0)
  assert catalog.wire_bytes('fp16', [((8,), 'float16')]) == 16


def test_powersgd_reads_the_catalogs_rule():
  for shape in [(12, 10), (4, 4), (3, 3, 16, 32), (7,)]:
    assert powersgd.matrix_shape(shape, 4) == catalog.matrix_shape(shape, 4)


def test_work_by_hand():
  assert catalog.work('none', LINEAR) == catalog.Work()
  assert catalog.work('fp16', LINEAR).elementwise == 2 * 130
  assert catalog.work('fp16_ef', LINEAR).elementwise == 5 * 130
  w = catalog.work('powersgd', LINEAR, 4)
  assert w.elementwise == 3 * 120  # the vector is not compressed
  assert w.matmul_flops == 3 * 2 * 12 * 10 * 4 + 2 * 12 * 16
  assert w.matmul_elements == 3 * 120


def _report_bytes(tmp_path, compressor) -> dict:
  """{(src, dst): bytes} of a built two-tower step (GPU strings, pscpu)."""
  testing_models.ensure_registered()
  cli.FLAGS.unparse_flags()
  path = tmp_path / ('%s.json' % compressor)
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    status = cli.main(
      [
        'tf_cnn_benchmarks',
        '--model=test_linear',
        '--data_name=cifar10',
        '--batch_size=2',
        '--device=gpu',
        '--num_gpus=2',
        '--variable_update=replicated',
        '--all_reduce_spec=pscpu',
        '--build_only',
        '--gradient_compression=%s' % compressor,
        '--placement_file=%s' % path,
      ]
    )
  assert status == 0, err.getvalue()
  rows = json.loads(path.read_text())['summary']['step_transfers']
  return {(r['src'], r['dst']): r['bytes'] for r in rows}


@pytest.mark.parametrize('compressor', ['fp16', 'bf16_ef', 'powersgd'])
def test_report_against_the_catalog(tmp_path, compressor):
  """Each tower's bytes to the CPU that sums them: the catalog's figure
  beyond none's (the rest of the step's transfers are the same)."""
  none = _report_bytes(tmp_path, 'none')
  got = _report_bytes(tmp_path, compressor)
  saved = catalog.wire_bytes('none', LINEAR) - catalog.wire_bytes(
    compressor, LINEAR
  )
  assert saved > 0
  for gpu in ('/device:GPU:0', '/device:GPU:1'):
    up = (gpu, '/device:CPU:0')
    assert none[up] - got[up] == saved
  # The state's finiteness check sends one-byte verdicts between the
  # towers, not a tower's state (a gradient's size).
  across = got.get(('/device:GPU:1', '/device:GPU:0'), 0)
  assert across < 8


# ---- the predictors ----------------------------------------------------------


def _matrix_profile(step_ms=100.0, ms_per_mb=0.0):
  """A GPU profile with one 1000 x 1000 float32 matrix and one vector."""
  grads = (
    fmt.Gradient('w', (1000, 1000), 'float32', 4_000_000, 60.0),
    fmt.Gradient('b', (1000,), 'float32', 4000, 90.0),
  )
  apply = fmt.ApplyCost(0.0, ms_per_mb)
  return dataclasses.replace(
    _profile([(4, 1.0)], step_ms),
    gradients=grads,
    apply=fmt.Apply(apply, apply),
  )


def test_hardware_messages_by_hand():
  p = _matrix_profile(ms_per_mb=0.01)
  fp16 = cmc.Compression('fp16')
  msgs, work = cmc.messages(fp16, p, 1.0)
  # 2 passes over each float32 element at 0.01 ms per MB.
  w_ms = 2 * 4_000_000 / 1e6 * 0.01
  b_ms = 2 * 4000 / 1e6 * 0.01
  assert work == pytest.approx(w_ms + b_ms)
  assert msgs == [
    pytest.approx((60.0 + w_ms / 2, 2_000_000.0)),
    pytest.approx((90.0 + (w_ms + b_ms) / 2, 2000.0)),
  ]
  psgd = cmc.Compression('powersgd', 4)
  msgs, work = cmc.messages(psgd, p, 1.0)
  assert [m[1] for m in msgs] == [16000.0, 16000.0, 4000.0]
  assert work == pytest.approx(6 * 4_000_000 / 1e6 * 0.01)


def test_hardware_step_with_compression_by_hand():
  """2 hosts x 1 GPU, a ring of 2: moved bytes / link + 2 steps' latency,
  the messages one after another from their ready times; the step ends
  when the last message does (no compute work at ms_per_mb 0)."""
  p = _matrix_profile()
  hw = _hw(num_workers=2, gpus_per_host=1, link_mbits=200.0, network='rdma')
  costs = hm.Costs(hw)
  bw = min(costs.b_intra, costs.b_net)
  lat = costs.l_net + hm.TF_STEP_US

  def queue(messages):
    t = 0.0
    for ready, nbytes in messages:
      t = max(t, ready) + (nbytes / bw + 2 * lat) / 1000.0
    return t

  sent = {
    'none': [(60.0, 4_000_000), (90.0, 4000)],
    'fp16': [(60.0, 2_000_000), (90.0, 2000)],
    'powersgd': [(60.0, 16000), (60.0, 16000), (90.0, 4000)],
  }
  steps = {}
  for name, messages in sent.items():
    strategy = cost_model.Strategy(
      'collective_all_reduce', gradient_compression=name
    )
    steps[name] = hm.step(p, hw, strategy).step_ms
    assert steps[name] == pytest.approx(max(100.0, queue(messages)))
  assert steps['none'] > steps['fp16'] > steps['powersgd']


def test_simulation_prices_bytes_and_work():
  """The test-bed model on a slow link: the casts halve the wire time, and
  PowerSGD's work (at the profile's apply rate) counts."""
  profile = fmt.load_profile(
    os.path.join(REPO, 'results', 'profiles', 'alexnet_cifar10_b32_cpu.json')
  )
  target = target_lib.make_target(
    num_workers=3, link_mbits=25.0, topology='shared', colocated=True
  )

  def rate(name, prof=profile):
    s = cost_model.Strategy('collective_all_reduce', gradient_compression=name)
    return cost_model.predict(prof, target, s).images_per_sec

  none, fp16, psgd = rate('none'), rate('fp16'), rate('powersgd')
  assert 1.7 < fp16 / none < 2.05  # the link's share of the step halves
  assert psgd > fp16
  # Without the profile's measured figures the work is priced at the
  # apply's rate: a slower apply slows PowerSGD.
  assumed = dataclasses.replace(profile, compressors=None)
  slow_apply = dataclasses.replace(
    assumed,
    apply=fmt.Apply(
      dataclasses.replace(profile.apply.worker, ms_per_mb=5.0),
      profile.apply.ps,
    ),
  )
  assert rate('powersgd', slow_apply) < rate('powersgd', assumed)


def test_strategy_checks():
  p = _matrix_profile()
  hw = _hw(num_workers=2, gpus_per_host=1, num_ps=1)
  with pytest.raises(cost_model.StrategyError, match='modelled for'):
    cost_model.check_strategy(
      cost_model.Strategy('parameter_server', gradient_compression='fp16'),
      hw,
      p,
    )
  with pytest.raises(cost_model.StrategyError, match='repacking'):
    cost_model.check_strategy(
      cost_model.Strategy(
        'collective_all_reduce',
        gradient_repacking=2,
        gradient_compression='fp16',
      ),
      hw,
      p,
    )


# ---- the benchmark script ----------------------------------------------------


@pytest.mark.parametrize(
  'flag, word',
  [
    ('--compressors=none,zip', '--compressors'),
    ('--links=0,-5', '--links'),
    ('--variable_updates=parameter_server', '--variable_updates'),
    ('--workers=1', '--workers'),
    ('--table_from=/no/such/file.jsonl', '--table_from'),
  ],
)
def test_bad_input_is_one_line(flag, word):
  proc = subprocess.run(
    [sys.executable, SCRIPT, flag],
    capture_output=True,
    text=True,
    timeout=120,
    cwd=REPO,
  )
  assert proc.returncode == 2
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and word in lines[0]


def test_table_from_fixture():
  lines = bench.read_lines(FIXTURE)
  rows = bench.table(lines)
  assert rows[0].split(' | ')[4:] == [
    'img/s loopback',
    'img/s 100 Mbit/s',
    'img/s 25 Mbit/s |',
  ]
  cells = {r.split(' | ')[2]: r.split(' | ')[3:] for r in rows[2:]}
  assert cells['none'] == ['7.026', '100.00', '40.00', '10.00 |']  # no ratio
  assert cells['fp16'] == [
    '3.513 (0.50x)',
    '90.00 (0.90x)',
    '60.00 (1.50x)',
    '19.00 (1.90x) |',
  ]
  assert cells['powersgd'][0] == '0.116 (0.02x)'
  assert cells['powersgd'][3] == '- |'  # not run at 25 Mbit/s


def test_table_from_bad_line(tmp_path):
  bad = tmp_path / 'bad.jsonl'
  bad.write_text('{"model": "alexnet"}\n')
  proc = subprocess.run(
    [sys.executable, SCRIPT, '--table_from=%s' % bad],
    capture_output=True,
    text=True,
    timeout=120,
    cwd=REPO,
  )
  assert proc.returncode == 2
  assert proc.stderr.strip().count('\n') == 0 and 'bad.jsonl:1' in proc.stderr


def test_cells_take_every_compressor_of_the_catalog():
  args = bench.parse_args(['--models=alexnet', '--links=25'])
  names = [c['gradient_compression'] for c in bench.cells(args)]
  assert names == list(catalog.NAMES)
  argv = bench.cluster_argv(
    args, 'alexnet', 'collective_all_reduce', 'fp16', 25
  )
  assert '--link_mbits=25' in argv and '--gradient_compression=fp16' in argv
  loop = bench.cluster_argv(args, 'alexnet', 'collective_all_reduce', 'none', 0)
  assert not any(a.startswith('--link_mbits') for a in loop)


def test_auto_weighs_the_runs_compressor():
  """--variable_update=auto prices the run's own compressor where the model
  prices it (managers that all-reduce every gradient) and none elsewhere."""
  profile = fmt.load_profile(
    os.path.join(REPO, 'results', 'profiles', 'trivial_cifar10_b32_cpu.json')
  )
  overrides = {'num_gpus': 2, 'gradient_compression': 'fp16'}
  target = auto.target_for(overrides, None)
  got = {
    s.variable_update: s.gradient_compression
    for s in auto.candidates(overrides, profile, target, None)
  }
  assert got['replicated'] == 'fp16'
  assert got['parameter_server'] == 'none'
  repacked = dict(overrides, gradient_repacking=2)
  got = auto.candidates(repacked, profile, target, None)
  assert {s.gradient_compression for s in got} == {'none'}


def test_prediction_table_from_fixture():
  """Each cell against the test-bed model, as is and with the profile's CPU
  times scaled by k = predicted / measured of the loopback none cell."""
  lines = bench.read_lines(FIXTURE)
  rows = bench.prediction_table(
    lines, os.path.join(REPO, 'results', 'profiles')
  )
  assert len(rows) == 2 + len(lines)
  profile = bench.model_profile(
    os.path.join(REPO, 'results', 'profiles'), 'alexnet', 'cifar10', 32
  )
  k = bench.predicted(profile, lines[0]) / lines[0]['images_per_sec']
  fp16_25 = next(
    ln
    for ln in lines
    if ln['gradient_compression'] == 'fp16' and ln['link_mbits'] == 25
  )
  row = next(r for r in rows if '| fp16 | 25 Mbit/s |' in r).split(' | ')
  guess = bench.predicted(profile, fp16_25)
  scaled = bench.predicted(bench.slowed(profile, k), fp16_25)
  assert row[4] == '%.2f' % guess
  assert row[6] == '%.2f' % k
  assert row[7] == '%.2f' % scaled
  assert row[8] == '%+.0f%% |' % ((scaled / 19.0 - 1) * 100)
  # A slower CPU slows a compute-bound cell.
  loop = bench.predicted(bench.slowed(profile, 3.0), lines[0])
  assert loop < bench.predicted(profile, lines[0])


@pytest.mark.parametrize(
  'flag, word',
  [
    ('--gradient_compression=zip', '--gradient_compression=zip'),
    ('--powersgd_rank=0', '--powersgd_rank=0'),
  ],
)
def test_predict_scaling_bad_compression_flags(flag, word, capsys):
  profile = os.path.join(
    REPO, 'results', 'profiles', 'trivial_cifar10_b32_cpu.json'
  )
  status = predict_scaling.main(
    ['--profile=' + profile, '--num_workers=2', flag]
  )
  err = capsys.readouterr().err.strip().splitlines()
  assert status == 2 and len(err) == 1 and word in err[0]


def test_predict_scaling_prices_every_compressor(capsys, tmp_path):
  profile = os.path.join(
    REPO, 'results', 'profiles', 'alexnet_cifar10_b32_cpu.json'
  )
  out = tmp_path / 'p.jsonl'
  status = predict_scaling.main(
    [
      '--profile=' + profile,
      '--num_workers=3',
      '--link_mbits=25',
      '--topology=shared',
      '--colocated',
      '--variable_update=collective_all_reduce',
      '--gradient_compression=all',
      '--json_out=%s' % out,
    ]
  )
  assert status == 0, capsys.readouterr().err
  lines = [json.loads(x) for x in out.read_text().splitlines()]
  got = {
    x['gradient_compression']: x['predicted_images_per_sec']
    for x in lines
    if x['variable_update'] == 'collective_all_reduce'
  }
  assert list(got) == list(catalog.NAMES)
  assert got['fp16'] > got['none'] and got['powersgd'] > got['fp16']
