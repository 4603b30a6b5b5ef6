"""The compressors' compute in a profile, and the predictors' use of it.

profile_compression.py times each compressor of the registry on a
one-replica Wire with an identity reduction (a tiny gradient list, CPU);
the profile keeps the figures (profile.compressors) and reads older files
without them; cost_model_compression.py spreads a measured figure over the
gradients (hand computations on a fake profile) and falls back to the
apply-rate assumption when there is none.
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.test_hardware_model import _profile
from tf_cnn_benchmarks.commands import compression_benchmark as bench
from tf_cnn_benchmarks.scaling.model import cost_model
from tf_cnn_benchmarks.scaling.model import cost_model_compression as cmc
from tf_cnn_benchmarks.scaling.model import profile_format as fmt
from tf_cnn_benchmarks.scaling.model import target as target_lib
from tf_cnn_benchmarks.scaling.profile import profile_compression
from variable_mgr.compression import registry

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROFILES = os.path.join(REPO, 'results', 'profiles')
# A matrix, a conv kernel and a vector: large enough that each compressor's
# ops take longer than reading the variables (the baseline).
GRADIENTS = (
  fmt.Gradient('w', (1024, 512), 'float32', 1024 * 512 * 4, 1.0),
  fmt.Gradient('k', (3, 3, 32, 64), 'float32', 3 * 3 * 32 * 64 * 4, 1.0),
  fmt.Gradient('b', (256,), 'float32', 256 * 4, 1.0),
)
COMPRESSORS = tuple(n for n in registry.names() if n != 'none')


# ---- the measurement ---------------------------------------------------------


@pytest.fixture(scope='module')
def measured():
  return profile_compression.measure_compressors(
    GRADIENTS, registry.names(), rounds=3, runs_per_round=4
  )


def test_every_compressor_of_the_registry_is_timed(measured):
  assert set(measured.per_step) == set(COMPRESSORS)
  assert 'none' not in measured.per_step  # the baseline, nothing to do
  assert measured.runs == 12 and measured.rank == 4
  assert measured.baseline_ms > 0
  for name, cost in measured.per_step.items():
    assert cost.ms > 0, name
    assert cost.ms_p10 <= cost.ms <= cost.ms_p90


def test_no_compressor_measures_nothing():
  assert profile_compression.measure_compressors(GRADIENTS, ()) is None
  assert profile_compression.measure_compressors(GRADIENTS, ['none']) is None


def test_the_profile_keeps_the_figures(measured, tmp_path):
  old = fmt.load_profile(os.path.join(PROFILES, 'trivial_cifar10_b32_cpu.json'))
  path = str(tmp_path / 'p.json')
  fmt.save_profile(dataclasses.replace(old, compressors=measured), path)
  assert fmt.load_profile(path).compressors == measured
  # Without it the file has no key (an older reader sees what it knew).
  fmt.save_profile(old, path)
  with open(path) as f:
    assert 'compressors' not in json.load(f)
  assert fmt.load_profile(path).compressors is None


def test_add_compressors_keeps_the_files_other_keys(measured, tmp_path):
  path = str(tmp_path / 'p.json')
  with open(os.path.join(PROFILES, 'trivial_cifar10_b32_cpu.json')) as f:
    data = json.load(f)
  data['a_later_key'] = [1, 2]
  with open(path, 'w') as f:
    json.dump(data, f)
  got = fmt.add_compressors(path, measured, 'added')
  assert got.compressors == measured and got.notes.endswith('; added')
  with open(path) as f:
    again = json.load(f)
  assert again.pop('compressors') == dataclasses.asdict(measured)
  assert again.pop('notes') == data.pop('notes') + '; added'
  assert again == data


def test_another_version_is_refused(measured, tmp_path):
  old = fmt.load_profile(os.path.join(PROFILES, 'trivial_cifar10_b32_cpu.json'))
  data = fmt.profile_to_dict(dataclasses.replace(old, compressors=measured))
  data['compressors']['version'] = fmt.COMPRESSORS_VERSION + 1
  with pytest.raises(fmt.ProfileError, match='compressors.version'):
    fmt.profile_from_dict(data, 'p.json')


@pytest.mark.parametrize(
  'items, names',
  [
    (['all'], COMPRESSORS),
    (['none'], ()),
    ([], ()),
    (['powersgd', 'fp16', 'powersgd'], ('powersgd', 'fp16')),
  ],
)
def test_compressors_flag_values(items, names):
  assert cmc.measured_names(items) == names


@pytest.mark.parametrize('items', [['zip'], ['none', 'fp16'], ['all', 'fp16']])
def test_bad_compressors_flag(items):
  with pytest.raises(ValueError, match='--compressors='):
    cmc.measured_names(items)


def test_profile_host_compressors_only(tmp_path):
  """--compressors_only adds the figures to a profile, the rest unchanged."""
  path = str(tmp_path / 'trivial.json')
  shutil.copy(os.path.join(PROFILES, 'trivial_cifar10_b32_cpu.json'), path)
  old = fmt.load_profile(path)
  proc = subprocess.run(
    [
      sys.executable,
      os.path.join(REPO, 'scripts', 'profile_host.py'),
      '--compressors_only',
      '--compressors=fp16,powersgd',
      '--out=%s' % path,
    ],
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr
  new = fmt.load_profile(path)
  assert list(new.compressors.per_step) == ['fp16', 'powersgd']
  assert dataclasses.replace(new, compressors=None, notes=old.notes) == old


def test_profile_host_bad_compressors_is_one_line(tmp_path):
  proc = subprocess.run(
    [
      sys.executable,
      os.path.join(REPO, 'scripts', 'profile_host.py'),
      '--compressors=zip',
      '--out=%s' % (tmp_path / 'p.json'),
    ],
    capture_output=True,
    text=True,
    timeout=300,
  )
  lines = proc.stderr.strip().splitlines()
  assert proc.returncode == 2 and len(lines) == 1
  assert '--compressors=zip' in lines[0]


# ---- the predictors ----------------------------------------------------------


def _matrix_profile(costs=None, ms_per_mb=0.01):
  """A GPU profile: a 1000 x 1000 float32 matrix ready at 60 ms and a
  vector at 90 ms; the compressors' figures `costs` ({name: ms})."""
  grads = (
    fmt.Gradient('w', (1000, 1000), 'float32', 4_000_000, 60.0),
    fmt.Gradient('b', (1000,), 'float32', 4000, 90.0),
  )
  apply = fmt.ApplyCost(0.0, ms_per_mb)
  measured = None
  if costs is not None:
    measured = fmt.CompressorCosts(
      {n: fmt.CompressorCost(ms, ms, ms) for n, ms in costs.items()}, rank=4
    )
  return dataclasses.replace(
    _profile([(4, 1.0)], 100.0),
    gradients=grads,
    apply=fmt.Apply(apply, apply),
    compressors=measured,
  )


