"""Failures and robustness (issue 17): real processes, real faults.

Each test runs the harness (or a script) as a process, causes the fault and
compares numbers: exit codes, thread counts, records in a results file.
"""

import os
import re
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCHER = os.path.join(ROOT, 'scripts', 'launch_local_cluster.py')
STEP_LINE = re.compile(r'^\[worker:0\] (\d+)\timages/sec')


def _env():
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONUNBUFFERED='1')
  env.pop('TF_CONFIG', None)
  return env


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


def _children(pid):
  try:
    with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
      return [int(p) for p in f.read().split()]
  except OSError:
    return []


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


def test_collective_workers_do_not_leak_threads():
  counts = worker_threads_at_steps('collective_all_reduce', (50, 300))
  _assert_flat(counts, 50, 300)


@pytest.mark.slow
@pytest.mark.parametrize('mode', ['collective_all_reduce', 'hybrid'])
def test_thread_count_flat_from_step_50_to_500(mode):
  counts = worker_threads_at_steps(mode, (50, 500))
  _assert_flat(counts, 50, 500)


# --- checkpoints (items 3, 7, 13) -------------------------------------------

TRIVIAL = [
  '--model=trivial',
  '--data_name=cifar10',
  '--device=cpu',
  '--batch_size=2',
  '--num_warmup_batches=0',
  '--display_every=100',
]


def cli(*flags, timeout=120):
  """(exit status, stderr lines) of `python -m tf_cnn_benchmarks flags`."""
  proc = subprocess.run(
    [sys.executable, '-m', 'tf_cnn_benchmarks', *flags],
    cwd=ROOT,
    env=_env(),
    capture_output=True,
    text=True,
    timeout=timeout,
  )
  return proc.returncode, [ln for ln in proc.stderr.splitlines() if ln]


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
  sys.path.insert(0, os.path.join(ROOT, 'scripts'))
  import launch_local_cluster  # pylint: disable=g-import-not-at-top

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


# --- results lines (items 11, 16) --------------------------------------------


def _strict_records(path):
  import json  # pylint: disable=g-import-not-at-top

  def refuse(constant):
    raise ValueError('non-JSON constant %s' % constant)

  return [
    json.loads(line, parse_constant=refuse)
    for line in path.read_text().splitlines()
  ]


def test_real_run_appends_on_a_new_line_and_writes_strict_json(tmp_path):
  result_file = tmp_path / 'r.jsonl'
  result_file.write_text('{"earlier": 1}')  # no final newline
  rc, err = cli(
    *TRIVIAL,
    '--num_batches=3',
    '--init_learning_rate=1e38',  # diverges: the losses become NaN/inf
    '--result_file=%s' % result_file,
  )
  assert rc == 0, err
  records = _strict_records(result_file)  # before: '{...}{...}', bare NaN
  assert len(records) == 2 and records[0] == {'earlier': 1}
  assert None in records[1]['losses']


# --- ranges and memory (items 8, 15) ----------------------------------------

BAD_VALUES = [
  dict(batch_size=100000000),  # before: SIGSEGV
  dict(batch_size=2000000),  # before: std::bad_alloc
  dict(batch_size=3000000000),  # before: int32 overflow traceback
  dict(batch_size=2**70),
  dict(tf_random_seed=2**70),
  dict(num_epochs=float('inf'), num_batches=None),
  dict(num_gpus=100000),  # before: built towers until killed
  dict(momentum=-5.0),
  dict(adam_beta1=2.0),
  dict(adam_epsilon=-1.0),
  dict(rmsprop_epsilon=-1.0),
  dict(rmsprop_decay=7.0),
  dict(init_learning_rate=float('inf')),
  dict(use_fp16=True, fp16_loss_scale=float('inf')),
  dict(init_learning_rate=0.1, learning_rate_decay_factor=-1.0),
  dict(init_learning_rate=0.1, num_epochs_per_decay=-1.0),
  dict(init_learning_rate=0.1, minimum_learning_rate=-1.0),
  dict(peak_tflops_per_device=-1.0),
  dict(peak_tflops_per_device=float('nan')),
  dict(num_intra_threads=-1),
  dict(hybrid_threshold_bytes=-1),
  dict(ps_partition_threshold_bytes=-1),
  dict(server_protocol='http'),
  dict(task_index=7),
  dict(result_file=''),
  dict(graph_file=''),
]


@pytest.mark.parametrize('bad', BAD_VALUES, ids=lambda d: ','.join(d))
def test_bad_values_are_refused_when_resolved(bad):
  from tf_cnn_benchmarks.config import params as params_lib  # pylint: disable=g-import-not-at-top

  flags = dict(model='trivial', data_name='cifar10', device='cpu')
  flags['num_batches'] = 1
  flags.update(bad)
  with pytest.raises(params_lib.ParamsError):
    params_lib.make_plan(**flags)


