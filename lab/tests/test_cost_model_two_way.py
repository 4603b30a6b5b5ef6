"""Switch ports carrying flows both ways at once (a ring's) fill each way
less than one flow one way: the measured two-way efficiency."""

import json
import math
from pathlib import Path
import statistics

import pytest

from lab.probes import link_cpu
from tests.test_cost_model import made_up_profile
from tests.test_cost_model import no_interference
from tf_cnn_benchmarks.scaling.model import cost_model_calibration as cal_lib
from tf_cnn_benchmarks.scaling.model import cost_model_graph
from tf_cnn_benchmarks.scaling.model import simulate
from tf_cnn_benchmarks.scaling.model import target as target_lib

REPO = Path(__file__).resolve().parents[2]
SIZE = 1_000_000.0  # bytes a flow
RATE = 3.125  # bytes/us: 25 Mbit/s (no_interference: all of it payload)
W0, W1 = ('cpu', 0), ('cpu', 1)


def _measured_two_way():
  """no_interference, but the measured two-way table."""
  constants = dict(no_interference().constants)
  del constants['two_way_efficiency']
  return cal_lib.Calibration(constants)


def _phase_us(flows, topology, cal):
  profile = made_up_profile([(4, 1.0)], latency=0.0)
  target = target_lib.make_target(
    num_workers=2, link_mbits=25.0, topology=topology
  )
  b = cost_model_graph.StepBuilder(profile, target, cal)
  done = b.phase(flows, SIZE, [], 'grpc', 'ring')
  return simulate.run(b.graph, b.capacities(), b.link_decay(), b.crowds)[done]


def test_a_ring_on_switch_ports_fills_each_way_to_the_measured_share():
  e = cal_lib.two_way_efficiency(25.0, 'switch')
  assert e == 0.90
  both = [(W0, W1), (W1, W0)]
  cal = _measured_two_way()
  assert _phase_us(both, 'switch', cal) == pytest.approx(SIZE / (e * RATE))
  # One way: the port's whole payload rate.
  assert _phase_us([(W0, W1)], 'switch', cal) == pytest.approx(SIZE / RATE)
  # One shared link carries both flows' bytes: no two-way share.
  assert _phase_us(both, 'shared', cal) == pytest.approx(2 * SIZE / RATE)
  # A calibration of 1 (no_interference's) takes the loss away.
  assert _phase_us(both, 'switch', no_interference()) == pytest.approx(
    SIZE / RATE
  )


def test_the_two_way_table_by_rate():
  (r0, e0), (r1, e1) = cal_lib.TWO_WAY_EFFICIENCY[:2]
  assert cal_lib.two_way_efficiency(r0) == e0
  middle = math.sqrt(r0 * r1)  # halfway in log(rate)
  assert cal_lib.two_way_efficiency(middle) == pytest.approx((e0 + e1) / 2)
  assert cal_lib.two_way_efficiency(10.0) == e0  # below the table: its first
  assert cal_lib.two_way_efficiency(25000.0) == 1.0
  assert cal_lib.two_way_efficiency(None) == 1.0  # unthrottled
  assert cal_lib.two_way_efficiency(25.0, 'shared') == 1.0
  lines = cal_lib.default_calibration().lines()
  assert any(line.startswith('two_way_efficiency = ') for line in lines)


def test_a_calibration_file_may_give_one_two_way_efficiency(tmp_path):
  path = tmp_path / 'cal.json'
  path.write_text(
    '{"two_way_efficiency": {"value": 1, "fitted_on": "a real NIC"}}'
  )
  cal = cal_lib.load_calibration(str(path))
  assert cal.two_way_efficiency(25.0, 'switch') == 1.0
  assert cal_lib.default_calibration().two_way_efficiency(25.0, 'switch') < 1
  for bad in (0, 1.5):
    path.write_text(
      '{"two_way_efficiency": {"value": %s, "fitted_on": "x"}}' % bad
    )
    with pytest.raises(cal_lib.CalibrationError, match='two_way_efficiency'):
      cal_lib.load_calibration(str(path))


def _hop(topology, wall_us, nbytes=1 << 20, run=0, mbits=8.0, **extra):
  """One measure_link_cpu.py row of a collective hop over two tasks."""
  row = {
    'transport': 'collective',
    'bytes': nbytes,
    'wall_us_per_hop': wall_us,
    'topology': topology,
    'link_mbits': mbits,
    'run': run,
  }
  row.update(extra)
  return row


def test_the_collectives_two_way_share_from_a_switch_and_a_shared_hop():
  """8 Mbit/s, all payload: 1 byte/us. A hop of 1 MiB: 1048576 us each
  way; the shared link's 2 x that plus 1000 us gives the latency, and the
  switch ports' hop took 1048576 / 0.8 + 1000: 0.8 each way."""
  b = float(1 << 20)
  rows = [
    _hop('shared', 2 * b + 1000.0),
    _hop('switch', b / 0.8 + 1000.0),
    # Left out: below 1 MiB, gRPC, several at once, unpaired, unthrottled.
    _hop('shared', 3000.0, nbytes=65536),
    _hop('switch', 2000.0, nbytes=65536),
    dict(_hop('switch', 1.0), transport='grpc', run=5),
    _hop('switch', 1.0, copies=16, run=6),
    _hop('switch', 1.0, run=7),
    _hop('switch', 1.0, mbits=None),
  ]
  assert link_cpu.two_way_efficiency(rows, wire_payload=1.0) == {8.0: [0.8]}


def test_the_1000_mbits_row_is_the_median_of_the_committed_rows():
  """cost_model_calibration.TWO_WAY_EFFICIENCY at 1000 Mbit/s is what the
  collective's rows measured on both CPUs give (pooled median, 2 places)."""
  payload = cal_lib.default_calibration().value('wire_payload')
  shares = []
  for name in ('link_cpu_epyc_avx2.jsonl', 'link_cpu_xeon_amx.jsonl'):
    with open(REPO / 'lab' / 'results' / name, encoding='utf-8') as f:
      rows = [json.loads(line) for line in f]
    shares += link_cpu.two_way_efficiency(rows, payload)[1000.0]
  assert len(shares) == 8
  rate, share = cal_lib.TWO_WAY_EFFICIENCY[-1]
  assert rate == 1000.0
  assert share == round(statistics.median(shares), 2)
  # Past the shaped links measured: a real full-duplex port, 1.
  assert cal_lib.two_way_efficiency(1000.0) == share
  assert cal_lib.two_way_efficiency(1001.0) == 1.0
