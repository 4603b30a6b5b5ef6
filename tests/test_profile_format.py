"""The profile file: its reader's one-line errors, the transport model, the
line fit and profile_host.py's flag errors (no TensorFlow run here)."""

import json
import os
import subprocess
import sys

import pytest

from tf_cnn_benchmarks.scaling.model import profile_format as fmt
from tf_cnn_benchmarks.scaling.profile import profile_concurrent
from tf_cnn_benchmarks.scaling.profile import profile_stats

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _profile_dict():
  """A small valid profile (the contract's example)."""
  return {
    'profile_version': 1,
    'created': '2026-11-24T21:00:00Z',
    'host': {
      'cpu_model': 'AMD EPYC',
      'cpu_cores': 2,
      'tf_version': '2.21.0',
      'device': 'cpu',
      'device_name': 'AMD EPYC',
      'num_devices_profiled': 1,
    },
    'run': {
      'model': 'resnet20',
      'data_name': 'cifar10',
      'batch_size': 32,
      'data_format': 'NHWC',
      'use_fp16': False,
      'optimizer': 'sgd',
      'num_steps': 40,
    },
    'compute': {
      'step_ms': 52.1,
      'step_ms_p10': 50.0,
      'step_ms_p90': 55.3,
      'forward_ms': 17.0,
      'backward_ms': 33.5,
      'cores_busy': 1.8,
    },
    'gradients': [
      {
        'name': 'conv0/kernel',
        'shape': [3, 3, 3, 16],
        'dtype': 'float32',
        'bytes': 1728,
        'ready_ms': 48.7,
      }
    ],
    'apply': {
      'worker': {'fixed_ms': 0.01, 'ms_per_mb': 0.2},
      'ps': {'fixed_ms': 0.02, 'ms_per_mb': 0.25},
    },
    'chunks': {'repacking=0': [1728], 'spec=xring': [1728]},
    'chunk_algorithms': {'spec=xring': ['xring']},
    'transports': {
      'grpc': {
        'latency_us': 180.0,
        'bytes_per_us': 900.0,
        'table': [[64, 170.0], [1024, 175.0], [65536, 260.0]],
        'fit_from_bytes': 65536,
        'measured': 'loopback, 2 tasks',
      }
    },
    'a_later_key': {'ignored': True},
  }


def _write(tmp_path, data, name='p.json'):
  path = tmp_path / name
  path.write_text(json.dumps(data) if not isinstance(data, str) else data)
  return str(path)


def test_contract_example_loads_and_round_trips(tmp_path):
  path = _write(tmp_path, _profile_dict())
  p = fmt.load_profile(path)
  assert p.gradients[0] == fmt.Gradient(
    'conv0/kernel', (3, 3, 3, 16), 'float32', 1728, 48.7
  )
  assert p.total_gradient_bytes == 1728
  out = str(tmp_path / 'out.json')
  fmt.save_profile(p, out)
  assert fmt.load_profile(out) == p


def _broken(**change):
  """The example with `change` applied: 'a.b' -> value (None deletes)."""
  data = _profile_dict()
  for dotted, value in change.items():
    *parents, leaf = dotted.split('.')
    target = data
    for key in parents:
      target = target[int(key)] if isinstance(target, list) else target[key]
    if value is None:
      del target[leaf]
    else:
      target[leaf] = value
  return data


