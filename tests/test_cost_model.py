"""The scaling cost model against hand-computed cases (no TF session).

Most cases use a made-up profile whose transports are exact lines (no
table), a link much slower than one stream, free adds, and a calibration
with no CPU interference, so the simulated times can be derived by hand.
"""

import dataclasses

import pytest

from tf_cnn_benchmarks.scaling.model import baselines
from tf_cnn_benchmarks.scaling.model import cost_model
from tf_cnn_benchmarks.scaling.model import cost_model_allreduce as ar
from tf_cnn_benchmarks.scaling.model import cost_model_calibration as cal_lib
from tf_cnn_benchmarks.scaling.model import cost_model_graph
from tf_cnn_benchmarks.scaling.model import cost_model_strategies as st
from tf_cnn_benchmarks.scaling.model import profile_format
from tf_cnn_benchmarks.scaling.model import simulate
from tf_cnn_benchmarks.scaling.model import target as target_lib

FIXTURE = 'tests/data/profile_resnet20_cpu.json'
LATENCY_US = 100.0  # the made-up transport's per-message latency


def _line(latency_us, bytes_per_us):
  return {'latency_us': latency_us, 'bytes_per_us': bytes_per_us}


def made_up_profile(gradients, *, step_ms=100.0, cores=8, latency=LATENCY_US):
  """A profile of `gradients` = [(bytes, ready_ms)], exact transports."""
  last = max(r for _, r in gradients)
  data = {
    'profile_version': 1,
    'created': 'test',
    'host': {
      'cpu_model': 'test',
      'cpu_cores': cores,
      'tf_version': 'test',
      'device': 'cpu',
    },
    'run': {
      'model': 'made_up',
      'data_name': 'none',
      'batch_size': 10,
      'data_format': 'NHWC',
      'use_fp16': False,
      'optimizer': 'sgd',
      'num_steps': 1,
    },
    'compute': {
      'step_ms': step_ms,
      'step_ms_p10': step_ms,
      'step_ms_p90': step_ms,
      'forward_ms': 0.0,
      'backward_ms': last,
      'cores_busy': 1.0,
    },
    'gradients': [
      {
        'name': 'g%d' % i,
        'shape': [n // 4],
        'dtype': 'float32',
        'bytes': n,
        'ready_ms': r,
      }
      for i, (n, r) in enumerate(gradients)
    ],
    'apply': {
      'worker': {'fixed_ms': 0.0, 'ms_per_mb': 0.0},
      'ps': {'fixed_ms': 0.0, 'ms_per_mb': 0.0},
    },
    'chunks': {},
    'transports': {
      'grpc': _line(latency, 1e9),
      'collective': _line(latency, 1e9),
      'local_copy': _line(0.0, 1e12),
    },
  }
  return profile_format.profile_from_dict(data)


def no_interference(latency_cpu_fraction=0.0):
  """Calibration without CPU interference (and, by default, latency as
  pure wire delay)."""
  constants = dict(cal_lib.default_calibration().constants)
  constants['interference_cores'] = cal_lib.Constant(0.0, 'test', '')
  # The hand formulas take link_mbits as payload (no frame headers).
  constants['wire_payload'] = cal_lib.Constant(1.0, 'test', '')
  constants['latency_cpu_fraction'] = cal_lib.Constant(
    latency_cpu_fraction, 'test', ''
  )
  # The hand formulas share links fairly (flows started together end
  # together; tests/test_cost_model_sharing.py checks the measured stagger).
  constants['flow_stagger'] = cal_lib.Constant(1.0, 'test', '')
  # ... and a throttled link's bytes cost no CPU beyond loopback's
  # (tests/test_cost_model_sharing.py checks the measured table).
  constants['link_cpu_us_per_byte'] = cal_lib.Constant(0.0, 'test', '')
  # ... and a port carries each way what it carries one way
  # (tests/test_cost_model_two_way.py checks the measured table).
  constants['two_way_efficiency'] = cal_lib.Constant(1.0, 'test', '')
  return cal_lib.Calibration(constants)


def _run(builder):
  return simulate.run(builder.graph, builder.capacities())


@pytest.mark.parametrize('n', [2, 3, 4])
def test_one_ring_matches_the_hand_formula(n):
  """xring over n hosts (one device each), S bytes, link B, latency L.

  The harness's ring (allreduce._ring_reduce) cuts the tensor into n chunks
  of S/n; n-1 reduce-scatter steps then n-1 all-gather steps, in each of
  which every position sends one chunk to the next at once. On a switch
  each host's uplink and downlink carry one chunk per step, so a step takes
  L + (S/n)/B and the ring 2(n-1)L + 2(n-1)/n * S/B (the ports carry each
  way all they carry one way: no_interference).
  """
  size, bandwidth, wire = 1_000_000.0, 12.5, 50.0  # 100 Mbit/s
  profile = made_up_profile([(4, 1.0)])
  target = target_lib.make_target(
    num_workers=n, link_mbits=100.0, link_latency_us=wire
  )
  b = cost_model_graph.StepBuilder(profile, target, no_interference())
  ends = ar.ring(b, st.places(target), size, [], 'grpc')
  latency = LATENCY_US + wire
  expected = 2 * (n - 1) * latency + 2 * (n - 1) / n * size / bandwidth
  assert _run(b)[ends[0]] == pytest.approx(expected, rel=1e-6)


def test_link_mbits_is_a_wire_rate():
  """One message of S bytes at 100 Mbit/s on the wire: TCP over IPv4 in
  1500-byte frames carries 1448 payload bytes per 1514 the bucket counts,
  so it takes L + S / (12.5 * 1448/1514) us."""
  size = 1_000_000.0
  profile = made_up_profile([(4, 1.0)])
  target = target_lib.make_target(num_workers=2, link_mbits=100.0)
  constants = dict(no_interference().constants)
  del constants['wire_payload']  # the default, assumed constant
  cal = cal_lib.Calibration(
    dict(cal_lib.default_calibration().constants, **constants)
  )
  b = cost_model_graph.StepBuilder(profile, target, cal)
  end = b.message(('cpu', 0), ('cpu', 1), size, [])
  expected = LATENCY_US + size / (12.5 * 1448 / 1514)
  assert _run(b)[end] == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize('workers', [2, 4])
def test_ps_fan_in_shared_link_vs_switch(workers):
  """W workers each push S/2 bytes to each of 2 ps tasks at once.

  Shared link (one resource for every host): all W*S bytes cross it,
  W*S/B. Switch: each ps port's downlink takes W*S/2 and each worker's
  uplink S, so max(W*S/(2B), S/B). Plus one latency (the messages run
  concurrently).
  """
  size, bandwidth = 400_000.0, 12.5
  profile = made_up_profile([(4, 1.0)])
  times = {}
  for topology in ('shared', 'switch'):
    target = target_lib.make_target(
      num_workers=workers, num_ps=2, link_mbits=100.0, topology=topology
    )
    b = cost_model_graph.StepBuilder(profile, target, no_interference())
    pushes = [
      b.message(('cpu', w), ('ps', k), size / 2, [])
      for w in range(workers)
      for k in range(2)
    ]
    end = b.graph.join(pushes)
    times[topology] = _run(b)[end]
  assert times['shared'] == pytest.approx(
    LATENCY_US + workers * size / bandwidth, rel=1e-6
  )
  assert times['switch'] == pytest.approx(
    LATENCY_US + max(workers * size / 2, size) / bandwidth, rel=1e-6
  )


def test_small_tensors_are_latency_bound_and_repacking_fixes_it():
  """100 tensors of 64 bytes, all ready at once, pscpu over 2 hosts of one
  core each, the latency all CPU work (latency_cpu_fraction=1).

  Each tensor's all-reduce is a gather (worker 1 -> worker 0's CPU) then a
  scatter back: two messages whose latency L is work on the sender's one
  core. Worker 1's core prepares the 100 gathers one after another (a
  host's messages are a queue), one every L; each crosses (64 bytes at
  12.5 bytes/us: 5.12 us) and worker 0 prepares its scatter while worker 1
  prepares the next gather. The last scatter is sent L after the last
  gather arrived: 101 L + 2 x 5.12 us. One pack (repacking=1) sends two
  messages of 6400 bytes (512 us each): 2 L + 1.024 ms.
  """
  profile = made_up_profile([(64, 0.001)] * 100, step_ms=0.001)
  target = target_lib.make_target(
    num_workers=2, link_mbits=100.0, cores_per_host=1
  )
  cal = no_interference(latency_cpu_fraction=1.0)
  step = {}
  for packs in (0, 1):
    strategy = cost_model.Strategy('distributed_all_reduce', 'pscpu', packs)
    _, step[packs] = cost_model.simulate_step(profile, target, strategy, cal)
  latency_ms = LATENCY_US / 1000.0
  assert step[0] == pytest.approx(101 * latency_ms + 0.01024, rel=0.01)
  assert step[1] == pytest.approx(2 * latency_ms + 1.024, rel=0.01)
  assert step[1] < step[0] / 5


def test_a_gradient_ready_early_overlaps_the_backward_pass():
  """One 625,000-byte gradient over 2 hosts at 100 Mbit/s: the ring moves
  2(n-1)/n * S = S, 50 ms, plus 2 latencies (0.2 ms). Ready at 10 ms of a
  100 ms backward pass, it is summed long before the pass ends: the step
  is the compute, 100 ms, and the ring of the 4-byte gradient ready last
  (2 latencies, 0.2 ms). Ready at the end, the step is 100 + 50.2 ms.
  """
  target = target_lib.make_target(num_workers=2, link_mbits=100.0)
  strategy = cost_model.Strategy('distributed_all_reduce', 'xring')
  steps = {}
  for ready in (10.0, 100.0):
    profile = made_up_profile([(625_000, ready), (4, 100.0)])
    _, steps[ready] = cost_model.simulate_step(
      profile, target, strategy, no_interference()
    )
  assert steps[10.0] == pytest.approx(100.0 + 0.2, rel=1e-3)
  assert steps[100.0] == pytest.approx(150.2, rel=1e-3)


def _fixture():
  return profile_format.load_profile(FIXTURE)


def test_one_device_predicts_the_profiled_step():
  profile = _fixture()
  target = target_lib.make_target()
  for name in ('parameter_server', 'replicated'):
    p = cost_model.predict(profile, target, cost_model.Strategy(name))
    assert p.step_ms == pytest.approx(profile.compute.step_ms, rel=0.01)
    assert p.low < p.images_per_sec < p.high


CLUSTER_STRATEGIES = [
  cost_model.Strategy('parameter_server'),
  cost_model.Strategy('parameter_server', sync=False),
  cost_model.Strategy('distributed_replicated'),
  cost_model.Strategy('distributed_all_reduce', 'xring'),
  cost_model.Strategy('distributed_all_reduce', 'pscpu/xring'),
  cost_model.Strategy('distributed_all_reduce', 'rechd', 2),
  cost_model.Strategy('distributed_all_reduce', 'hierarchical_copy'),
  cost_model.Strategy('collective_all_reduce'),
  cost_model.Strategy('hybrid', hybrid_threshold_bytes=100_000),
]


@pytest.mark.parametrize('strategy', CLUSTER_STRATEGIES, ids=str)
def test_more_bandwidth_never_predicts_slower(strategy):
  profile = _fixture()
  rates = []
  for mbits in (10.0, 100.0, 1000.0, 10000.0):
    target = target_lib.make_target(
      num_workers=2, devices_per_worker=2, num_ps=1, link_mbits=mbits
    )
    rates.append(cost_model.predict(profile, target, strategy).images_per_sec)
  assert rates == sorted(rates)
  # A worker's step is never faster than its towers' compute alone.
  per_worker = profile.run.batch_size * 2 * 2
  assert rates[-1] <= per_worker / profile.compute.step_ms * 1000.0 * 2


@pytest.mark.parametrize('strategy', CLUSTER_STRATEGIES, ids=str)
def test_predicted_step_is_at_least_the_compute_step(strategy):
  profile = _fixture()
  target = target_lib.make_target(num_workers=3, num_ps=2, link_mbits=1000.0)
  p = cost_model.predict(profile, target, strategy)
  assert p.step_ms >= profile.compute.step_ms * 0.999


def test_colocated_workers_share_the_cores():
  """Two colocated workers of 1.7 busy cores each on 2 cores: each tower
  runs at 2 / 3.4 of its speed, so the step takes at least 1.7x the
  compute (forward and backward) of one tower alone."""
  profile = _fixture()
  strategy = cost_model.Strategy('collective_all_reduce')
  apart = target_lib.make_target(num_workers=2)
  together = dataclasses.replace(apart, colocated=True)
  a = cost_model.predict(profile, apart, strategy).step_ms
  b = cost_model.predict(profile, together, strategy).step_ms
  compute = max(g.ready_ms for g in profile.gradients)
  assert b >= compute * 1.7 and b > a


def test_greedy_placement_follows_the_harness():
  """local.GreedyVariablePlacer: least-loaded task by bytes, ties first."""
  assert st.greedy_placement([10, 5, 5, 1, 20], 2) == [0, 1, 1, 0, 1]


def test_bad_strategies_and_targets_are_one_line_errors():
  profile = _fixture()
  with pytest.raises(cost_model.StrategyError, match='needs --num_ps'):
    cost_model.check_strategy(
      cost_model.Strategy('distributed_replicated'),
      target_lib.make_target(num_workers=2),
      profile,
    )
  with pytest.raises(cost_model.StrategyError, match='nccl needs a GPU'):
    cost_model.check_strategy(
      cost_model.Strategy('replicated', 'nccl'),
      target_lib.make_target(devices_per_worker=2),
      profile,
    )
  for spec in ('nccl', 'xring/nccl'):
    with pytest.raises(cost_model.StrategyError, match='inside one worker'):
      cost_model.check_strategy(
        cost_model.Strategy('distributed_all_reduce', spec),
        target_lib.make_target(num_workers=2, devices_per_worker=4),
        profile_format.load_profile(
          'tests/data/profile_resnet50_p100_synthetic.json'
        ),
      )
  for bad in (
    {'num_workers': 0},
    {'topology': 'ring'},
    {'link_mbits': -1.0},
    {'colocated': 'yes'},
    {'num_hosts': 2},
  ):
    with pytest.raises(target_lib.TargetError) as e:
      target_lib.make_target(**bad)
    assert '\n' not in str(e.value)


def test_naive_baselines_by_hand():
  """S = 1,078,888 bytes, B = 12.5 bytes/us, 64 ms step, 2 workers x 1.

  Paleo, all-reduce: 2(n-1)/n S/B = S/B = 86.311 ms; ps-held with one ps:
  2 W S / B = 345.24 ms. Daydream: S/(0.85 B) = 101.54 ms (ps: twice).
  """
  profile = _fixture()
  target = target_lib.make_target(num_workers=2, num_ps=1, link_mbits=100.0)
  size = profile.total_gradient_bytes
  ring = cost_model.Strategy('distributed_all_reduce', 'xring')
  ps = cost_model.Strategy('parameter_server')
  images = 2 * 32

  def rate(comm_us):
    return images / (64_000.0 + comm_us) * 1e6

  assert baselines.paleo_images_per_sec(profile, target, ring) == (
    pytest.approx(rate(size / 12.5))
  )
  assert baselines.paleo_images_per_sec(profile, target, ps) == (
    pytest.approx(rate(4 * size / 12.5))
  )
  assert baselines.daydream_images_per_sec(profile, target, ring) == (
    pytest.approx(rate(size / (0.85 * 12.5)))
  )
  assert baselines.daydream_images_per_sec(profile, target, ps) == (
    pytest.approx(rate(2 * size / (0.85 * 12.5)))
  )


def test_two_level_spec_with_one_device_per_worker_is_its_inter_part():
  """a/b: `a` inside each worker (nothing to do with one device), `b`
  across the workers' first devices, a copy to the rest (none)."""
  profile = _fixture()
  target = target_lib.make_target(num_workers=3, link_mbits=100.0)
  two = cost_model.Strategy('distributed_all_reduce', 'pscpu/xring')
  one = cost_model.Strategy('distributed_all_reduce', 'xring')
  cal = cal_lib.default_calibration()
  assert cost_model.simulate_step(profile, target, two, cal) == (
    pytest.approx(cost_model.simulate_step(profile, target, one, cal))
  )


def test_scaled_profile_keeps_the_ready_order_and_spread():
  from tf_cnn_benchmarks.scaling.profile import cost_model_paper

  base = _fixture()
  gpu = cost_model_paper.scaled_profile(
    base,
    32.0,
    batch_size=64,
    device_name='test',
    transports=cost_model_paper.gpu_assumptions(intra_gb_s=10, inter_gbit_s=25),
  )
  k = 32.0 / base.compute.step_ms
  assert gpu.compute.step_ms == 32.0 and gpu.host.device == 'gpu'
  assert gpu.compute.step_ms_p90 == pytest.approx(base.compute.step_ms_p90 * k)
  assert [g.ready_ms for g in gpu.gradients] == pytest.approx(
    [g.ready_ms * k for g in base.gradients]
  )
  # 25 Gbit/s line rate for the collectives: 3125 bytes/us.
  assert gpu.transports['collective'].bytes_per_us == pytest.approx(3125.0)


def test_calibration_file_names_where_each_constant_was_fitted(tmp_path):
  good = tmp_path / 'cal.json'
  good.write_text(
    '{"interference_cores": {"value": 0.5, "fitted_on": "cells A, B"}}'
  )
  cal = cal_lib.load_calibration(str(good))
  assert cal.value('interference_cores') == 0.5
  assert any('fitted on cells A, B' in line for line in cal.lines())
  bad = tmp_path / 'bad.json'
  bad.write_text('{"interference_cores": {"value": 0.5}}')
  with pytest.raises(cal_lib.CalibrationError, match='fitted_on'):
    cal_lib.load_calibration(str(bad))


def test_small_gradient_groups_follow_the_harness():
  """--agg_small_grads_max_bytes=64 --agg_small_grads_max_group=10: the
  harness groups the 100 small tensors (batch_allreduce.small_tensor_groups)
  into 10 runs of 10, so 10 gathers and 10 scatters of 640 bytes (51.2 us
  each), prepared in turn as in the small-tensor test above: 11 L + 2 x
  51.2 us (100 tensors apart: 101 L + 2 x 5.12 us)."""
  profile = made_up_profile([(64, 0.001)] * 100, step_ms=0.001)
  target = target_lib.make_target(
    num_workers=2, link_mbits=100.0, cores_per_host=1
  )
  strategy = cost_model.Strategy(
    'distributed_all_reduce',
    'pscpu',
    agg_small_grads_max_bytes=64,
    agg_small_grads_max_group=10,
  )
  _, step = cost_model.simulate_step(
    profile, target, strategy, no_interference(latency_cpu_fraction=1.0)
  )
  assert step == pytest.approx(11 * LATENCY_US / 1000.0 + 0.1024, rel=0.01)
  with pytest.raises(cost_model.StrategyError, match='not both'):
    cost_model.check_strategy(
      dataclasses.replace(strategy, gradient_repacking=2), target, profile
    )


def test_all_to_all_on_switch_ports_fills_them_less():
  """3 hosts, each sends S to each other host at once (one phase).

  Switch: each uplink and downlink carries 2S, and flows that meet two
  bottlenecks fill them to all_to_all_efficiency e (measured with raw TCP,
  cost_model_calibration.ALL_TO_ALL_EFFICIENCY): L + 2S/(e*B). Fan-in
  alone (two hosts to one) is one bottleneck: L + 2S/B. Shared: one link
  that every flow crosses, 6S at the shared table's efficiency for the
  all-to-all (measured there too, ALL_TO_ALL_EFFICIENCY_SHARED), and the
  fan-in's 2S at the full rate.
  """
  size, bandwidth, mbits = 100_000.0, 12.5, 100.0
  profile = made_up_profile([(4, 1.0)])
  hosts = [('cpu', w) for w in range(3)]
  everyone = [(s, d) for s in hosts for d in hosts if s != d]
  fan_in = [(hosts[0], hosts[2]), (hosts[1], hosts[2])]
  e = cal_lib.all_to_all_efficiency(mbits)
  assert 0.8 < e < 1.0
  e_shared = cal_lib.all_to_all_efficiency(mbits, 'shared')
  assert 0.8 < e_shared < 1.0
  times = {}
  for topology in ('shared', 'switch'):
    target = target_lib.make_target(
      num_workers=3, link_mbits=mbits, topology=topology
    )
    for name, flows in (('all', everyone), ('fan_in', fan_in)):
      b = cost_model_graph.StepBuilder(profile, target, no_interference())
      end = b.phase(flows, size, [])
      times[topology, name] = _run(b)[end]
  assert times['switch', 'all'] == pytest.approx(
    LATENCY_US + 2 * size / (e * bandwidth), rel=1e-6
  )
  assert times['switch', 'fan_in'] == pytest.approx(
    LATENCY_US + 2 * size / bandwidth, rel=1e-6
  )
  assert times['shared', 'all'] == pytest.approx(
    LATENCY_US + 6 * size / (e_shared * bandwidth), rel=1e-6
  )
  assert times['shared', 'fan_in'] == pytest.approx(
    LATENCY_US + 2 * size / bandwidth, rel=1e-6
  )


def test_all_to_all_efficiency_between_the_measured_rates():
  table = dict(cal_lib.ALL_TO_ALL_EFFICIENCY)
  assert cal_lib.all_to_all_efficiency(None) == 1.0  # unthrottled
  for mbits, e in table.items():
    assert cal_lib.all_to_all_efficiency(mbits) == pytest.approx(e)
  assert cal_lib.all_to_all_efficiency(1.0) == table[25.0]
  assert cal_lib.all_to_all_efficiency(1e5) == table[1000.0]
  # Linear in log(rate): 50 Mbit/s is halfway from 25 to 100.
  assert cal_lib.all_to_all_efficiency(50.0) == pytest.approx(
    (table[25.0] + table[100.0]) / 2
  )
  shared = dict(cal_lib.ALL_TO_ALL_EFFICIENCY_SHARED)
  for mbits, e in shared.items():
    assert cal_lib.all_to_all_efficiency(mbits, 'shared') == pytest.approx(e)
  assert cal_lib.all_to_all_efficiency(None, 'shared') == 1.0
  assert cal_lib.all_to_all_efficiency(50.0, 'shared') == pytest.approx(
    (shared[25.0] + shared[100.0]) / 2
  )
  lines = cal_lib.default_calibration().lines()
  (line,) = [ln for ln in lines if ln.startswith('all_to_all_efficiency = ')]
  assert 'shared: %g at 25 Mbit/s' % shared[25.0] in line


def test_towers_at_once_get_done_what_the_profile_measured():
  """One tower keeps 1 of 4 cores busy for 100 ms. Measured, 2 at once got
  1.5x one alone done and 4 at once 2x: each of 4 colocated towers asks
  4 / 2 = 2 cores, runs at half speed, and the compute takes 200 ms (not
  the 100 ms that 4 free cores would give). Unmeasured: 1 core each."""
  base = made_up_profile([(4, 100.0)], step_ms=100.0, cores=4)
  measured = dataclasses.replace(
    base,
    compute=dataclasses.replace(
      base.compute, concurrent_speedup=((2, 1.5), (4, 2.0))
    ),
  )
  target = target_lib.make_target(num_workers=4, colocated=True)
  for profile, asks, compute_ms in ((base, 1.0, 100.0), (measured, 2.0, 200.0)):
    b = cost_model_graph.StepBuilder(profile, target, no_interference())
    assert b.tower_cores() == asks
    ends = [b.tower(w, 0, [])[1] for w in range(4)]
    assert max(_run(b)[e] for e in ends) == pytest.approx(compute_ms * 1e3)
  # Per host (not colocated): 2 towers a worker, each asks 4 / 1.5 cores.
  two = target_lib.make_target(num_workers=2, devices_per_worker=2)
  b = cost_model_graph.StepBuilder(measured, two, no_interference())
  assert b.tower_cores() == pytest.approx(4 / 1.5)
  one = target_lib.make_target(num_workers=2)
  assert (
    cost_model_graph.StepBuilder(measured, one, no_interference()).tower_cores()
    == 1.0
  )


def test_a_step_that_starts_another_tasks_part_pays_the_controller_step():
  """distributed_all_reduce runs as one graph: its controller starts every
  step on every worker and waits for them all, the profile's
  controller_step (1.5 ms here) after the simulated step. A worker whose
  graph holds variables on a ps task starts the ps task's part of each
  step the same way (RunGraph): parameter_server, distributed_replicated,
  and hybrid when a variable is over its threshold (4000 bytes against
  1000; not against the default 1 MiB). collective_all_reduce's workers
  start no other task's part: nothing."""
  base = made_up_profile([(4000, 10.0)])
  step = profile_format.Transport(latency_us=1500.0, bytes_per_us=1e9)
  with_step = dataclasses.replace(
    base, transports=dict(base.transports, controller_step=step)
  )
  target = target_lib.make_target(num_workers=2, link_mbits=100.0)
  for strategy, num_ps, extra in (
    (cost_model.Strategy('distributed_all_reduce'), 0, 1.5),
    (cost_model.Strategy('collective_all_reduce'), 0, 0.0),
    (cost_model.Strategy('parameter_server'), 1, 1.5),
    (cost_model.Strategy('distributed_replicated'), 1, 1.5),
    (cost_model.Strategy('hybrid'), 1, 0.0),
    (cost_model.Strategy('hybrid', hybrid_threshold_bytes=1000), 1, 1.5),
  ):
    shape = dataclasses.replace(target, num_ps=num_ps)
    a = cost_model.predict(base, shape, strategy).step_ms
    b = cost_model.predict(with_step, shape, strategy).step_ms
    assert b - a == pytest.approx(extra), strategy


def test_colocated_cpu_tasks_pay_the_busy_controller_step():
  """Colocated CPU tasks start a step while the other tasks' towers keep
  the cores busy: the controller's RPCs wait for a core, the profile's
  controller_step_busy (3 ms here) instead of the idle 1 ms. Tasks on hosts
  of their own, GPU towers, or a profile without the busy figure: idle."""
  base = made_up_profile([(4000, 10.0)])
  idle = profile_format.Transport(latency_us=1000.0, bytes_per_us=1e9)
  busy = profile_format.Transport(latency_us=3000.0, bytes_per_us=1e9)
  both = dict(base.transports, controller_step=idle, controller_step_busy=busy)
  measured = dataclasses.replace(base, transports=both)
  only_idle = dataclasses.replace(
    base, transports=dict(base.transports, controller_step=idle)
  )
  apart = target_lib.make_target(num_workers=2, link_mbits=100.0)
  together = dataclasses.replace(apart, colocated=True)
  dar = cost_model.Strategy('distributed_all_reduce')

  def extra_ms(profile, target, device='cpu'):
    with_step, without = (
      dataclasses.replace(p, host=dataclasses.replace(p.host, device=device))
      for p in (profile, base)
    )
    return (
      cost_model.predict(with_step, target, dar).step_ms
      - cost_model.predict(without, target, dar).step_ms
    )

  assert extra_ms(measured, together) == pytest.approx(3.0)
  assert extra_ms(measured, apart) == pytest.approx(1.0)
  assert extra_ms(only_idle, together) == pytest.approx(1.0)
  assert extra_ms(measured, together, device='gpu') == pytest.approx(1.0)


def _sharing(compute_us, cores_asked):
  """A compute job (`cores_asked` cores at full speed) and a 1000-byte
  transfer over a 10 B/us link that asks 0.05 cores per B/us (0.5 cores
  at its full 10 B/us), on one 2-core CPU: their finish times."""
  g = simulate.Graph()
  g.add(simulate.Job(compute_us, {'cpu': cores_asked}, cap=1.0))
  g.add(simulate.Job(1000.0, {'link': 1.0, 'cpu': 0.05}))
  return simulate.run(g, {'cpu': 2.0, 'link': 10.0})


def test_a_transfer_beside_compute_gets_its_share_of_the_cpu():
  """Compute asking 1.5 cores and a transfer asking 0.5 fit the 2 cores:
  both run at full speed (compute 100 us; the transfer 1000 B at 10 B/us,
  100 us). A transfer is not held to the CPU's capacity in bytes per
  microsecond (2 / load: about 1.3 B/us, 775 us)."""
  compute, transfer = _sharing(100.0, 1.5)
  assert compute == pytest.approx(100.0)
  assert transfer == pytest.approx(100.0)


def test_an_overloaded_cpu_slows_compute_and_transfer_alike():
  """Compute asking 2 cores and the transfer's 0.5: 2.5 asked of 2, each
  at 0.8 of its full speed. The transfer (8 B/us) ends at 125 us, when the
  compute has done 100 of its 200 us; alone, it does the rest by 225."""
  compute, transfer = _sharing(200.0, 2.0)
  assert transfer == pytest.approx(125.0)
  assert compute == pytest.approx(225.0)


def _ps_push_ms(gradients, indices, means_after_all=False, devices=1):
  """When push_and_apply's update is done on worker 0 (ms): 2 workers and
  1 ps on 100 Mbit/s switch ports, exact transports, no interference."""
  from tf_cnn_benchmarks.scaling.model import cost_model_ps

  profile = made_up_profile(gradients)
  target = target_lib.make_target(
    num_workers=2, num_ps=1, link_mbits=100.0, devices_per_worker=devices
  )
  b = cost_model_graph.StepBuilder(profile, target, no_interference())
  ready, last = st.towers(b, {})
  done = cost_model_ps.push_and_apply(
    b, ready, last, indices, sync=True, means_after_all=means_after_all
  )
  return _run(b)[done[0]] / 1000.0


def test_a_ps_held_gradient_alone_crosses_as_soon_as_it_is_ready():
  """Both workers push a 1 MB gradient ready at 10 ms of a 100 ms backward
  pass to the one ps: 2 MB through its port at 12.5 bytes/us, 160 ms, plus
  one latency (0.1 ms). Alone on its task it is not packed, so it crosses
  from 10 ms: done at 170.1 ms. Packed with a gradient ready at 100 ms
  (variable_mgr/transfers.py packs two or more), it waits for that one:
  100 + 0.1 + 160 ms. The apply waits for every tower's backward pass too
  (ps_cluster.all_grads): a 12.5 kB gradient pushed by 12.1 ms lands at
  100 ms."""
  early = [(1_000_000, 10.0), (4, 100.0)]
  assert _ps_push_ms(early, [0]) == pytest.approx(170.1, rel=1e-4)
  two = 2 * (1_000_000 + 4) / 12.5 / 1000.0
  assert _ps_push_ms(early, [0, 1]) == pytest.approx(100.1 + two, rel=1e-4)
  small = [(12_500, 10.0), (4, 100.0)]
  assert _ps_push_ms(small, [0]) == pytest.approx(100.0, rel=1e-4)


def test_a_pack_waits_for_every_gradient_of_its_worker():
  """Two 1 MB gradients ready at 10 and 20 ms of a 100 ms backward pass,
  pushed packed to the one ps (the third, ready at 100 ms, is not pushed,
  as hybrid's small ones): the pack is made under the update's
  all-gradients barrier, so it leaves at 100 ms, not 20: 100 + 0.1 ms +
  4 MB through the ps port at 12.5 bytes/us (320 ms). hybrid's means are
  made under it too: with two towers a worker, even a lone variable waits
  (100.1 + 160 ms, and the towers' add); with one, its "mean" is the
  gradient itself (base.mean_of makes no op), which leaves at 10 ms."""
  early = [(1_000_000, 10.0), (1_000_000, 20.0), (4, 100.0)]
  assert _ps_push_ms(early, [0, 1]) == pytest.approx(420.1, rel=1e-4)
  lone = [(1_000_000, 10.0), (4, 100.0)]
  assert _ps_push_ms(lone, [0]) == pytest.approx(170.1, rel=1e-4)
  one_tower = _ps_push_ms(lone, [0], means_after_all=True)
  assert one_tower == pytest.approx(170.1, rel=1e-4)
  two = _ps_push_ms(lone, [0], means_after_all=True, devices=2)
  alone = _ps_push_ms(lone, [0], devices=2)
  assert alone < 171.0 < 260.1 <= two < 261.0


def test_a_value_read_from_the_ps_gates_the_forward_pass_where_used():
  """A 100 ms tower (30 ms forward, 70 backward) gated at 12 ms on a job
  ending at 50 ms: 12 ms of compute, a wait until 50, then the other 88 ms:
  done at 138 ms. The use time mirrors the gradient's place in the
  backward pass: ready 7 ms into 70 (a tenth), used at nine tenths of the
  forward pass, 27 ms; ready at the end of the backward pass (the first
  layer), used at 0."""
  profile = made_up_profile([(4, 37.0), (4, 100.0)])
  compute = dataclasses.replace(
    profile.compute, forward_ms=30.0, backward_ms=70.0
  )
  profile = dataclasses.replace(profile, compute=compute)
  target = target_lib.make_target(num_workers=1)
  b = cost_model_graph.StepBuilder(profile, target, no_interference())
  assert b.forward_use_ms(0) == pytest.approx(27.0)
  assert b.forward_use_ms(1) == pytest.approx(0.0)
  value = b.graph.add(simulate.Job(0.0, delay_us=50_000.0, name='read'))
  _, last = b.tower(0, 0, [], gates={12.0: [value]})
  assert _run(b)[last] == pytest.approx(138_000.0, rel=1e-6)


@pytest.mark.parametrize('n', [2, 3])
def test_a_collective_over_two_tasks_takes_the_profiled_hop(n):
  """The profile times a collective per all-reduce over two tasks: two
  ring steps (reduce-scatter, all-gather) of S/2 each, T(S) = L + S/r. The
  model times each ring step as one message (L/2 + chunk/r), so two tasks
  take the profiled hop itself, and n tasks 2(n-1) steps of S/n."""
  size, latency, rate = 1_000_000.0, 800.0, 400.0
  base = made_up_profile([(4, 1.0)])
  collective = profile_format.Transport(latency, rate, messages_per_hop=2)
  profile = dataclasses.replace(
    base, transports=dict(base.transports, collective=collective)
  )
  target = target_lib.make_target(num_workers=n)
  b = cost_model_graph.StepBuilder(profile, target, no_interference())
  ends = ar.one_level(b, 'collective', 1, st.places(target), size, [])
  steps = 2 * (n - 1)
  expected = steps * (latency / 2 + size / n / rate)
  assert _run(b)[ends[0]] == pytest.approx(expected, rel=1e-6)
  if n == 2:
    assert expected == pytest.approx(collective.time_us(size))


def test_a_measured_message_cpu_replaces_the_constants():
  """A profile whose gRPC says what a message takes from busy cores: M
  core-us a message (work on the sender before it leaves), b core-us a
  byte (half on each end). Two colocated workers on 1 core, so the bytes
  move at 1 / b bytes a us (the transport alone: 1e9); the constants
  (interference 2 cores, all of the latency as CPU) play no part.
  S = 1 MB, M = 500, b = 0.01: 500 + L + S * b us."""
  size, per_message, per_byte = 1_000_000.0, 500.0, 0.01
  base = made_up_profile([(4, 1.0)], cores=1)
  grpc = dataclasses.replace(
    base.transports['grpc'],
    cpu_us_per_message=per_message,
    cpu_us_per_byte=per_byte,
  )
  profile = dataclasses.replace(
    base, transports=dict(base.transports, grpc=grpc)
  )
  constants = dict(no_interference(latency_cpu_fraction=1.0).constants)
  constants['interference_cores'] = cal_lib.Constant(2.0, 'test', '')
  target = target_lib.make_target(num_workers=2, colocated=True)
  b = cost_model_graph.StepBuilder(
    profile, target, cal_lib.Calibration(constants)
  )
  end = b.message(('cpu', 0), ('cpu', 1), size, [])
  expected = per_message + LATENCY_US + size * per_byte
  assert _run(b)[end] == pytest.approx(expected, rel=1e-6)
