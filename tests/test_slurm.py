"""Slurm: each task's role from its rank (cluster/slurm.py).

No Slurm here: the tests set the SLURM_* variables srun gives each task of
a 2-node step whose node names (127.0.0.1 and localhost) both reach this
machine, and put a stub `scontrol` on PATH that records any call
(TensorFlow 2.21's SlurmClusterResolver expands the node list itself and
never calls it).
"""

import json
import os
import socket
import subprocess
import sys

import pytest

from tests.helpers import ROOT
from tests.helpers import TRIVIAL_FLAGS
from tests.helpers import task_env
from tf_cnn_benchmarks.cluster import slurm
from tf_cnn_benchmarks.cluster import spec as spec_lib
from tf_cnn_benchmarks.config import params as params_lib

# Two nodes: two tasks on the first, one on the second.
NODES = '127.0.0.1,localhost'
TASKS_PER_NODE = '2,1'
NODE_OF_RANK = ['127.0.0.1', '127.0.0.1', 'localhost']


def step_env(
  rank, *, ntasks=3, nodes=NODES, per_node=TASKS_PER_NODE, names=None
):
  """The SLURM_* variables srun gives task `rank` of the test's step
  (names: the node names of `nodes` when it is not a plain list)."""
  node_names = names or nodes.split(',')
  counts = []
  for part in per_node.split(','):  # '2(x3)': 2 tasks on each of 3 nodes
    tasks, _, times = part.rstrip(')').partition('(x')
    counts += [int(tasks)] * int(times or 1)
  node_id = next(k for k in range(len(counts)) if rank < sum(counts[: k + 1]))
  return {
    'SLURM_JOB_ID': '4242',
    'SLURM_STEP_ID': '0',
    'SLURM_PROCID': str(rank),
    'SLURM_NTASKS': str(ntasks),
    'SLURM_STEP_NUM_TASKS': str(ntasks),
    'SLURM_JOB_NODELIST': nodes,
    'SLURM_STEP_NODELIST': nodes,
    'SLURM_STEP_TASKS_PER_NODE': per_node,
    'SLURM_NODEID': str(node_id),
    'SLURM_LOCALID': str(rank - sum(counts[:node_id])),
    'SLURMD_NODENAME': node_names[node_id],
  }


@pytest.fixture
def in_step(monkeypatch):
  """Sets this process's environment to task `rank`'s (os.environ: the
  resolver reads it there)."""

  def enter(rank, **kwargs):
    # Each test resolves afresh (a process resolves its step once).
    monkeypatch.setattr(slurm, '_RESOLVED', {})
    for name in list(os.environ):
      if name.startswith('SLURM') or name == 'TF_CONFIG':
        monkeypatch.delenv(name)
    for name, value in step_env(rank, **kwargs).items():
      monkeypatch.setenv(name, value)

  return enter


def _options(**kw):
  return slurm.ClusterOptions(**{'device': 'cpu', 'port_base': 7000, **kw})


# ---- which description makes the cluster -----------------------------------


@pytest.mark.parametrize(
  'resolver,flags,env,chosen',
  [
    ('auto', {}, step_env(0), 'slurm'),
    # Explicit classic flags win over the Slurm step.
    ('auto', {'worker_hosts': 'h:1'}, step_env(0), 'flags'),
    ('auto', {'job_name': 'worker'}, step_env(0), 'flags'),
    ('auto', {}, {**step_env(0), 'TF_CONFIG': '{}'}, 'tf_config'),
    # A one-task step (the sbatch script itself, srun -n1) is a local run.
    ('auto', {}, step_env(0, ntasks=1, per_node='1'), 'flags'),
    ('auto', {}, {}, 'flags'),
    ('slurm', {}, {}, 'slurm'),
    ('flags', {}, step_env(0), 'flags'),
  ],
)
def test_chosen_resolver(resolver, flags, env, chosen):
  options = slurm.ClusterOptions(resolver=resolver, **flags)
  assert slurm.chosen_resolver(options, env) == chosen


# ---- rank -> role ------------------------------------------------------------


@pytest.mark.parametrize(
  'rank,me',
  [(0, ('ps', 0)), (1, ('worker', 0)), (2, ('worker', 1))],
)
def test_rank_gives_role_and_ports_are_unique(in_step, rank, me):
  in_step(rank)
  cluster = slurm.resolve_cluster(_options(ps_tasks=1))
  assert cluster.me == me
  # Port = base + position in the cluster (ps first): unique although
  # both node names reach the same machine.
  assert cluster.spec_dict() == {
    'ps': ['127.0.0.1:7000'],
    'worker': ['127.0.0.1:7001', 'localhost:7002'],
  }


def test_without_ps_every_rank_is_a_worker(in_step):
  in_step(2)
  cluster = slurm.resolve_cluster(_options())
  assert cluster.me == ('worker', 2)
  assert cluster.num_ps == 0 and cluster.num_workers == 3


