"""A worker with one inter-op thread: its all-reduce waits for its compute.

Traced on the launcher's shared link (lab/notes/predicting_experiments.md,
section 7): --cluster_threads=auto gives each of 2 workers on 2 cores one
inter-op thread, and the receives of distributed_all_reduce start only when
the worker's compute is done.
"""

import pytest

from tests.test_cost_model import made_up_profile
from tests.test_cost_model import no_interference
from tf_cnn_benchmarks.cluster import thread_pools
from tf_cnn_benchmarks.scaling.auto import auto
from tf_cnn_benchmarks.scaling.auto import auto_launch
from tf_cnn_benchmarks.scaling.model import cost_model
from tf_cnn_benchmarks.scaling.model import target as target_lib


def _dar_step_ms(threads=None, cores=8, ready=10.0, workers=2):
  """distributed_all_reduce (xring) of one 625,000-byte gradient ready at
  `ready` ms of a 100 ms backward pass, and a 4-byte one ready at its end,
  over `workers` hosts at 100 Mbit/s (test_cost_model's overlap case)."""
  profile = made_up_profile([(625_000, ready), (4, 100.0)], cores=cores)
  target = target_lib.make_target(
    num_workers=workers, link_mbits=100.0, worker_inter_op_threads=threads
  )
  strategy = cost_model.Strategy('distributed_all_reduce', 'xring')
  return cost_model.simulate_step(profile, target, strategy, no_interference())[
    1
  ]


def test_one_inter_op_thread_starts_the_ring_after_the_compute():
  """Two threads: the big ring (50 ms and 2 latencies) runs inside the
  100 ms pass; the step is 100 + 0.2 ms (the last 4-byte ring). One
  thread: both rings wait for the pass, and they share the link: the
  step is 100 + 50.0 ms of bytes + 0.2 ms of latencies."""
  assert _dar_step_ms(threads=2) == pytest.approx(100.2, rel=1e-3)
  assert _dar_step_ms(threads=1) == pytest.approx(150.2, rel=1e-3)


def test_tensorflows_default_on_a_one_core_host_is_one_thread():
  assert _dar_step_ms(threads=None, cores=1) == pytest.approx(150.2, rel=1e-3)
  assert _dar_step_ms(threads=None, cores=2) == pytest.approx(100.2, rel=1e-3)


def test_one_worker_has_no_transfers_to_hold_back():
  """replicated on one host: the rule is about transfers between hosts."""
  assert _dar_step_ms(threads=1, workers=1) == _dar_step_ms(workers=1)


def test_the_launchers_placement_gives_the_workers_threads():
  """On one shared link every task listens on one address: 2 or 3 workers
  on 2 cores get one inter-op thread each; switch ports, TensorFlow's
  default, unless the tasks are colocated (the launcher's); the explicit
  --num_inter_threads wins."""
  colocated = {'tasks_colocated': True}
  for workers in (2, 3):
    shared = auto_launch.stand_in_cluster(workers, 1, False, 'shared')
    switch = auto_launch.stand_in_cluster(workers, 1, False, 'switch')
    assert auto.worker_inter_op_threads({}, shared, cores=2) == 1
    assert auto.worker_inter_op_threads({}, switch, cores=2) is None
    assert auto.worker_inter_op_threads(colocated, switch, cores=2) == 1
    explicit = {'num_inter_threads': 2}
    assert auto.worker_inter_op_threads(explicit, shared, cores=2) == 2
    default = {'cluster_threads': 'tf_default'}
    assert auto.worker_inter_op_threads(default, shared, cores=2) is None
  eight = auto_launch.stand_in_cluster(2, 0, False, 'shared')
  assert auto.worker_inter_op_threads({}, eight, cores=8) == 4
  ports = auto_launch.stand_in_cluster(2, 0, False, 'switch')
  assert auto.worker_inter_op_threads(colocated, ports, cores=8) == 4


def test_host_pools_rule_by_hand():
  assert thread_pools.host_pools({'worker': 1}, 'worker', cores=2) == (
    thread_pools.TF_DEFAULTS
  )
  here = {'worker': 3, 'ps': 1}
  assert thread_pools.host_pools(here, 'worker', cores=8).inter_op == 2
  assert thread_pools.host_pools(here, 'ps', cores=8).inter_op == 2
  assert thread_pools.host_pools(here, 'worker', 'tf_default', 8) == (
    thread_pools.TF_DEFAULTS
  )
  assert thread_pools.inter_op_threads(thread_pools.TF_DEFAULTS, 6) == 6
  assert thread_pools.inter_op_threads(thread_pools.ThreadPools(1, 1), 6) == 1


def test_the_target_refuses_zero_threads_and_names_them():
  with pytest.raises(target_lib.TargetError, match='worker_inter_op_threads'):
    target_lib.make_target(worker_inter_op_threads=0)
  target = target_lib.make_target(num_workers=2, worker_inter_op_threads=1)
  assert target.shape_text().endswith('1 inter-op thread')