@pytest.mark.parametrize(
  'data,key',
  [
    (_broken(**{'compute.step_ms': 'fast'}), "'compute.step_ms'"),
    (_broken(**{'compute.cores_busy': None}), "'compute.cores_busy'"),
    (_broken(profile_version=2), "'profile_version'"),
    (_broken(gradients=[]), "'gradients'"),
    (
      _broken(**{'gradients.0.bytes': -1}),
      "'gradients[0].bytes'",
    ),
    (
      _broken(**{'gradients.0.shape': [3, 'x']}),
      "'gradients[0].shape'",
    ),
    (_broken(**{'chunks.repacking=0': [0]}), "'chunks.repacking=0'"),
    (
      _broken(**{'chunk_algorithms.spec=xring': ['xring', 'xring']}),
      "'chunk_algorithms.spec=xring'",
    ),
    (
      _broken(**{'transports.grpc.bytes_per_us': 0}),
      "'transports.grpc.bytes_per_us'",
    ),
    (
      _broken(**{'transports.grpc.table': [[1024, 1.0], [64, 1.0]]}),
      "'transports.grpc.table'",
    ),
    (_broken(**{'compute.step_ms_p10': 60.0}), "'compute.step_ms'"),
    (
      _broken(**{'transports.grpc.messages_per_hop': 0}),
      "'transports.grpc.messages_per_hop'",
    ),
    (
      _broken(**{'transports.grpc.cpu_us_per_byte': -1}),
      "'transports.grpc.cpu_us_per_byte'",
    ),
    ([1, 2], "'(top)'"),
  ],
)
def test_bad_values_are_one_line_naming_file_and_key(tmp_path, data, key):
  path = _write(tmp_path, data)
  with pytest.raises(fmt.ProfileError) as info:
    fmt.load_profile(path)
  message = str(info.value)
  assert '\n' not in message
  assert message.startswith(path + ': ')
  assert key in message


def test_unreadable_and_non_json_files_are_one_line(tmp_path):
  missing = str(tmp_path / 'missing.json')
  for path in (missing, _write(tmp_path, '{"profile_version": 1,')):
    with pytest.raises(fmt.ProfileError) as info:
      fmt.load_profile(path)
    assert '\n' not in str(info.value)
    assert str(info.value).startswith(path + ': ')


def test_transport_interpolates_its_table_then_the_line():
  t = fmt.Transport(
    latency_us=100.0,
    bytes_per_us=1000.0,
    table=((64, 50.0), (1024, 70.0), (65536, 160.0)),
    fit_from_bytes=65536,
  )
  assert t.time_us(10) == 50.0
  assert t.time_us(544) == pytest.approx(60.0)
  assert t.time_us(65536) == pytest.approx(100.0 + 65.536)
  assert t.time_us(1 << 20) == pytest.approx(100.0 + 1048.576)
  assert fmt.ApplyCost(0.5, 2.0).ms(3e6) == pytest.approx(6.5)


def test_a_hop_of_two_messages_is_timed_per_message(tmp_path):
  """A collective timed per all-reduce over two tasks is two messages of
  half the bytes: each row and the latency halve at half the size, the
  rate stays; messages_per_hop round-trips (absent: 1)."""
  data = _profile_dict()
  data['transports']['collective'] = dict(
    data['transports']['grpc'],
    messages_per_hop=2,
    cpu_us_per_message=250.0,
    cpu_us_per_byte=0.0015,
  )
  profile = fmt.load_profile(_write(tmp_path, data))
  hop = profile.transports['collective']
  assert (
    hop.messages_per_hop,
    profile.transports['grpc'].messages_per_hop,
  ) == (
    2,
    1,
  )
  one = hop.per_message()
  assert one.messages_per_hop == 1 and one.bytes_per_us == 900.0
  # The CPU figures are per message already; absent: None.
  assert (one.cpu_us_per_message, one.cpu_us_per_byte) == (250.0, 0.0015)
  assert profile.transports['grpc'].cpu_us_per_message is None
  for nbytes in (32, 100, 512, 32768, 1 << 20):
    assert one.time_us(nbytes) == pytest.approx(hop.time_us(2 * nbytes) / 2)
  assert profile.transports['grpc'].per_message() is profile.transports['grpc']
  path = str(tmp_path / 'again.json')
  fmt.save_profile(profile, path)
  assert fmt.load_profile(path).transports['collective'] == hop


def test_line_fit():
  assert profile_stats.fit_line([1, 2, 3], [3, 5, 7]) == pytest.approx((1, 2))
  # A falling line is no size term: the mean as intercept.
  assert profile_stats.fit_line([1, 2], [4, 2]) == (3.0, 0.0)
  # A negative intercept: through the origin.
  a, b = profile_stats.fit_line([1, 2, 3], [0.0, 2.0, 4.0])
  assert a == 0.0 and b == pytest.approx(16 / 14)
  assert profile_stats.percentile([1, 2, 3, 4, 5], 10) == pytest.approx(1.4)


