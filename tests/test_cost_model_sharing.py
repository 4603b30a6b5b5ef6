"""How the cost model shares links and message CPU: flows that start
together end apart (start-order weights, measured flow_stagger), and
messages in flight together pay part of their CPU once (crowds)."""

import dataclasses

import pytest

from tests.test_cost_model import made_up_profile
from tests.test_cost_model import no_interference
from tf_cnn_benchmarks.scaling.model import cost_model_calibration as cal_lib
from tf_cnn_benchmarks.scaling.model import cost_model_graph
from tf_cnn_benchmarks.scaling.model import profile_format
from tf_cnn_benchmarks.scaling.model import simulate
from tf_cnn_benchmarks.scaling.model import target as target_lib


def _three_flows(decay):
  graph = simulate.Graph()
  for k in range(3):
    graph.add(simulate.Job(1.0, {'link': 1.0}, name='flow %d' % k))
  return simulate.run(graph, {'link': 1.0}, decay)


def test_flows_started_together_end_in_start_order_by_hand():
  """Three flows of 1 unit on a link of 1 unit/us, weights 1, 1/2, 1/4.
  Shares 4/7, 2/7, 1/7: the first ends at 7/4 us, when the second has 1/2
  and the third 1/4. Then 2/3 and 1/3: the second ends 3/4 us later, the
  third holding 1/2, which it finishes alone at 3 us (the link never
  idles: 3 units in 3 us)."""
  assert _three_flows({'link': 0.5}) == pytest.approx([1.75, 2.5, 3.0])
  # Without decay (or q = 1) the link is shared fairly: all end at 3 us.
  assert _three_flows(None) == pytest.approx([3.0, 3.0, 3.0])
  assert _three_flows({'link': 1.0}) == pytest.approx([3.0, 3.0, 3.0])


def test_a_weighted_share_above_its_ask_goes_to_the_others():
  shares = simulate.weighted_shares(
    1.0, {'a': 0.1, 'b': 1.0, 'c': 1.0}, {'a': 1.0, 'b': 0.5, 'c': 0.25}
  )
  # a asks 0.1 (below its 4/7); b and c split 0.9 as 2:1.
  assert shares == pytest.approx({'a': 0.1, 'b': 0.6, 'c': 0.3})


def test_flow_stagger_is_fitted_to_the_measured_ends():
  shares = cal_lib.stagger_shares(0.5, 3)
  assert shares == pytest.approx([1.75 / 3, 2.5 / 3, 1.0])
  assert cal_lib.fit_flow_stagger(tuple(shares)) == pytest.approx(0.5)
  assert cal_lib.fit_flow_stagger((1.0, 1.0, 1.0)) == 1.0  # fair: ends at once
  # The table's rows: each rate's q fitted to its measured shares, and
  # linear in log(rate) between them.
  (r0, a0, b0), (r1, a1, b1) = cal_lib.FLOW_STAGGER_SHARES['switch'][:2]
  q0 = cal_lib.fit_flow_stagger((a0, b0, 1.0))
  q1 = cal_lib.fit_flow_stagger((a1, b1, 1.0))
  assert cal_lib.flow_stagger(r0, 'switch') == q0
  middle = (r0 * r1) ** 0.5
  assert cal_lib.flow_stagger(middle, 'switch') == pytest.approx((q0 + q1) / 2)
  assert 0 < cal_lib.flow_stagger(None, 'shared') < 1
  assert any(
    line.startswith('flow_stagger = ')
    for line in cal_lib.default_calibration().lines()
  )


