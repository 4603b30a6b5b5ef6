"""Switch ports carrying flows both ways at once (a ring's) fill each way
less than one flow one way: the measured two-way efficiency."""

import math

import pytest

from tests.test_cost_model import made_up_profile
from tests.test_cost_model import no_interference
from tf_cnn_benchmarks.scaling import cost_model_calibration as cal_lib
from tf_cnn_benchmarks.scaling import cost_model_graph
from tf_cnn_benchmarks.scaling import simulate
from tf_cnn_benchmarks.scaling import target as target_lib

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