@pytest.mark.parametrize(
  'args,flag',
  [
    (['--model=trivial'], '--out'),
    (['--out=/no/such/dir/p.json'], '--out'),
    (['--out=p.json', '--profile_steps=1'], '--profile_steps'),
    (['--out=p.json', '--batch_size=x'], 'batch_size'),
    (['--out=p.json', '--all_reduce_specs=xring:bad'], '--all_reduce_specs'),
    (['--out=p.json', '--model=no_such_model'], '--model'),
  ],
)
def test_profile_host_bad_flags_are_one_line(tmp_path, args, flag):
  proc = subprocess.run(
    [sys.executable, os.path.join(ROOT, 'scripts', 'profile_host.py'), *args],
    capture_output=True,
    text=True,
    cwd=str(tmp_path),
    timeout=300,
  )
  assert proc.returncode == 2
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and flag in lines[0], proc.stderr


def test_profile_host_help_lists_its_flags():
  proc = subprocess.run(
    [sys.executable, os.path.join(ROOT, 'scripts', 'profile_host.py'), '-h'],
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert proc.returncode == 0
  for name in ('--out', '--profile_steps', '--transport_max_bytes'):
    assert name in proc.stdout


def test_concurrent_speedup_loads_interpolates_and_round_trips(tmp_path):
  data = _profile_dict()
  data['compute']['concurrent_speedup'] = [[2, 1.5], [4, 2.0]]
  p = fmt.load_profile(_write(tmp_path, data))
  c = p.compute
  assert c.concurrent_speedup == ((2, 1.5), (4, 2.0))
  assert c.speedup(1) is None
  assert c.speedup(2) == 1.5 and c.speedup(3) == pytest.approx(1.75)
  assert c.speedup(8) == 2.0  # beyond the table: its last figure
  out = str(tmp_path / 'out.json')
  fmt.save_profile(p, out)
  assert fmt.load_profile(out) == p
  # A profile without it (older files) has none.
  assert (
    fmt.load_profile(_write(tmp_path, _profile_dict())).compute.speedup(2)
    is None
  )


@pytest.mark.parametrize(
  'rows', [[[1, 1.0]], [[3, 1.0], [2, 1.0]], [[2, 0]], [[2]], 'fast']
)
def test_bad_concurrent_speedup_is_one_line(tmp_path, rows):
  data = _profile_dict()
  data['compute']['concurrent_speedup'] = rows
  with pytest.raises(fmt.ProfileError) as info:
    fmt.load_profile(_write(tmp_path, data))
  assert "'compute.concurrent_speedup'" in str(info.value)
  assert '\n' not in str(info.value)


def test_concurrent_speedups_against_one_copy_alone():
  """Rounds of one copy alone then k copies at once (each with a k-th of
  the cores' threads, as a worker on a host of k workers gets), one copy
  alone at the end. A round's speedup: its k copies' images/sec summed over
  the mean of the lone runs around it; the figure: the rounds' median."""
  calls = []
  alone = iter([100.0, 110.0, 90.0, 100.0])
  each = {2: iter([60.0, 50.0, 70.0]), 3: iter([60.0, 60.0, 30.0])}

  def runner(argvs, timeout):
    calls.append(argvs)
    k = len(argvs)
    return [next(alone)] if k == 1 else [next(each[k])] * k

  flags = {'model': 'resnet20', 'batch_size': 32}
  got = profile_concurrent.measure_speedups(
    flags, cores=4, copies=(3, 2), runner=runner, rounds=3
  )
  # Around the rounds: 105, 100, 95. k=2: 120/105, 100/100, 140/95;
  # k=3: 180/105, 180/100, 90/95.
  assert got == (
    (2, round(120 / 105, 4)),
    (3, round(180 / 105, 4)),
  )
  assert [len(c) for c in calls] == [1, 2, 3, 1, 2, 3, 1, 2, 3, 1]
  lone, two = calls[0][0], calls[1][0]
  assert '--model=resnet20' in lone and '--device=cpu' in lone
  assert not any('threads' in a for a in lone)  # a task alone: TF's pools
  assert '--num_intra_threads=2' in two and '--num_inter_threads=2' in two
  assert '--num_intra_threads=1' in calls[2][0]  # 4 cores // 3 workers
  assert profile_concurrent.measure_speedups(flags, 4, copies=()) == ()