def test_the_model_shares_host_links_by_start_order():
  """Three workers read S bytes each from one ps at once over a shared
  100 Mbit/s link: with the measured q the first read ends at the share
  stagger_shares gives, the last when all 3 S crossed."""
  size, rate = 1_000_000.0, 12.5  # bytes, bytes/us (100 Mbit/s payload)
  target = target_lib.make_target(
    num_workers=3, num_ps=1, link_mbits=100.0, topology='shared'
  )
  cal = cal_lib.Calibration(
    {
      k: c
      for k, c in no_interference().constants.items()
      if k != 'flow_stagger'  # the measured table
    }
  )
  b = cost_model_graph.StepBuilder(
    made_up_profile([(4, 1.0)], latency=0.0), target, cal
  )
  decay = b.link_decay()
  assert set(decay) == {'link'} | {
    '%s:%s' % (d, h) for d in ('up', 'down') for h in ('w0', 'w1', 'w2', 'p0')
  }
  q = cal_lib.flow_stagger(100.0, 'shared')
  reads = [b.message(('ps', 0), ('cpu', w), size, []) for w in range(3)]
  ends = simulate.run(b.graph, b.capacities(), decay)
  got = sorted(ends[j] for j in reads)
  last = 3 * size / rate
  assert got == pytest.approx([f * last for f in cal_lib.stagger_shares(q, 3)])


def test_a_job_of_its_own_stagger_weighs_by_it():
  """The link's q is 0.5; flows that carry their own q = 1 share it
  fairly, and one of q = 0.5 among them weighs as the link says."""
  graph = simulate.Graph()
  for k in range(3):
    graph.add(simulate.Job(1.0, {'link': 1.0}, name='f%d' % k, stagger=1.0))
  assert simulate.run(graph, {'link': 1.0}, {'link': 0.5}) == pytest.approx(
    [3.0, 3.0, 3.0]
  )
  graph = simulate.Graph()
  for k in range(3):
    graph.add(simulate.Job(1.0, {'link': 1.0}, name='f%d' % k, stagger=0.5))
  assert simulate.run(graph, {'link': 1.0}, {'link': 0.9}) == pytest.approx(
    [1.75, 2.5, 3.0]
  )


def test_long_messages_stagger_less_on_a_throttled_switch_port():
  """Up to 1 MiB a message weighs by the table's q; from 2 MiB by the q of
  the long reads' measured shares; between, linear in log(size) (1.5 MiB:
  log 1.5 / log 2 = 0.585 of the way). Shared links and unthrottled ports
  keep the table's q at every size, and a calibration's one flow_stagger
  is every message's."""
  cal = cal_lib.default_calibration()
  short = cal_lib.flow_stagger(100.0, 'switch')
  long_q = cal_lib.fit_flow_stagger(cal_lib.FLOW_STAGGER_LONG_SHARES + (1.0,))
  assert 0 < short < long_q < 1
  assert cal.message_stagger(1 << 20, 100.0, 'switch') == short
  assert cal.message_stagger(64 << 10, 100.0, 'switch') == short
  assert cal.message_stagger(2 << 20, 100.0, 'switch') == long_q
  assert cal.message_stagger(32 << 20, 100.0, 'switch') == long_q
  between = cal.message_stagger(1.5 * (1 << 20), 100.0, 'switch')
  assert between == pytest.approx(short + 0.585 * (long_q - short), abs=1e-3)
  assert cal.message_stagger(8 << 20, 100.0, 'shared') == (
    cal_lib.flow_stagger(100.0, 'shared')
  )
  assert cal.message_stagger(8 << 20, None, 'switch') == (
    cal_lib.flow_stagger(None, 'switch')
  )
  one_q = cal_lib.Calibration(
    dict(
      cal.constants,
      flow_stagger=cal_lib.Constant(0.6, 'a test', 'one q'),
    )
  )
  assert one_q.message_stagger(8 << 20, 100.0, 'switch') == 0.6
  assert any(
    line.startswith('flow_stagger of long messages = ') for line in cal.lines()
  )


