"""Workers started with different graph-shaping flags refuse to start.

Before issue 26 the cluster fingerprint listed its flags by hand and missed
nine graph-shaping ones; it now hashes every Params field declared with
graph=True. Two real workers, as tests/test_failures.py starts them.
"""

from tests import test_failures


def test_workers_with_different_allreduce_merge_scope_refuse_to_start():
  hosts = ['127.0.0.1:%d' % test_failures._free_port() for _ in range(2)]
  out = test_failures._start_tasks(
    [['--allreduce_merge_scope=%d' % v] for v in (1, 2)], hosts
  )
  # Before: both workers trained, each with its own merge scope.
  assert [rc for rc, _ in out] == [2, 2], out
  assert [len(err) for _, err in out] == [1, 1], out
  for _, err in out:
    assert err[0].startswith('error: --allreduce_merge_scope='), err
