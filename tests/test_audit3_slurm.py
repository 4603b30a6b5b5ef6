"""Slurm node lists read with a bound, and hostile host names (issue 58).

TensorFlow's SlurmClusterResolver expanded SLURM_STEP_NODELIST in full
('n[1-999999999]': a MemoryError after a minute), took a node list longer
than the tasks-per-node list without a word (worker 0 then waited 45 s for
a host outside the step), and let a node name with a tab or a '/' through
to the server, whose error named --worker_hosts, a flag never given.
"""

import os
import resource
import subprocess
import sys

import pytest

# Private on purpose: the parity tests compare slurm_nodes with TensorFlow's
# own expand_hostlist / expand_tasks_per_node, which have no public name.
from tensorflow.python.distribute.cluster_resolver import (
  slurm_cluster_resolver as tf_slurm,
)

from tests.helpers import ROOT
from tests.helpers import TRIVIAL_FLAGS
from tests.helpers import task_env
from tf_cnn_benchmarks.cluster import slurm
from tf_cnn_benchmarks.cluster import slurm_nodes
from tf_cnn_benchmarks.cluster import spec as spec_lib


def _step(nodes, per_node, ntasks=2, rank=0):
  return {
    'SLURM_JOB_ID': '7',
    'SLURM_PROCID': str(rank),
    'SLURM_STEP_NUM_TASKS': str(ntasks),
    'SLURM_STEP_NODELIST': nodes,
    'SLURM_STEP_TASKS_PER_NODE': per_node,
  }


@pytest.fixture
def step(monkeypatch):
  """Makes this process task `rank` of a step (the resolver reads
  os.environ); TensorFlow's own node-list expansion is made to fail, so
  a test fails if it is ever reached."""

  def expand_hostlist(text):
    raise AssertionError('TensorFlow expanded the node list %r' % text)

  monkeypatch.setattr(tf_slurm, 'expand_hostlist', expand_hostlist)

  def enter(nodes, per_node, **kwargs):
    monkeypatch.setattr(slurm, '_RESOLVED', {})
    for name in [n for n in os.environ if n.startswith('SLURM')]:
      monkeypatch.delenv(name)
    for name, value in _step(nodes, per_node, **kwargs).items():
      monkeypatch.setenv(name, value)
    options = slurm.ClusterOptions(device='cpu', port_base=7000)
    return slurm.resolve_cluster(options)

  return enter


def _refused(step, nodes, per_node, **kwargs) -> str:
  with pytest.raises(spec_lib.ClusterError) as e:
    step(nodes, per_node, **kwargs)
  text = str(e.value)
  assert '\n' not in text and '\t' not in text, text
  return text


def test_a_huge_node_list_is_refused_unexpanded(step):
  text = _refused(step, 'n[1-999999999]', '1(x2)')
  assert text == (
    'SLURM_STEP_NODELIST=n[1-999999999]: lists 999999999 node(s), but '
    'SLURM_STEP_TASKS_PER_NODE=1(x2) places the tasks on 2'
  )


def test_more_nodes_than_the_tasks_per_node_list_is_refused(step):
  text = _refused(step, 'n[1-5]', '1(x2)')
  assert text.startswith('SLURM_STEP_NODELIST=n[1-5]: lists 5 node(s)')
  assert 'places the tasks on 2' in text


@pytest.mark.parametrize(
  'nodes, shown, name',
  [
    ('n1,n\t2', "'n1,n\\t2'", "'n\\t2'"),
    ('n\x01[1-2]', "'n\\x01[1-2]'", "'n\\x011'"),
    ('n1,n/2', 'n1,n/2', 'n/2'),
    ('n1,n 2', "'n1,n 2'", "'n 2'"),
  ],
)
def test_a_node_that_is_no_host_name_is_named_escaped(step, nodes, shown, name):
  text = _refused(step, nodes, '1(x2)')
  assert text.startswith(
    'SLURM_STEP_NODELIST=%s: node %s is no host name'
    % (
      shown,
      name,
    )
  )
  assert 'worker_hosts' not in text