def test_measured_figure_spread_by_elements():
  p = _matrix_profile({'fp16': 0.5, 'powersgd': 3.0})
  # fp16: 2 passes over each element, so 1e6 : 1e3 of the 0.5 ms.
  fp16 = cmc.Compression('fp16').gradient_ms(p)
  assert fp16 == pytest.approx([0.5 * 1e6 / 1.001e6, 0.5 * 1e3 / 1.001e6])
  # PowerSGD: the vector travels as it is (no work), the matrix all of it.
  assert cmc.Compression('powersgd', 4).gradient_ms(p) == [3.0, 0.0]


def test_hardware_messages_use_the_measured_figure():
  p = _matrix_profile({'powersgd': 3.0})
  msgs, work = cmc.messages(cmc.Compression('powersgd', 4), p, 1.0)
  assert work == pytest.approx(3.0)
  # P and Q wait for the compress and middle thirds of the matrix's work;
  # the vector travels with the P's, after the same queued work.
  assert msgs == [
    pytest.approx((62.0, 16000.0)),
    pytest.approx((62.0, 16000.0)),
    pytest.approx((92.0, 4000.0)),
  ]


def test_fallback_without_the_figure():
  """No field, a compressor not measured, or PowerSGD at another rank: the
  assumption (2 passes of fp16, 6 of PowerSGD's at 0.01 ms per MB)."""
  assumed_psgd = [6 * 4.0 * 0.01, 0.0]
  for p, rank in (
    (_matrix_profile(None), 4),
    (_matrix_profile({'fp16': 1.0}), 4),
    (_matrix_profile({'powersgd': 3.0}), 8),
  ):
    got = cmc.Compression('powersgd', rank).gradient_ms(p)
    assert got == pytest.approx(assumed_psgd)
  fp16 = cmc.Compression('fp16').gradient_ms(_matrix_profile({'bf16': 9.0}))
  assert fp16 == pytest.approx([2 * 4.0 * 0.01, 2 * 0.004 * 0.01])


def test_simulation_uses_the_measured_figure():
  """The test-bed model: a costlier measured PowerSGD predicts a slower
  step; an old profile (no field) still predicts, at the assumption."""
  old = fmt.load_profile(os.path.join(PROFILES, 'trivial_cifar10_b32_cpu.json'))
  assert old.compressors is None
  target = target_lib.make_target(
    num_workers=3, link_mbits=25.0, topology='shared', colocated=True
  )
  strategy = cost_model.Strategy(
    'collective_all_reduce', gradient_compression='powersgd'
  )

  def rate(ms):
    costs = None
    if ms is not None:
      cost = fmt.CompressorCost(ms, ms, ms)
      costs = fmt.CompressorCosts({'powersgd': cost}, rank=4)
    p = dataclasses.replace(old, compressors=costs)
    return cost_model.predict(p, target, strategy).images_per_sec

  assert rate(None) > 0
  assert rate(0.0) > rate(5.0) > rate(50.0)
  # The assumption's own total, given as if measured, predicts the same.
  assumed = sum(cmc.Compression('powersgd').gradient_ms(old))
  assert rate(assumed) == pytest.approx(rate(None))


def test_slowed_profile_scales_the_measured_figure():
  p = _matrix_profile({'powersgd': 3.0})
  slow = bench.slowed(p, 2.5)
  assert slow.compressors.per_step['powersgd'].ms == pytest.approx(7.5)
  assert sum(cmc.Compression('powersgd').gradient_ms(slow)) == pytest.approx(
    7.5
  )
  assert bench.slowed(_matrix_profile(None), 2.0).compressors is None
