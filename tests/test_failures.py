"""Failures and robustness (issue 17): real processes, real faults.

Each test runs the harness (or a script) as a process, causes the fault and
compares numbers: exit codes, thread counts, records in a results file.
This file: threads, checkpoints, peers, servers, a killed sweep, Ctrl-C and
tasks that disagree; the one-line failures of values, outputs, TF_CONFIG,
input data and stderr are in test_one_line_failures.py.
"""

import os
import re
import subprocess
import sys
import time

import pytest

from tests.helpers import LAUNCHER
from tests.helpers import ROOT
from tests.helpers import TRIVIAL_FLAGS as TRIVIAL
from tests.helpers import children as _children
from tests.helpers import cli_status as cli
from tests.helpers import task_env as _env

STEP_LINE = re.compile(r'^\[worker:0\] (\d+)\timages/sec')


def _threads(pid):
  """Threads: of /proc/<pid>/status, or None once the process is gone."""
  try:
    with open('/proc/%d/status' % pid) as f:
      for line in f:
        if line.startswith('Threads:'):
          return int(line.split()[1])
  except OSError:
    return None
  return None


def worker_threads_at_steps(mode, steps, timeout=180):
  """{step: max thread count over the tasks} of a 2-worker trivial run."""
  last = max(steps)
  argv = [
    sys.executable,
    LAUNCHER,
    '--num_workers=2',
    '--timeout=%d' % (timeout - 20),
    '--',
    '--device=cpu',
    '--model=trivial',
    '--data_name=cifar10',
    '--batch_size=8',
    '--num_batches=%d' % (last + 50),
    '--num_warmup_batches=0',
    '--display_every=50',
    '--variable_update=' + mode,
  ]
  proc = subprocess.Popen(
    argv,
    cwd=ROOT,
    env=_env(),
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
  )
  counts = {}
  try:
    for line in proc.stdout:
      match = STEP_LINE.match(line)
      if match and int(match.group(1)) in steps:
        tasks = _children(proc.pid)
        counts[int(match.group(1))] = max(_threads(p) or 0 for p in tasks)
    rc = proc.wait(timeout=timeout)
  finally:
    if proc.poll() is None:
      proc.kill()
  assert rc == 0
  return counts


def _assert_flat(counts, low, high):
  assert counts[low] > 0
  # A leak of one thread per step would add hundreds by `high`.
  assert abs(counts[high] - counts[low]) <= 0.1 * counts[low], counts


@pytest.mark.slow  # default-suite budget (20 min); runs with -m slow
def test_collective_workers_do_not_leak_threads():
  counts = worker_threads_at_steps('collective_all_reduce', (50, 300))
  _assert_flat(counts, 50, 300)


@pytest.mark.slow
@pytest.mark.parametrize('mode', ['collective_all_reduce', 'hybrid'])
def test_thread_count_flat_from_step_50_to_500(mode):
  counts = worker_threads_at_steps(mode, (50, 500))
  _assert_flat(counts, 50, 500)


# --- checkpoints (items 3, 7, 13) -------------------------------------------


def _files(train_dir, suffix):
  return sorted(f for f in os.listdir(train_dir) if f.endswith(suffix))


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """A train_dir with the checkpoints of steps 2 and 4."""
  train_dir = tmp_path_factory.mktemp('trained')
  rc, err = cli(
    *TRIVIAL,
    '--num_batches=4',
    '--save_model_steps=2',
    '--train_dir=%s' % train_dir,
  )
  assert rc == 0, err
  return train_dir


def _copy(src, dst):
  import shutil  # pylint: disable=g-import-not-at-top

  shutil.copytree(src, dst)
  return dst


def _snapshot(train_dir):
  return {
    f: os.path.getsize(os.path.join(train_dir, f))
    for f in os.listdir(train_dir)
  }


def _data_file(train_dir, step):
  (name,) = [
    f
    for f in os.listdir(train_dir)
    if f.startswith('model.ckpt-%d.data' % step)
  ]
  return os.path.join(train_dir, name)


def _state_naming(train_dir, step):
  (train_dir / 'checkpoint').write_text(
    'model_checkpoint_path: "model.ckpt-%d"\n' % step
  )