@pytest.mark.parametrize(
  'flag', ['--batch_size=100000000', '--num_gpus=100000']
)
def test_huge_values_are_one_line_exit_2(flag):
  rc, err = cli(*TRIVIAL, '--num_batches=1', flag)
  assert (rc, len(err)) == (2, 1), err


# --- output paths (item 6) ---------------------------------------------------


def _bad_outputs(tmp_path):
  a_file = tmp_path / 'file'
  a_file.write_text('x')
  return [
    ('result_file', str(tmp_path)),  # a directory
    ('result_file', str(tmp_path / 'new') + '/'),
    ('result_file', str(a_file / 'r.jsonl')),  # under a regular file
    ('result_file', '/dev/full'),
    ('train_dir', str(a_file)),
    ('train_dir', '/dev/null'),
    ('trace_file', str(a_file / 'trace.json')),
    ('graph_file', str(tmp_path)),
  ]


def test_bad_output_paths_are_refused_before_the_run(tmp_path):
  from tf_cnn_benchmarks.config import params as params_lib  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks.reporting import outputs  # pylint: disable=g-import-not-at-top

  refused = 0
  for flag, path in _bad_outputs(tmp_path):
    p = params_lib.make_params(
      model='trivial', data_name='cifar10', device='cpu', **{flag: path}
    )
    with pytest.raises(outputs.OutputError):
      outputs.check(p)
    refused += 1
  assert refused == len(_bad_outputs(tmp_path))


def test_result_file_that_is_a_directory_fails_before_training(tmp_path):
  # Before: trained all the steps, then a traceback (cli's timeout catches
  # a run that trains instead of refusing).
  rc, err = cli(
    *TRIVIAL, '--num_batches=100000000', '--result_file=%s' % tmp_path
  )
  assert (rc, len(err)) == (2, 1), err


def test_failed_final_write_is_one_line_and_keeps_the_file(tmp_path):
  import resource  # pylint: disable=g-import-not-at-top

  result_file = tmp_path / 'r.jsonl'
  kept = '{"earlier": 1}\n'
  result_file.write_text(kept)

  def file_size_limit():  # like a full disk: EFBIG past this size
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(kept), len(kept)))

  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'tf_cnn_benchmarks',
      *TRIVIAL,
      '--num_batches=2',
      '--result_file=%s' % result_file,
    ],
    cwd=ROOT,
    env=_env(),
    capture_output=True,
    text=True,
    timeout=120,
    preexec_fn=file_size_limit,
  )
  err = proc.stderr.splitlines()
  assert (proc.returncode, len(err)) == (2, 1), err
  assert result_file.read_text() == kept


# --- TF_CONFIG conventions (item 10) -----------------------------------------


def _tf_config(task_type, index, **cluster):
  import json  # pylint: disable=g-import-not-at-top

  return json.dumps(
    {'cluster': cluster, 'task': {'type': task_type, 'index': index}}
  )


def _resolve(tf_config):
  from tf_cnn_benchmarks.cluster import spec  # pylint: disable=g-import-not-at-top

  return spec.resolve(
    None, None, None, None, None, 'grpc', env={'TF_CONFIG': tf_config}
  )


def test_tf_config_chief_is_worker_0():
  hosts = dict(chief=['h:1'], worker=['h:2', 'h:3'], ps=['h:4'])
  chief = _resolve(_tf_config('chief', 0, **hosts))
  worker = _resolve(_tf_config('worker', 1, **hosts))
  # Before: the worker dropped the chief and saw a 2-worker cluster.
  assert (chief.me, chief.worker_hosts) == (
    ('worker', 0),
    ('h:1', 'h:2', 'h:3'),
  )
  assert (worker.me, worker.num_workers) == (('worker', 2), 3)


@pytest.mark.parametrize(
  'tf_config',
  [
    _tf_config('worker', 1.9, worker=['h:1', 'h:2']),  # before: index 1
    _tf_config('worker', True, worker=['h:1', 'h:2']),
    _tf_config('worker', 0, worker='h:1,h:2'),  # before: split into chars
    _tf_config('evaluator', 0, worker=['h:1']),
    _tf_config('worker', 0, worker=['h:1'], master=['h:2']),
  ],
)
def test_bad_tf_config_is_refused(tf_config):
  from tf_cnn_benchmarks.cluster import spec  # pylint: disable=g-import-not-at-top

  with pytest.raises(spec.ClusterError):
    _resolve(tf_config)


def test_bad_tf_config_is_one_line_exit_2():
  env = dict(_env(), TF_CONFIG=_tf_config('worker', 1.9, worker=['h:1', 'h:2']))
  proc = subprocess.run(
    [sys.executable, '-m', 'tf_cnn_benchmarks', *TRIVIAL],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=60,
  )
  assert (proc.returncode, len(proc.stderr.splitlines())) == (2, 1)