def test_the_model_gives_a_long_read_the_long_q():
  """Three workers read S bytes each from one ps task at once over 100
  Mbit/s switch ports (the ps task's port the bottleneck): 4 MiB reads end
  as stagger_shares of the long q says, 64 KiB ones as the table's."""
  long_q = cal_lib.fit_flow_stagger(cal_lib.FLOW_STAGGER_LONG_SHARES + (1.0,))
  cal = cal_lib.Calibration(
    {
      k: c
      for k, c in no_interference().constants.items()
      if k != 'flow_stagger'  # the measured table
    }
  )
  for size, q in (
    (4 << 20, long_q),
    (64 << 10, cal_lib.flow_stagger(100.0, 'switch')),
  ):
    b = cost_model_graph.StepBuilder(
      made_up_profile([(4, 1.0)], latency=0.0),
      target_lib.make_target(
        num_workers=3, num_ps=1, link_mbits=100.0, topology='switch'
      ),
      cal,
    )
    reads = [b.message(('ps', 0), ('cpu', w), size, []) for w in range(3)]
    ends = simulate.run(b.graph, b.capacities(), b.link_decay())
    got = sorted(ends[j] for j in reads)
    last = 3 * size / 12.5  # bytes/us at 100 Mbit/s
    want = [f * last for f in cal_lib.stagger_shares(q, 3)]
    assert got == pytest.approx(want, rel=1e-6)


def _with_cpu(profile, alone, crowded):
  """`profile` whose collective messages cost `alone` core-us each, and
  `crowded` each with 16 in flight."""
  t = dataclasses.replace(
    profile.transports['collective'],
    cpu_us_per_message=alone,
    cpu_us_per_message_concurrent=crowded,
  )
  return dataclasses.replace(
    profile, transports=dict(profile.transports, collective=t)
  )


def test_the_shared_part_of_a_messages_cpu_by_hand():
  """300 core-us a message alone, 150 with 16 at once: the shared part F
  and the own part M solve F + M = 300, F/16 + M = 150, so F = 160 and the
  shared fraction is 160/300."""
  t = profile_format.Transport(1.0, 1.0, cpu_us_per_message=300.0)
  assert t.cpu_shared_fraction() == 0.0  # not measured: each pays all
  t = dataclasses.replace(t, cpu_us_per_message_concurrent=150.0)
  assert t.cpu_shared_fraction() == pytest.approx(160.0 / 300.0)
  assert dataclasses.replace(
    t, cpu_us_per_message_concurrent=400.0
  ).cpu_shared_fraction() == pytest.approx(0.0)


def _crowd_of_two(cpus, crowds):
  graph = simulate.Graph()
  for _ in range(2):
    graph.add(simulate.Job(100.0, {'cpu': 1.0}, cap=1.0, crowd='c'))
  return simulate.run(graph, {'cpu': cpus}, crowds=crowds)


def test_jobs_of_a_crowd_running_together_share_part_of_their_work():
  """Two jobs of 100 us, half of each shared (s = 0.5): together each
  costs 1 - 0.5 + 0.5 / 2 = 0.75 of its amount. On two cores each runs
  alone at 1/0.75: both end at 75. On one core they ask 2 cores' worth
  and get half each: 150 (200 without the crowd)."""
  assert _crowd_of_two(2.0, {'c': 0.5}) == pytest.approx([75.0, 75.0])
  assert _crowd_of_two(1.0, {'c': 0.5}) == pytest.approx([150.0, 150.0])
  assert _crowd_of_two(1.0, None) == pytest.approx([200.0, 200.0])
  assert _crowd_of_two(2.0, {'c': 0.0}) == pytest.approx([100.0, 100.0])


def test_messages_in_flight_together_pay_the_shared_cpu_once():
  """Two collective phases between two colocated workers, on different
  jobs but in flight at once: their message CPU (300 core-us alone, 150
  with 16 at once: 160/300 of it shared) is one crowd, each costing
  1 - (160/300) / 2 of its 300 us: both end at 220 us (8 cores, nothing
  else running)."""
  profile = _with_cpu(made_up_profile([(4, 1.0)]), 300.0, 150.0)
  target = target_lib.make_target(num_workers=2, colocated=True)
  b = cost_model_graph.StepBuilder(profile, target, no_interference())
  start, other = b.graph.join([], 'start'), b.graph.join([], 'other')
  flows = [(('cpu', 0), ('cpu', 1)), (('cpu', 1), ('cpu', 0))]
  for deps in ([start], [other]):
    b.phase(flows, 64, deps, 'collective', 'ring')
  rpc = [i for i, j in enumerate(b.graph.jobs) if j.name == 'ring/rpc']
  assert {b.graph.jobs[i].crowd for i in rpc} == {'collective@cpu'}
  assert b.crowds == {'collective@cpu': pytest.approx(160.0 / 300.0)}
  ends = simulate.run(b.graph, b.capacities(), crowds=b.crowds)
  assert [ends[i] for i in rpc] == pytest.approx([220.0, 220.0])
  alone = simulate.run(b.graph, b.capacities())
  assert [alone[i] for i in rpc] == pytest.approx([300.0, 300.0])


