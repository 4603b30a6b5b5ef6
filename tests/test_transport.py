"""Transport microbenchmarks (tf_cnn_benchmarks/scaling/transport*.py).

One short real run over gRPC tasks on 127.0.0.1 with small messages; the
rest checks the fit and the chains' graphs. No assertion on how long
anything took.
"""

import pytest
import tensorflow as tf

from tf_cnn_benchmarks.scaling.profile import transport
from tf_cnn_benchmarks.scaling.profile import transport_bench
from tf_cnn_benchmarks.training import optimizers

tf1 = tf.compat.v1


def test_fit_recovers_a_line_and_keeps_the_small_sizes_as_a_table():
  # 50 us + bytes / 1000 from 64 KiB up; small sizes flat at 40-45 us.
  rows = [[64, 40.0, 39.0, 41.0], [4096, 45.0, 44.0, 46.0]]
  rows += [
    [n, 50.0 + n / 1000.0, 0.0, 0.0] for n in (1 << 16, 1 << 20, 1 << 24)
  ]
  t = transport.fit_transport(rows, 'test')
  assert t.latency_us == pytest.approx(50.0)
  assert t.bytes_per_us == pytest.approx(1000.0)
  assert t.fit_from_bytes == 1 << 16
  assert t.table == ((64, 40.0), (4096, 45.0), (65536, 50.0 + 65.536))
  assert t.time_us(64) == 40.0
  assert t.samples[0] == (64, 40.0, 39.0, 41.0)


def test_fit_without_a_size_term_records_no_bandwidth_limit():
  rows = [[n, 2.0, 1.0, 3.0] for n in (1 << 16, 1 << 20, 1 << 24)]
  t = transport.fit_transport(rows, 'flat')
  assert t.latency_us == pytest.approx(2.0)
  assert t.bytes_per_us == transport.NO_SIZE_TERM_BYTES_PER_US


def test_pass_chain_alternates_the_two_devices():
  devices = ['/job:ps/task:0/device:CPU:0', '/job:worker/task:0/device:CPU:0']
  with tf.Graph().as_default() as g:
    with tf.device(devices[0]):
      start = tf.zeros([16])
    transport_bench.pass_chain(start, devices, 3)
  hops = [op.device for op in g.get_operations() if op.type == 'Identity']
  assert [tf.DeviceSpec.from_string(d).job for d in hops] == [
    'worker',
    'ps',
    'worker',
  ]


@pytest.mark.slow  # TensorFlow tasks twice (the CPU run too), ~60 s
def test_real_transports_over_grpc_tasks():
  measured = transport.measure_transports(
    sizes=(64, 4096),
    apply_shapes=[(10,), (100, 10)],
    optimizer_config=optimizers.OptimizerConfig(),
    timeout=600,
  )
  assert set(measured.transports) == {
    'grpc',
    'collective',
    'local_copy',
    'controller_step',
    'controller_step_busy',
  }
  for name in ('controller_step', 'controller_step_busy'):
    step = measured.transports.pop(name)
    assert step.latency_us > 0 and not step.table
    assert step.samples[0][0] == 0
    assert step.samples[0][2] <= step.samples[0][1] <= step.samples[0][3]
    assert step.measured == transport.CONTROLLER_STEPS[name]
  for t in measured.transports.values():
    assert [s[0] for s in t.samples] == [64, 4096]
    assert all(s[2] <= s[1] <= s[3] for s in t.samples)
    assert t.latency_us >= 0 and t.bytes_per_us > 0
    assert t.measured
  # What a message takes from busy cores, measured for gRPC and collectives.
  for name in ('grpc', 'collective'):
    t = measured.transports[name]
    assert t.cpu_us_per_message > 0 and t.cpu_us_per_byte >= 0
    # ... and with 16 messages in flight at once (their shared part).
    assert t.cpu_us_per_message_concurrent > 0
    assert 0 <= t.cpu_shared_fraction() <= 1
  assert measured.transports['local_copy'].cpu_us_per_message is None
  # The collective also over three tasks: its op's own part, apart.
  assert measured.transports['collective'].cpu_us_per_op >= 0
  assert measured.transports['grpc'].cpu_us_per_op is None
  # An all-reduce over two tasks is two ring steps; a pass is one message.
  assert {k: t.messages_per_hop for k, t in measured.transports.items()} == {
    'grpc': 1,
    'collective': 2,
    'local_copy': 1,
  }
  assert [b for b, _ in measured.ps_apply_samples] == [40, 4000]
  assert all(ms >= 0 for _, ms in measured.ps_apply_samples)


def test_controller_step_is_the_mean_without_a_size_term():
  """Each step pays the controller's cost, so a throughput pays its mean
  (1900 here: mostly 1 ms, sometimes 4); a row without a mean (older
  profiles) gives its median."""
  busy = transport.controller_transport(
    [[0, 1100.0, 900.0, 4100.0, 1900.0]], transport.CONTROLLER_STEP_BUSY
  )
  assert busy.latency_us == 1900.0
  assert busy.samples == ((0, 1100.0, 900.0, 4100.0),)
  assert busy.measured == transport.CONTROLLER_STEP_BUSY_DESCRIPTION
  t = transport.controller_transport([[0, 1200.0, 1000.0, 1500.0]])
  assert t.latency_us == 1200.0 and t.table == ()
  assert t.time_us(0) == pytest.approx(1200.0)
  assert t.time_us(1 << 20) == pytest.approx(1200.0, rel=1e-3)
  assert t.samples == ((0, 1200.0, 1000.0, 1500.0),)


def test_hop_sample_keeps_the_mean_of_the_differences(monkeypatch):
  """Runs of 1 ms (short) against 2, 5, 2, 0.5 ms (long): differences of
  1, 4, 1 and -0.5 ms. The median and percentiles clamp at 0; the mean
  keeps the sign (it is E[long] - E[short]): 5.5 / 4 ms."""

  class Session:
    def run(self, fetch):
      pass

  times = iter([1.0, 2.0, 1.0, 5.0, 1.0, 2.0, 1.0, 0.5])
  monkeypatch.setattr(transport_bench, '_run_ms', lambda s, f: next(times))
  s = transport_bench.hop_sample(Session(), 'short', 'long', 1, 4, 0)
  assert s.mean_us == pytest.approx(1375.0)
  assert s.median_us == pytest.approx(1000.0)
  assert s.p10_us == pytest.approx(0.0, abs=300.0)