# --- TFRecord cut inside a record header (item 12) ---------------------------


def test_tfrecord_cut_inside_a_header_is_one_line_exit_2(tmp_path):
  sys.path.insert(0, os.path.join(ROOT, 'scripts'))
  import make_fake_data  # pylint: disable=g-import-not-at-top

  make_fake_data.write_imagenet(
    str(tmp_path),
    num_train=16,
    num_validation=2,
    num_shards=1,
    image_size=40,
    num_classes=1000,
    seed=1,
  )
  (shard,) = [p for p in tmp_path.iterdir() if p.name.startswith('train-')]
  data = shard.read_bytes()
  pos = 0
  for _ in range(8):  # skip 8 whole records
    pos += 12 + int.from_bytes(data[pos : pos + 8], 'little') + 4
  shard.write_bytes(data[: pos + 5])  # 5 of record 9's 12 header bytes
  rc, err = cli(
    '--model=trivial',
    '--data_name=imagenet',
    '--data_dir=%s' % tmp_path,
    '--device=cpu',
    '--batch_size=2',
    '--num_batches=1',
    '--num_warmup_batches=0',
  )
  # Before: exit 0, records 9..16 silently dropped.
  assert (rc, len(err)) == (2, 1), err


# --- quiet stderr (item 17) --------------------------------------------------


def test_port_in_use_is_one_line_exit_2():
  import socket  # pylint: disable=g-import-not-at-top

  with socket.socket() as taken:
    taken.bind(('0.0.0.0', 0))
    taken.listen()
    port = taken.getsockname()[1]
    rc, err = cli(
      *TRIVIAL,
      '--job_name=worker',
      '--task_index=0',
      '--worker_hosts=127.0.0.1:%d' % port,
      '--variable_update=collective_all_reduce',
    )
  # Before: TensorFlow's lines, the last naming neither port nor flag.
  assert (rc, len(err)) == (2, 1), err
  assert str(port) in err[0] and '--worker_hosts' in err[0]


@pytest.mark.slow
def test_lost_collective_peer_is_one_line():
  env = _env()
  env.pop('TF_CPP_MIN_LOG_LEVEL')  # the launcher's own default applies
  proc = subprocess.Popen(
    [
      sys.executable,
      LAUNCHER,
      '--num_workers=2',
      '--timeout=90',
      '--',
      *TRIVIAL,
      '--num_batches=100000000',
      '--display_every=1000',
      '--variable_update=collective_all_reduce',
    ],
    cwd=ROOT,
    env=env,
    stdout=subprocess.PIPE,
    text=True,
  )
  for line in proc.stdout:
    if 'images/sec' in line:  # training
      break
  for task in _children(proc.pid):
    with open('/proc/%d/cmdline' % task) as f:
      args = f.read().split('\0')
    if '--job_name=worker' in args and '--task_index=1' in args:
      os.kill(task, 9)
  rest = proc.stdout.read()
  proc.wait(timeout=120)
  said = [
    line
    for line in rest.splitlines()
    if line.startswith('[worker:0]') and 'images/sec' not in line
  ]
  # Before: 31 lines of TensorFlow's "Aborting RingReduce" and gRPC errors.
  assert (proc.returncode, len(said)) == (1, 1), said