def test_the_concurrent_figure_survives_a_profile_round_trip():
  profile = _with_cpu(made_up_profile([(4, 1.0)]), 300.0, 150.0)
  again = profile_format.profile_from_dict(
    profile_format.profile_to_dict(profile)
  )
  t = again.transports['collective']
  assert t.cpu_us_per_message_concurrent == 150.0
  assert t.per_message().cpu_shared_fraction() == t.cpu_shared_fraction()


def test_a_calibration_file_may_give_one_flow_stagger(tmp_path):
  path = tmp_path / 'cal.json'
  path.write_text('{"flow_stagger": {"value": 1, "fitted_on": "none: fair"}}')
  cal = cal_lib.load_calibration(str(path))
  assert cal.flow_stagger(25.0, 'switch') == 1.0
  assert cal_lib.default_calibration().flow_stagger(25.0, 'switch') < 1.0
  path.write_text('{"flow_stagger": {"value": 0, "fitted_on": "x"}}')
  with pytest.raises(cal_lib.CalibrationError, match='flow_stagger'):
    cal_lib.load_calibration(str(path))


@pytest.mark.parametrize('n,expected', [(2, 500.0), (3, 700.0)])
def test_a_collective_pays_its_op_once_and_a_message_a_step(n, expected):
  """Each task of an all-reduce over n colocated workers (8 cores) runs
  the op (300 core-us) once and sends a message (100) in each of its
  2(n - 1) ring steps: 300 + 100 * 2(n - 1) on each host, at once."""
  profile = _with_cpu(made_up_profile([(4, 1.0)]), 100.0, None)
  t = dataclasses.replace(profile.transports['collective'], cpu_us_per_op=300.0)
  profile = dataclasses.replace(
    profile, transports=dict(profile.transports, collective=t)
  )
  target = target_lib.make_target(num_workers=n, colocated=True)
  b = cost_model_graph.StepBuilder(profile, target, no_interference())
  places = [('cpu', w) for w in range(n)]
  flows = [(places[k], places[(k + 1) % n]) for k in range(n)]
  b.phase(flows, 64, [], 'collective', 'ring', repeat=2 * (n - 1))
  rpc = [i for i, j in enumerate(b.graph.jobs) if j.name == 'ring/rpc']
  ends = simulate.run(b.graph, b.capacities())
  assert [ends[i] for i in rpc] == pytest.approx([expected])


def test_the_shared_part_counts_the_ops_share_of_a_measured_message():
  """A two-task hop (2 steps) of 100 core-us a step's message and 300 an
  op: a message alone is 100 + 300 / 2 = 250; 150 with 16 at once gives
  F = (250 - 150) * 16 / 15 shared."""
  t = profile_format.Transport(
    1.0,
    1.0,
    messages_per_hop=2,
    cpu_us_per_message=100.0,
    cpu_us_per_message_concurrent=150.0,
    cpu_us_per_op=300.0,
  )
  assert t.cpu_shared_fraction() == pytest.approx(100.0 * 16 / 15 / 250.0)
  again = profile_format.profile_from_dict(
    profile_format.profile_to_dict(
      dataclasses.replace(
        made_up_profile([(4, 1.0)]),
        transports={'grpc': t, 'collective': t},
      )
    )
  )
  assert again.transports['collective'] == t