def test_tf_config_and_flags_are_not_read_as_slurm(in_step, monkeypatch):
  in_step(1)
  monkeypatch.setenv(
    'TF_CONFIG',
    json.dumps(
      {
        'cluster': {'worker': ['127.0.0.1:5000']},
        'task': {'type': 'worker', 'index': 0},
      }
    ),
  )
  assert slurm.resolve_cluster(_options()).worker_hosts == ('127.0.0.1:5000',)
  # --cluster_resolver=flags: neither TF_CONFIG nor Slurm; a local run.
  assert slurm.resolve_cluster(_options(resolver='flags')) is None
  assert slurm.resolve_cluster(_options(resolver='slurm')).num_workers == 3


def test_plan_under_slurm_names_the_cluster(in_step):
  in_step(1)
  plan = params_lib.make_plan(
    model='trivial',
    data_name='cifar10',
    device='cpu',
    variable_update='parameter_server',
    slurm_ps_tasks=1,
  )
  assert plan.cluster.me == ('worker', 0)
  assert plan.cluster.num_ps == 1


# ---- GPUs --------------------------------------------------------------------


@pytest.mark.parametrize(
  'visible,rank,expected',
  [
    ('0,1,2,3', 1, '2,3'),
    ('0,1,2,3', 2, '0,1'),
    # Slurm made GPUs 4-7 visible: the resolver's indices are mapped back.
    ('4,5,6,7', 1, '6,7'),
    ('4,5,6,7', 3, '6,7'),
  ],
)
def test_resolver_shares_the_node_gpus(
  in_step, monkeypatch, visible, rank, expected
):
  in_step(rank, ntasks=4, nodes='127.0.0.1,localhost', per_node='2(x2)')
  monkeypatch.setenv('CUDA_VISIBLE_DEVICES', visible)
  options = _options(device='gpu', num_gpus=2)
  slurm.bind_gpus(options)
  assert os.environ['CUDA_VISIBLE_DEVICES'] == expected
  # Resolved once a process: the narrowed list is not re-shared.
  slurm.resolve_cluster(options)
  assert os.environ['CUDA_VISIBLE_DEVICES'] == expected


def test_no_gpu_binding_on_cpu_or_when_slurm_binds(in_step, monkeypatch):
  in_step(1)
  monkeypatch.setenv('CUDA_VISIBLE_DEVICES', '3')
  slurm.resolve_cluster(_options(device='cpu'))
  slurm.resolve_cluster(
    _options(device='gpu', gpu_binding='slurm', port_base=7300)
  )
  assert os.environ['CUDA_VISIBLE_DEVICES'] == '3'


# ---- bad input -------------------------------------------------------------


@pytest.mark.parametrize(
  'rank,kwargs,options,needle',
  [
    (0, {}, dict(ps_tasks=3), '--slurm_ps_tasks=3: must be in 0..2'),
    (0, {}, dict(ps_tasks=-1), '--slurm_ps_tasks=-1'),
    (0, {}, dict(port_base=65534), '--slurm_port_base=65534'),
    (0, {}, dict(worker_hosts='h:1', resolver='slurm'), '--worker_hosts'),
    # SLURM_STEP_NUM_TASKS disagrees with the tasks per node.
    (0, dict(ntasks=4), {}, 'SLURM_STEP_NUM_TASKS=4'),
    (
      0,
      dict(nodes='n[1-2', per_node='2,1'),
      {},
      'SLURM_STEP_NODELIST=n[1-2',
    ),
    # Slurm puts ranks 0-1 on node9, the resolver (by name) on node10.
    (
      0,
      dict(nodes='node[9-10]', names=['node9', 'node10']),
      {},
      'SLURMD_NODENAME=node9',
    ),
    (
      1,
      {},
      dict(device='gpu', num_gpus=2),
      '--num_gpus=2',
    ),
  ],
)
def test_bad_slurm_input_is_one_line(
  in_step, monkeypatch, rank, kwargs, options, needle
):
  in_step(rank, **kwargs)
  monkeypatch.setenv('CUDA_VISIBLE_DEVICES', '0,1')  # 2 GPUs a node
  with pytest.raises(spec_lib.ClusterError) as e:
    slurm.resolve_cluster(_options(**options))
  assert needle in str(e.value)
  assert '\n' not in str(e.value)


@pytest.mark.parametrize('missing', slurm.STEP_VARIABLES)
def test_missing_step_variable_is_named(in_step, monkeypatch, missing):
  in_step(0)
  monkeypatch.delenv(missing)
  with pytest.raises(spec_lib.ClusterError, match='^%s: not set' % missing):
    slurm.resolve_cluster(_options(resolver='slurm'))