@pytest.mark.parametrize(
  'mode,damage',
  [
    ('train', 'missing_target'),
    ('train', 'binary_state'),
    ('train', 'flipped_data'),
    ('eval', 'truncated_data'),
    *[
      pytest.param(mode, damage, marks=pytest.mark.slow)
      for mode, damage in [
        ('train', 'empty_state'),
        ('train', 'truncated_data'),
        ('train', 'missing_data'),
        ('train', 'no_state_file'),
        ('eval', 'missing_target'),
        ('eval', 'flipped_data'),
        ('eval', 'missing_data'),
      ]
    ],
  ],
)
def test_unusable_checkpoint_is_one_line_exit_2_and_nothing_written(
  trained, tmp_path, damage, mode
):
  train_dir = _copy(trained, tmp_path / 'train')
  data = _data_file(train_dir, 4)
  if damage == 'missing_target':
    _state_naming(train_dir, 9)
  elif damage == 'empty_state':
    (train_dir / 'checkpoint').write_text('')
  elif damage == 'binary_state':
    (train_dir / 'checkpoint').write_bytes(bytes(range(256)))
  elif damage == 'truncated_data':
    os.truncate(data, os.path.getsize(data) // 2)
  elif damage == 'flipped_data':
    with open(data, 'r+b') as f:
      f.seek(os.path.getsize(data) // 2)
      byte = f.read(1)
      f.seek(-1, os.SEEK_CUR)
      f.write(bytes([byte[0] ^ 0xFF]))
  elif damage == 'missing_data':
    os.remove(data)
  elif damage == 'no_state_file':
    os.remove(train_dir / 'checkpoint')
  before = _snapshot(train_dir)
  flags = ['--eval'] if mode == 'eval' else ['--num_batches=2']
  rc, err = cli(*TRIVIAL, *flags, '--train_dir=%s' % train_dir)
  assert (rc, len(err)) == (2, 1), err
  assert _snapshot(train_dir) == before


def test_max_ckpts_to_keep_counts_checkpoints_of_earlier_runs(tmp_path):
  train_dir = tmp_path / 'train'
  for _ in range(2):  # each run trains 3 more steps
    rc, err = cli(
      *TRIVIAL,
      '--num_batches=3',
      '--save_model_steps=1',
      '--max_ckpts_to_keep=2',
      '--train_dir=%s' % train_dir,
    )
    assert rc == 0, err
  assert _files(train_dir, '.index') == [
    'model.ckpt-5.index',
    'model.ckpt-6.index',
  ]  # before: the newest 2 of every run, 4 in all


@pytest.mark.slow
def test_fp16_vars_checkpoint_resumed_without_them_is_refused(tmp_path):
  train_dir = tmp_path / 'train'
  rc, err = cli(
    *TRIVIAL,
    '--num_batches=2',
    '--use_fp16',
    '--fp16_vars',
    '--train_dir=%s' % train_dir,
  )
  assert rc == 0, err
  before = _snapshot(train_dir)
  rc, err = cli(*TRIVIAL, '--num_batches=2', '--train_dir=%s' % train_dir)
  assert (rc, len(err)) == (2, 1), err
  assert _snapshot(train_dir) == before


# --- peers (item 2) ----------------------------------------------------------


def _free_port():
  import socket  # pylint: disable=g-import-not-at-top

  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


@pytest.mark.slow
def test_worker_whose_ps_never_comes_up_exits_within_the_grace():
  from tf_cnn_benchmarks.cluster import watchdog  # pylint: disable=g-import-not-at-top

  start = time.monotonic()
  rc, err = cli(
    *TRIVIAL,
    '--num_batches=2',
    '--job_name=worker',
    '--task_index=0',
    '--worker_hosts=127.0.0.1:%d' % _free_port(),
    '--ps_hosts=127.0.0.1:%d' % _free_port(),
    timeout=watchdog.START_GRACE_S + 60,
  )
  took = time.monotonic() - start
  assert (rc, len(err)) == (watchdog.LOST_PEER_STATUS, 1), err
  # Before: killed after 590 s, still waiting.
  assert took < watchdog.START_GRACE_S + 30


# --- servers reachable from outside (item 5) ---------------------------------


def _external_address():
  """A non-loopback IPv4 address of this machine, or None."""
  import socket  # pylint: disable=g-import-not-at-top

  try:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
      s.connect(('192.0.2.1', 9))  # no packet is sent for UDP connect
      address = s.getsockname()[0]
  except OSError:
    return None
  return None if address.startswith('127.') else address


def _connects(host, port):
  import socket  # pylint: disable=g-import-not-at-top

  try:
    with socket.create_connection((host, port), timeout=1.0):
      return True
  except OSError:
    return False


def _task_ports(launcher_pid):
  """Ports in the --worker_hosts of the launcher's task processes."""
  for child in _children(launcher_pid):
    try:
      with open('/proc/%d/cmdline' % child) as f:
        args = f.read().split('\0')
    except OSError:
      continue
    for arg in args:
      if arg.startswith('--worker_hosts='):
        return [int(h.rsplit(':', 1)[1]) for h in arg.split('=')[1].split(',')]
  return []


@pytest.mark.parametrize(
  'private', [True, pytest.param(False, marks=pytest.mark.slow)]
)
def test_launcher_servers_reachable_only_inside(private):
  external = _external_address()
  if external is None:
    pytest.skip('this machine has no non-loopback IPv4 address')
  from tf_cnn_benchmarks.commands import launch_local_cluster  # pylint: disable=g-import-not-at-top

  if private and not launch_local_cluster.private_network_works():
    pytest.skip('unshare -rn does not work here')
  argv = [
    sys.executable,
    LAUNCHER,
    '--num_workers=2',
    '--timeout=100',
    '--private_network' if private else '--no-private_network',
    '--',
    *TRIVIAL,
    '--num_batches=100000',
    '--variable_update=collective_all_reduce',
  ]
  proc = subprocess.Popen(
    argv, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, text=True
  )
  try:
    for line in proc.stdout:
      if 'images/sec' in line:  # the tasks are talking
        break
    ports = _task_ports(proc.pid)
    seen = {
      h: [_connects(h, p) for p in ports] for h in (external, '127.0.0.1')
    }
  finally:
    tasks = _children(proc.pid)
    proc.kill()
    proc.wait()
    for task in tasks:
      os.kill(task, 9)
  assert ports
  if private:
    # Trained over 127.0.0.1 inside; nothing outside the namespace connects.
    assert seen == {external: [False] * 2, '127.0.0.1': [False] * 2}
  else:
    # What TensorFlow does without the namespace: every interface listens.
    assert seen == {external: [True] * 2, '127.0.0.1': [True] * 2}


# --- sweep killed (item 4) ---------------------------------------------------


def _alive(pid):
  try:
    with open('/proc/%d/stat' % pid) as f:
      return f.read().split(')')[-1].split()[0] != 'Z'
  except OSError:
    return False


def test_sigkilled_sweep_leaves_no_orphan_and_resumes_once(tmp_path):
  import json  # pylint: disable=g-import-not-at-top

  env = _env()
  env['PYTHONPATH'] = os.path.join(ROOT, 'tests', 'fixtures')
  env['FAKE_BENCH_COUNTER'] = str(tmp_path / 'counter.txt')
  command = [
    sys.executable,
    'scripts/sweep.py',
    '--name=demo',
    '--results_dir=%s' % (tmp_path / 'results'),
    '--module=fake_benchmark',
    '--axis',
    'num_gpus=1,2',
    '--fixed',
    'model=trivial',
  ]
  sweep = subprocess.Popen(
    command,
    cwd=ROOT,
    env=dict(env, FAKE_BENCH_HANG='num_gpus=2'),
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
  )
  deadline = time.monotonic() + 60
  point = None
  while point is None and time.monotonic() < deadline:
    counter = tmp_path / 'counter.txt'
    if counter.exists() and 'num_gpus=2' in counter.read_text():
      point = _children(sweep.pid)[0]
    time.sleep(0.1)
  assert point is not None
  sweep.kill()
  sweep.wait()
  time.sleep(1.0)
  orphaned = _alive(point)
  if orphaned:
    os.kill(point, 9)
  assert not orphaned  # before: the point kept running in its own session
  rerun = subprocess.run(command, cwd=ROOT, env=env, capture_output=True)
  assert rerun.returncode == 0
  lines = (tmp_path / 'results' / 'demo.jsonl').read_text().splitlines()
  ids = sorted(json.loads(line)['sweep']['point_id'] for line in lines)
  assert ids == ['num_gpus=1', 'num_gpus=2']


# --- Ctrl-C (item 14) --------------------------------------------------------


def test_ctrl_c_is_one_line_exit_130(tmp_path):
  import signal  # pylint: disable=g-import-not-at-top

  proc = subprocess.Popen(
    [
      sys.executable,
      '-m',
      'tf_cnn_benchmarks',
      *TRIVIAL,
      '--num_batches=1000000',
      '--display_every=1000',
    ],
    cwd=ROOT,
    env=_env(),
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    # As a terminal's Ctrl-C finds it: a test run started in the background
    # (`cmd &` without job control, nohup) inherits SIGINT ignored, and a
    # Python started so keeps ignoring it (no KeyboardInterrupt at all).
    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
  )
  for line in proc.stdout:
    if 'images/sec' in line:  # training
      break
  proc.send_signal(signal.SIGINT)
  _, err = proc.communicate(timeout=60)
  assert (proc.returncode, len(err.splitlines())) == (130, 1), err[-2000:]


# --- tasks with different run flags (item 9) ---------------------------------


def _start_tasks(per_task_flags, hosts):
  procs = []
  for index, extra in enumerate(per_task_flags):
    procs.append(
      subprocess.Popen(
        [
          sys.executable,
          '-m',
          'tf_cnn_benchmarks',
          *TRIVIAL,
          '--num_batches=20',
          '--variable_update=collective_all_reduce',
          '--job_name=worker',
          '--task_index=%d' % index,
          '--worker_hosts=' + ','.join(hosts),
          *extra,
        ],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
      )
    )
  out = []
  for proc in procs:
    _, err = proc.communicate(timeout=150)
    out.append((proc.returncode, err.splitlines()))
  return out


@pytest.mark.parametrize(
  'flag,values',
  [
    ('batch_size', ('2', '3')),
    pytest.param('model', ('trivial', 'resnet20'), marks=pytest.mark.slow),
  ],
)
def test_tasks_with_different_run_flags_refuse_to_start(flag, values):
  hosts = ['127.0.0.1:%d' % _free_port() for _ in range(2)]
  out = _start_tasks([['--%s=%s' % (flag, v)] for v in values], hosts)
  # Before: exit 0 with a wrong global_batch_size (batch_size), or a failure
  # after a minute that did not name the flag (model).
  assert [rc for rc, _ in out] == [2, 2], out
  assert [len(err) for _, err in out] == [1, 1], out