@pytest.mark.parametrize(
  'nodes, per_node, ntasks, needle',
  [
    ('n1,n1', '1(x2)', 2, 'node n1 is listed twice'),
    ('n[2-1]', '1(x2)', 2, 'range [2-1]'),
    ('n[1-2', '1(x2)', 2, 'SLURM_STEP_NODELIST=n[1-2: want node names'),
    ('n[1-2]', '1(x99999999999)', 2, 'each count must be in 1..'),
    ('n[1-2]', '1(x3)', 2, 'places 3 task(s), but SLURM_STEP_NUM_TASKS=2'),
    ('n[1-2]', '0,2', 2, 'each count must be in 1..'),
  ],
)
def test_bad_step_lists_are_one_line(step, nodes, per_node, ntasks, needle):
  assert needle in _refused(step, nodes, per_node, ntasks=ntasks)


def test_a_task_count_of_thousands_of_digits_is_one_line(step):
  text = _refused(step, 'n[1-2]', '1(x2)', ntasks='9' * 5000)
  assert text == (
    'SLURM_STEP_NUM_TASKS=%s...: must be a whole number in 0..999999999'
    % ('9' * 40)
  )


def test_a_good_step_resolves_without_tensorflow_expanding_it(step):
  cluster = step('127.0.0.[1-2]', '1(x2)', rank=1)
  assert cluster.worker_hosts == ('127.0.0.1:7000', '127.0.0.2:7001')
  assert cluster.me == ('worker', 1)


def test_the_expansion_is_tensorflows():
  nodes, per_node = 'gpu[08-10,7],cpu1,n[1-2]', '2(x3),1,3,1(x2)'
  env = _step(nodes, per_node, ntasks=12)
  expected = dict(
    zip(
      tf_slurm.expand_hostlist(nodes),
      tf_slurm.expand_tasks_per_node(per_node),
    )
  )
  assert slurm_nodes.step_nodes(env, 12) == expected
  assert list(expected) == [
    'gpu08',
    'gpu09',
    'gpu10',
    'gpu7',
    'cpu1',
    'n1',
    'n2',
  ]


@pytest.mark.parametrize(
  'hosts, ok',
  [
    ('n1:1,n-2.example.org:2', True),
    ('[::1]:8888', True),
    ('n\t1:8888', False),
    ('n/1:8888', False),
  ],
)
def test_flag_hosts_are_host_names(hosts, ok):
  if ok:
    assert spec_lib.resolve('worker', 0, hosts, None, None, 'grpc', env={})
    return
  with pytest.raises(spec_lib.ClusterError) as e:
    spec_lib.resolve('worker', 0, hosts, None, None, 'grpc', env={})
  assert str(e.value).startswith('--worker_hosts=')
  assert '\t' not in str(e.value) and 'is letters, digits' in str(e.value)


def _address_space_limit():
  """Caps the child's memory at 3 GB: the unbounded expansion of before
  ended in a MemoryError there instead of growing until killed."""
  resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


@pytest.mark.parametrize(
  'nodes, needle',
  [
    ('n[1-999999999]', 'SLURM_STEP_NODELIST=n[1-999999999]: lists 999999999'),
    ('n[1-5]', 'SLURM_STEP_NODELIST=n[1-5]: lists 5 node(s)'),
    ('n1,n\t2', "SLURM_STEP_NODELIST='n1,n\\t2': node 'n\\t2'"),
  ],
)
def test_the_command_line_refuses_at_once(nodes, needle):
  env = dict(task_env(), **_step(nodes, '1(x2)'))
  proc = subprocess.run(
    [sys.executable, '-m', 'tf_cnn_benchmarks', *TRIVIAL_FLAGS]
    + ['--num_batches=3', '--variable_update=collective_all_reduce'],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=120,
    preexec_fn=_address_space_limit,
  )
  lines = [ln for ln in proc.stderr.splitlines() if ln]
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert len(lines) == 1 and lines[0].startswith('error: '), lines
  assert needle in lines[0], lines
