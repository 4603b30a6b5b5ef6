"""Queues: a host's messages prepare their CPU work in the order they were
handed over, as many at once as the cores hold, so the first goes on the
wire while the next is still being prepared (simulate.py's queues)."""

import pytest

from tests.test_cost_model import made_up_profile
from tests.test_cost_model import no_interference
from tests.test_cost_model_sharing import _with_cpu
from tf_cnn_benchmarks.scaling.model import cost_model_graph
from tf_cnn_benchmarks.scaling.model import simulate
from tf_cnn_benchmarks.scaling.model import target as target_lib


def _jobs(cpus, specs, crowds=None):
  """Ends of jobs of 100 us on a CPU of `cpus` cores; specs: (cores asked,
  queue, crowd) of each, in the order added."""
  graph = simulate.Graph()
  for cores, queue, crowd in specs:
    graph.add(
      simulate.Job(100.0, {'cpu': cores}, cap=1.0, queue=queue, crowd=crowd)
    )
  return simulate.run(graph, {'cpu': cpus}, crowds=crowds)


def test_a_queue_serves_its_jobs_in_start_order_as_the_cores_hold():
  # Two of one core each fit on two cores: served at once.
  assert _jobs(2.0, [(1.0, 'q', '')] * 2) == pytest.approx([100.0, 100.0])
  # Two asking two cores each do not: the second waits for the first.
  assert _jobs(2.0, [(2.0, 'q', '')] * 2) == pytest.approx([100.0, 200.0])
  # Without a queue they share the cores and end together.
  assert _jobs(2.0, [(2.0, '', '')] * 2) == pytest.approx([200.0, 200.0])
  # Different queues do not wait for each other.
  two = [(2.0, 'a', ''), (2.0, 'b', '')]
  assert _jobs(2.0, two) == pytest.approx([200.0, 200.0])


def test_a_waiting_job_holds_nothing():
  """One core: a plain job and the head of a queue share it (200 each);
  the queue's second waits, then runs alone (100 more)."""
  specs = [(1.0, '', ''), (1.0, 'q', ''), (1.0, 'q', '')]
  assert _jobs(1.0, specs) == pytest.approx([200.0, 200.0, 300.0])


def test_a_waiting_job_is_in_flight_for_its_crowd():
  """Two queued jobs of a crowd sharing half their work, one core: the
  first costs 1 - 0.5 + 0.5 / 2 = 0.75 of its 100 us (two in flight),
  the second, alone, all of its 100: ends 75 and 175."""
  specs = [(1.0, 'q', 'c')] * 2
  ends = _jobs(1.0, specs, {'c': 0.5})
  assert ends == pytest.approx([75.0, 175.0])


def _two_phases(cpu_us, nbytes):
  """Two collective phases (two gradients) between two colocated workers
  on two cores, over 8 Mbit/s switch ports (1 byte/us), handed over at
  once: (their message CPU jobs, their transfers, the graph's ends)."""
  profile = made_up_profile([(4, 1.0)], cores=2, latency=0.0)
  profile = _with_cpu(profile, cpu_us, None)
  target = target_lib.make_target(
    num_workers=2, colocated=True, link_mbits=8.0, topology='switch'
  )
  b = cost_model_graph.StepBuilder(profile, target, no_interference())
  flows = [(('cpu', 0), ('cpu', 1)), (('cpu', 1), ('cpu', 0))]
  sent = [b.phase(flows, nbytes, [], 'collective', 'ring') for _ in range(2)]
  rpc = [i for i, j in enumerate(b.graph.jobs) if j.name == 'ring/rpc']
  assert {b.graph.jobs[i].queue for i in rpc} == {'collective@w0,w1'}
  ends = simulate.run(b.graph, b.capacities(), b.link_decay(), b.crowds)
  return [ends[i] for i in rpc], [ends[i] for i in sent]


def test_the_second_message_is_prepared_while_the_first_is_on_the_wire():
  """Each phase's message CPU is 100 us on each of the two workers (both
  cores); its bytes take 1000 us alone on each port. The first phase's CPU
  ends at 100 and its bytes start; the second's CPU ends at 200, then the
  two share the ports (900 and 1000 bytes left at 1/2 byte/us each): the
  first ends at 2000, the second at 2100, one CPU time plus both wire
  times (both CPU times first, as when the CPU jobs shared the cores and
  ended together: 2200)."""
  cpu, sent = _two_phases(100.0, 1000)
  assert cpu == pytest.approx([100.0, 200.0])
  assert sent == pytest.approx([2000.0, 2100.0])
