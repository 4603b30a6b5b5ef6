"""lab/scripts/measure_exchange.py: rounds of a TCP ring against all-to-all
among hosts placed as the local launcher's tasks would be, in its shaped
network (`python -m lab.scripts.measure_exchange --launch ...`)."""

import json
import subprocess
import sys

import pytest

from lab.scripts import measure_exchange
from tests.helpers import ROOT
from tests.helpers import task_env
from tf_cnn_benchmarks.commands import netshape

_WHY_NOT = netshape.shaping_works(100.0)
needs_shaping = pytest.mark.skipif(
  bool(_WHY_NOT), reason='cannot shape a link here: %s' % _WHY_NOT
)


def _measure_exchange(*argv, timeout=240):
  return subprocess.run(
    [sys.executable, '-m', 'lab.scripts.measure_exchange', '--launch', *argv],
    cwd=ROOT,
    env=task_env(),
    capture_output=True,
    text=True,
    timeout=timeout,
  )


def test_exchange_patterns_move_the_same_bytes():
  # A ring and all-to-all load every host's link with the same bytes: the
  # ratio of their round times is the network's, not the bytes'.
  n, nbytes = 4, 300_000
  for pattern in measure_exchange.PATTERNS:
    for me in range(n):
      out = measure_exchange.destinations(pattern, me, n, nbytes)
      into = measure_exchange.sources(pattern, me, n, nbytes)
      assert me not in out and me not in into
      assert sum(out.values()) == sum(into.values()) == nbytes
  assert len(measure_exchange.destinations('ring', 0, n, nbytes)) == 1
  assert len(measure_exchange.destinations('all_to_all', 0, n, nbytes)) == 3


def test_exchange_summary_takes_each_round_slowest_host():
  hosts = [
    {'ring': [10.0, 12.0, 11.0], 'all_to_all': [20.0, 20.0, 30.0]},
    {'ring': [11.0, 10.0, 14.0], 'all_to_all': [25.0, 21.0, 20.0]},
  ]
  out = measure_exchange.summarise(hosts, 125_000, 100.0)
  assert out['ring_ms'] == 12.0  # rounds: 11, 12, 14
  assert out['all_to_all_ms'] == 25.0  # rounds: 25, 21, 30
  assert out['efficiency'] == 0.48
  # The means of the rounds: ring 37/3 ms, all-to-all 76/3 ms.
  assert out['ring_mean_ms'] == pytest.approx(37 / 3, abs=1e-3)
  assert out['all_to_all_mean_ms'] == pytest.approx(76 / 3, abs=1e-3)
  assert out['mean_efficiency'] == pytest.approx(37 / 76, abs=1e-3)
  # 125 kB at 100 Mbit/s of wire, 1448 payload bytes a 1514-byte frame.
  assert out['ideal_ms'] == pytest.approx(10 * 1514 / 1448, abs=1e-3)


def test_fan_out_figures_take_each_flows_median_end():
  # Host 0's rounds: each sorted list is one round's flow ends (ms).
  rounds = [[6.0, 9.0, 10.0], [8.0, 9.0, 12.0], [7.0, 10.0, 10.0]]
  hosts = [
    {'ring': [1.0], 'all_to_all': [1.0], 'fan_out': rounds},
    {'ring': [1.0], 'all_to_all': [1.0], 'fan_out': []},
  ]
  out = measure_exchange.summarise(hosts, 125_000, None)
  assert out['fan_out_ms'] == [7.0, 9.0, 10.0]
  assert out['fan_out_shares'] == [0.7, 0.9, 1.0]


@needs_shaping
def test_measure_exchange_is_held_to_the_link():
  proc = _measure_exchange(
    '--topology=switch',
    '--link_mbits=100',
    '--exchange_kilobytes=128',
  )
  assert proc.returncode == 0, proc.stderr
  prefix = 'launcher: measure_exchange: '
  lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(prefix)]
  assert len(lines) == 1, proc.stdout
  figures = json.loads(lines[0][len(prefix) :])
  assert figures['hosts'] == 3 and figures['topology'] == 'switch'
  # A bucket's burst lets a little more through at first; no more than that.
  assert figures['ring_ms'] >= 0.85 * figures['ideal_ms'], figures
  assert figures['all_to_all_ms'] >= 0.85 * figures['ideal_ms'], figures
  assert figures['efficiency'] > 0
  # fan_out: host 0's flows to the 2 others, each no sooner than its bytes
  # at the link's rate, the last at 1.
  ends, shares = figures['fan_out_ms'], figures['fan_out_shares']
  assert len(ends) == 2 and ends == sorted(ends) and shares[-1] == 1.0
  assert ends[0] >= 0.85 * figures['ideal_ms'], figures


@pytest.mark.parametrize('value', ['0', '-1', 'x'])
def test_bad_exchange_size_is_one_line(value):
  proc = _measure_exchange('--exchange_kilobytes=' + value, timeout=60)
  assert proc.returncode == 2
  assert proc.stderr.count('\n') == 1
  assert '--exchange_kilobytes=%s' % value in proc.stderr