def test_bad_input_exits_2_with_one_line(tmp_path):
  env = dict(task_env(), **step_env(0))
  env['SLURM_STEP_NUM_TASKS'] = '2'
  proc = subprocess.run(
    [sys.executable, '-m', 'tf_cnn_benchmarks', *TRIVIAL_FLAGS]
    + ['--num_batches=1', '--slurm_ps_tasks=2'],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=120,
  )
  lines = [ln for ln in proc.stderr.splitlines() if ln]
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert len(lines) == 1 and '--slurm_ps_tasks=2' in lines[0], lines
  assert 'SLURM_STEP_NUM_TASKS=2' in lines[0]


# ---- a real step: ps + 2 workers on two "nodes" ------------------------------


def _free_port_run(count):
  """A base port with `count` free ports above it on 127.0.0.1."""
  for _ in range(50):
    probe = socket.socket()
    probe.bind(('127.0.0.1', 0))
    base = probe.getsockname()[1]
    probe.close()
    if base + count > 65535:
      continue
    sockets = []
    try:
      for port in range(base, base + count):
        s = socket.socket()
        s.bind(('127.0.0.1', port))
        sockets.append(s)
      return base
    except OSError:
      continue
    finally:
      for s in sockets:
        s.close()
  raise RuntimeError('no run of %d free ports' % count)


def _stub_scontrol(tmp_path):
  """A directory holding an `scontrol` that records each call."""
  bin_dir = tmp_path / 'bin'
  bin_dir.mkdir()
  stub = bin_dir / 'scontrol'
  stub.write_text(
    '#!/bin/sh\necho "$@" >> %s\n'
    'test "$1 $2" = "show hostnames" && echo 127.0.0.1 && echo localhost\n'
    % (tmp_path / 'scontrol_calls')
  )
  stub.chmod(0o755)
  return str(bin_dir)


def test_slurm_step_trains_and_exits_0(tmp_path):
  base = _free_port_run(3)
  result_file = tmp_path / 'r.jsonl'
  flags = TRIVIAL_FLAGS + [
    '--num_batches=3',
    '--variable_update=parameter_server',
    '--slurm_ps_tasks=1',
    '--slurm_port_base=%d' % base,
    '--result_file=%s' % result_file,
  ]
  path = _stub_scontrol(tmp_path) + os.pathsep + os.environ['PATH']
  procs = []
  for rank in range(3):
    env = dict(task_env(), **step_env(rank), PATH=path)
    # Each worker appends its own results line (tests.test_distributed).
    env['TEST_DISTRIBUTED_EVERY_WORKER_REPORTS'] = '1'
    procs.append(
      subprocess.Popen(
        [sys.executable, '-m', 'tests.test_distributed', *flags],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
      )
    )
  try:
    errors = [p.communicate(timeout=180)[1] for p in procs]
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
        p.wait()
  assert [p.returncode for p in procs] == [0, 0, 0], errors
  records = [json.loads(ln) for ln in result_file.read_text().splitlines()]
  tasks = sorted(
    (r['task']['job_name'], r['task']['task_index']) for r in records
  )
  assert tasks == [('worker', 0), ('worker', 1)]
  for r in records:
    assert r['status'] == 'ok'
    assert r['num_workers'] == 2
    assert r['params']['slurm_ps_tasks'] == 1
    assert r['params']['cluster_resolver'] == 'auto'
    assert len(r['losses']) == 3
  assert not (tmp_path / 'scontrol_calls').exists()


# ---- the shipped sbatch script ---------------------------------------------

SBATCH = os.path.join(ROOT, 'scripts', 'slurm', 'tf_cnn_benchmarks.sbatch')


def test_sbatch_script_parses_and_names_only_known_flags():
  import dataclasses  # pylint: disable=g-import-not-at-top
  import re  # pylint: disable=g-import-not-at-top

  subprocess.run(['bash', '-n', SBATCH], check=True)
  text = open(SBATCH).read()
  command = text[text.index('-m tf_cnn_benchmarks') :]
  named = re.findall(r'--([a-z0-9_]+)=', command)
  known = {f.name for f in dataclasses.fields(params_lib.Params)}
  assert 'cluster_resolver' in named and 'result_file' in named
  assert sorted(set(named) - known) == []
  assert 'srun ' in text and '#SBATCH --gres=gpu:' in text


def test_command_line_binds_gpus_before_tensorflow_lists_them(
  in_step, monkeypatch
):
  # Two tasks on one node with two GPUs: rank 1 gets the second.
  in_step(1, ntasks=2, nodes='127.0.0.1', per_node='2')
  monkeypatch.setenv('CUDA_VISIBLE_DEVICES', '0,1')
  from tf_cnn_benchmarks import __main__ as cli  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks.platform import quiet  # pylint: disable=g-import-not-at-top

  seen = []
  monkeypatch.setattr(
    quiet,
    'load_tensorflow',
    lambda: seen.append(os.environ['CUDA_VISIBLE_DEVICES']),
  )
  # No GPU on this machine: the run itself stops at --device=gpu (exit 2).
  status = cli.main(['prog', '--model=trivial', '--device=gpu', '--num_gpus=1'])
  assert status == 2
  assert seen == ['1']