@pytest.mark.parametrize(
  'script, argv',
  [
    ('all_reduce_benchmark.py', ['--help']),
    (
      'all_reduce_benchmark.py',
      [
        '--sizes=1K',
        '--devices=2',
        '--iters=1',
        '--warmup=1',
        '--algorithms=copy',
      ],
    ),
    ('make_fake_data.py', ['--help']),
    ('launch_local_cluster.py', ['--help']),
    ('sweep.py', ['--help']),
    ('compare.py', ['--help']),
    ('plot.py', ['--help']),
    ('cluster_overhead.py', ['--help']),
  ],
)
def test_scripts_keep_tensorflow_start_up_lines_off_stderr(script, argv):
  env = dict(os.environ)
  env.pop('TF_CPP_MIN_LOG_LEVEL', None)  # as a user runs it
  proc = subprocess.run(
    [sys.executable, os.path.join(ROOT, 'scripts', script), *argv],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert proc.returncode == 0, proc.stderr
  assert proc.stderr == ''
  if argv == ['--help']:
    assert not _imports_tensorflow(script, argv, env)


def _imports_tensorflow(script, argv, env):
  """Whether running `script argv` loads TensorFlow (asked of the process
  itself, not timed: a loaded machine makes any time bound flaky)."""
  probe = (
    'import runpy, sys\n'
    'sys.argv = %r\n'
    'sys.path.insert(0, %r)\n'
    'try:\n'
    '  runpy.run_path(sys.argv[0], run_name="__main__")\n'
    'except SystemExit:\n'
    '  pass\n'
    'sys.stderr.write(str("tensorflow" in sys.modules))\n'
  ) % (
    [os.path.join(ROOT, 'scripts', script), *argv],
    os.path.join(ROOT, 'scripts'),
  )
  proc = subprocess.run(
    [sys.executable, '-c', probe],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert proc.stderr in ('True', 'False'), proc.stderr
  return proc.stderr == 'True'


def _imagenet_with_a_corrupt_jpeg(data_dir, corrupt):
  """Fake ImageNet TFRecords; record 1 of the second train shard's JPEG is
  replaced by corrupt(jpeg bytes) (the record itself stays well-formed)."""
  sys.path.insert(0, os.path.join(ROOT, 'scripts'))
  import make_fake_data  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  make_fake_data.write_imagenet(
    str(data_dir), num_train=8, num_validation=4, num_shards=2, image_size=32
  )
  shard = str(data_dir / 'train-00001-of-00002')
  raw, records, pos = open(shard, 'rb').read(), [], 0
  while pos < len(raw):  # the TFRecord framing: length, crc, data, crc
    length = int.from_bytes(raw[pos : pos + 8], 'little')
    records.append(raw[pos + 12 : pos + 12 + length])
    pos += 12 + length + 4
  example = tf.train.Example.FromString(records[1])
  encoded = example.features.feature['image/encoded'].bytes_list.value
  encoded[0] = corrupt(encoded[0])
  records[1] = example.SerializeToString()
  with tf.io.TFRecordWriter(shard) as writer:
    for record in records:
      writer.write(record)
  return shard


@pytest.mark.parametrize(
  'corrupt',
  [
    lambda b: b[: len(b) // 2],  # libjpeg: "Improper call ... state 201"
    lambda b: b[: len(b) // 2] + b'\xff\xd9',  # "Corrupt JPEG data: ..."
  ],
  ids=['truncated', 'cut_with_end_marker'],
)
def test_undecodable_jpeg_is_exactly_one_stderr_line(tmp_path, corrupt):
  shard = _imagenet_with_a_corrupt_jpeg(tmp_path, corrupt)
  env = _env()
  env.pop('TF_CPP_MIN_LOG_LEVEL')  # as a user runs it
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'tf_cnn_benchmarks',
      '--model=trivial',
      '--device=cpu',
      '--batch_size=2',
      '--num_batches=20',
      '--num_warmup_batches=0',
      '--data_dir=%s' % tmp_path,
    ],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=120,
  )
  # Before: libjpeg's own lines (4 to 8 of them) before ours.
  lines = proc.stderr.splitlines()
  assert (proc.returncode, len(lines)) == (2, 1), lines
  assert shard in lines[0] and 'record 1' in lines[0]


def test_good_imagenet_run_prints_nothing_on_stderr(tmp_path):
  _imagenet_with_a_corrupt_jpeg(tmp_path, lambda b: b)  # nothing corrupt
  env = _env()
  env.pop('TF_CPP_MIN_LOG_LEVEL')
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'tf_cnn_benchmarks',
      '--model=trivial',
      '--device=cpu',
      '--batch_size=2',
      '--num_batches=4',
      '--num_warmup_batches=0',
      '--data_dir=%s' % tmp_path,
    ],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert (proc.returncode, proc.stderr) == (0, '')


_FILTERED_WRITER = r"""
import os, signal, sys
sys.path.insert(0, %r)
from tf_cnn_benchmarks.platform import quiet
os.write(2, b'before\n')
with quiet.libjpeg_lines_dropped():
  os.write(2, b'Corrupt JPEG data: 12 extraneous bytes before marker 0xd9\n')
  os.write(2, b'kept: Input file read error\nInput file read error\n')
  sys.stderr.write('from python\n')
  os.write(2, b'Improper call to JPEG library in state 201\nno newline')
  if sys.argv[1] == 'die':
    os.kill(os.getpid(), signal.SIGKILL)
os.write(2, b'\nafter\n')
"""


@pytest.mark.parametrize('end', ['exit', 'die'])
def test_libjpeg_filter_passes_everything_else_unchanged(end):
  proc = subprocess.run(
    [sys.executable, '-c', _FILTERED_WRITER % ROOT, end],
    capture_output=True,
    timeout=60,
  )
  kept = b'before\nkept: Input file read error\nfrom python\nno newline'
  if end == 'exit':
    assert (proc.returncode, proc.stderr) == (0, kept + b'\nafter\n')
  else:  # SIGKILLed inside: what it wrote last still arrives (the filter
    # outlives it; run() reads stderr to its end, the filter's exit)
    assert (proc.returncode, proc.stderr) == (-9, kept)
