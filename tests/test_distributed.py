"""Multi-worker runs: real task processes on 127.0.0.1 (launcher, TF_CONFIG).

Run as a module (`python -m tests.test_distributed <benchmark flags>`), this
file is a cluster task that knows the test models: the tests start their
tasks that way so test_linear exists in every process.
"""

import io
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.helpers import LAUNCHER
from tests.helpers import LINEAR_ON_CPU
from tests.helpers import task_env as _env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASK_MODULE = 'tests.test_distributed'
EVERY_WORKER_REPORTS = 'TEST_DISTRIBUTED_EVERY_WORKER_REPORTS'
# Two workers x one tower x B must train like one local tower x 2B.
B = 4
STEPS = dict(num_batches=3, num_warmup_batches=1)
LINEAR = [
  '--model=test_linear',
  '--data_name=cifar10',
  '--device=cpu',
  '--batch_size=%d' % B,
  '--num_batches=3',
  '--num_warmup_batches=1',
  '--display_every=1',
  '--optimizer=sgd',
]


def launch(
  tmp_path,
  num_workers,
  flags,
  *,
  launcher_flags=(),
  timeout=240,
  every_worker_reports=False,
):
  """Runs the launcher with this module as the task; (rc, output, records).

  every_worker_reports: every worker appends its own results line (normally
  only worker 0 does), so the test sees each worker's exact losses.
  """
  result_file = tmp_path / 'r.jsonl'
  argv = [
    sys.executable,
    LAUNCHER,
    '--num_workers=%d' % num_workers,
    '--timeout=%d' % (timeout - 20),
    '--module=' + TASK_MODULE,
    *launcher_flags,
    '--',
    '--result_file=%s' % result_file,
  ] + list(flags)
  env = _env()
  if every_worker_reports:
    env[EVERY_WORKER_REPORTS] = '1'
  proc = subprocess.run(
    argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
  )
  records = (
    [json.loads(line) for line in result_file.read_text().splitlines()]
    if result_file.exists()
    else []
  )
  return proc.returncode, proc.stdout + proc.stderr, records


def launch_ok(tmp_path, num_workers, flags, **kwargs):
  """(output, records) of a launch (see launch) that must exit 0."""
  rc, out, records = launch(tmp_path, num_workers, flags, **kwargs)
  assert rc == 0, out[-3000:]
  return out, records


def local_losses(**kw):
  """Losses of the same model run locally (one tower x 2B)."""
  from tests import testing_models
  from tf_cnn_benchmarks import benchmark_cnn
  from tf_cnn_benchmarks.config import params as params_lib

  testing_models.ensure_registered()
  p = params_lib.make_params(
    **{
      **LINEAR_ON_CPU,
      'optimizer': 'sgd',
      'display_every': 100,
      **STEPS,
      **kw,
    }
  )
  return np.array(benchmark_cnn.run_benchmark(p, out=io.StringIO()).losses)


def worker_losses(records, num_workers):
  """Each worker's per-step losses, from its own results line."""
  by_task = {
    r['task']['task_index']: r.get('worker_losses') or r['losses']
    for r in records
    if r['task']['job_name'] == 'worker'
  }
  assert sorted(by_task) == list(range(num_workers)), by_task
  return [np.array(by_task[w]) for w in range(num_workers)]


# The launcher flags of each cluster manager's tasks.
TASKS = {
  'parameter_server': ['--num_ps=1', '--no-controller'],
  'distributed_replicated': ['--num_ps=1', '--no-controller'],
  'collective_all_reduce': ['--num_ps=0', '--no-controller'],
  'distributed_all_reduce': ['--num_ps=0', '--controller'],
  'hybrid': ['--num_ps=1', '--no-controller'],
}


def cluster_mode(variable_update, *extra, launcher_flags=None):
  """(variable_update, launcher flags, extra benchmark flags) of a test
  parametrized over cluster managers (launcher flags: TASKS by default)."""
  return (variable_update, launcher_flags or TASKS[variable_update], [*extra])


MODES = [
  # Two ps tasks; test_linear's weights (480 bytes) split over both.
  cluster_mode(
    'parameter_server',
    '--ps_partition_threshold_bytes=100',
    launcher_flags=['--num_ps=2', '--no-controller'],
  ),
  # The towers read each variable from the ps (not packed: one RPC each).
  cluster_mode('parameter_server', '--nopack_ps_transfers'),
  cluster_mode('distributed_replicated'),
  cluster_mode('collective_all_reduce'),
  cluster_mode('distributed_all_reduce', '--all_reduce_spec=xring/pscpu'),
  # hybrid, weights (480 B) on the ps and biases all-reduced; and with
  # nothing over the threshold (every variable all-reduced, the ps holding
  # no variable: this once aborted the first step).
  cluster_mode('hybrid', '--hybrid_threshold_bytes=100'),
  cluster_mode('hybrid', '--hybrid_threshold_bytes=1000000'),
]


def test_modes_cover_every_cluster_manager():
  """The managers come from the registry: a new cluster manager fails here
  until MODES runs it (with the launcher flags it needs)."""
  import variable_mgr  # pylint: disable=g-import-not-at-top

  assert sorted({m[0] for m in MODES}) == variable_mgr.cluster_names()


# Variants of a manager run in the slow suite only (the default suite keeps
# one run of every manager, two ps tasks and hybrid's split).
SLOW_MODES = {
  'parameter_server --nopack_ps_transfers',
  'hybrid --hybrid_threshold_bytes=1000000',
}


def _mode_params(modes, slow=frozenset(), name=None):
  """pytest.params of `modes`, ids from `name(mode)`, slow where listed."""
  name = name or (lambda m: ' '.join([m[0]] + m[2]))
  return [
    pytest.param(
      *m, id=name(m), marks=[pytest.mark.slow] if name(m) in slow else []
    )
    for m in modes
  ]


@pytest.mark.parametrize(
  'mode,launcher_flags,extra', _mode_params(MODES, SLOW_MODES)
)
def test_two_workers_train_like_one_tower_double_batch(
  tmp_path, mode, launcher_flags, extra
):
  one_graph = mode == 'distributed_all_reduce'
  out, records = launch_ok(
    tmp_path,
    2,
    LINEAR + ['--variable_update=' + mode] + extra,
    launcher_flags=launcher_flags,
    every_worker_reports=not one_graph,
  )
  assert len(records) == (1 if one_graph else 2), out[-2000:]
  record = records[0]
  assert record['num_workers'] == 2
  assert record['global_batch_size'] == 2 * B
  assert record['task']['job_name'] in ('worker', 'controller')
  assert record['images_per_sec_per_worker'] == pytest.approx(
    record['images_per_sec'] / 2
  )
  expected = local_losses(batch_size=2 * B)
  if one_graph:  # the controller's loss is the cluster's
    assert record['task'] == {'job_name': 'controller', 'task_index': 0}
    np.testing.assert_allclose(record['losses'], expected, rtol=1e-4)
  else:
    per_worker = worker_losses(records, 2)
    np.testing.assert_allclose(
      (per_worker[0] + per_worker[1]) / 2, expected, rtol=1e-4
    )
  assert 'Cluster:' in out
  assert (
    'this task: controller:0' if one_graph else 'this task: worker:1'
  ) in out


def test_hybrid_trains_and_exits(tmp_path):
  # 100 bytes: test_linear's weights (480 B) go to the ps, biases all-reduce.
  out, records = launch_ok(
    tmp_path,
    2,
    LINEAR + ['--variable_update=hybrid', '--hybrid_threshold_bytes=100'],
    launcher_flags=['--num_ps=1', '--no-controller'],
  )
  assert len(records) == 1, out[-2000:]  # one line per run: worker 0's
  assert records[0]['task'] == {'job_name': 'worker', 'task_index': 0}
  assert 'ps:0: all clients done' in out
  # Worker 0's losses only: its half of the global batch, same variables.
  assert len(records[0]['losses']) == 4


# Two towers per worker: every tower is a member of hybrid's collective
# minimum (the clip's ps-group norm, the loss scale's verdict); a tower whose
# member never ran left its peers waiting for good (issue 29, item 16).
HYBRID_TWO_TOWERS = LINEAR + [
  '--variable_update=hybrid',
  '--hybrid_threshold_bytes=100',
  '--num_gpus=2',
]
# Under the launcher's limit a deadlock fails the test instead of hanging.
DEADLOCK_TIMEOUT = 120


def test_hybrid_two_towers_per_worker_clip_like_one_tower(tmp_path):
  """2 workers x 2 towers x B, clipped, train like 1 local tower x 4B."""
  clip = 0.05
  _, records = launch_ok(
    tmp_path,
    2,
    HYBRID_TWO_TOWERS + ['--gradient_clip_norm=%g' % clip],
    launcher_flags=TASKS['hybrid'],
    every_worker_reports=True,
    timeout=DEADLOCK_TIMEOUT,
  )
  cluster = sum(worker_losses(records, 2)) / 2
  expected = local_losses(batch_size=4 * B, gradient_clip_norm=clip)
  np.testing.assert_allclose(cluster, expected, rtol=1e-4)
  # The clip bites: unclipped, the losses differ.
  unclipped = local_losses(batch_size=4 * B)
  assert np.max(np.abs(unclipped - expected) / expected) > 1e-3


@pytest.mark.slow
def test_hybrid_two_towers_per_worker_auto_loss_scale(tmp_path):
  """fp16, automatic loss scale from 1e12: both workers skip the same
  steps, then train (the verdict is a collective minimum of every tower)."""
  flags = [f for f in HYBRID_TWO_TOWERS if not f.startswith('--num_batches')]
  _, records = launch_ok(
    tmp_path,
    2,
    flags
    + [
      '--num_batches=50',
      '--use_fp16',
      '--fp16_enable_auto_loss_scale',
      '--fp16_loss_scale=1e12',
      '--init_learning_rate=0.1',
      '--gradient_clip_norm=1.0',
    ],
    launcher_flags=TASKS['hybrid'],
    every_worker_reports=True,
    timeout=DEADLOCK_TIMEOUT,
  )
  assert len(records) == 2
  skipped = records[0]['skipped_steps']
  assert 0 < skipped < 40
  for record in records:
    assert record['skipped_steps'] == skipped
    assert record['loss_scale'] == pytest.approx(1e12 / 2**skipped)
    losses = np.array(record['losses'])
    assert np.all(np.isfinite(losses))
    assert np.all(losses[:skipped] == losses[0])  # skipped: nothing moved
    assert losses[-1] < losses[0]


@pytest.mark.slow
def test_async_parameter_server_runs(tmp_path):
  out, records = launch_ok(
    tmp_path,
    2,
    LINEAR + ['--variable_update=parameter_server', '--nocross_replica_sync'],
    launcher_flags=['--num_ps=1'],
  )
  assert 'async' in out and len(records) == 1


def test_parameter_server_two_towers_per_worker_read_one_packed_copy(
  tmp_path,
):
  # Both towers of a worker read the worker's one packed copy of the
  # variables: 2 workers x 2 towers x B train like one local tower x 4B.
  out, records = launch_ok(
    tmp_path,
    2,
    LINEAR + ['--variable_update=parameter_server', '--num_gpus=2'],
    launcher_flags=['--num_ps=1', '--no-controller'],
    every_worker_reports=True,
  )
  per_worker = worker_losses(records, 2)
  np.testing.assert_allclose(
    (per_worker[0] + per_worker[1]) / 2,
    local_losses(batch_size=4 * B),
    rtol=1e-4,
  )


@pytest.mark.slow
def test_lenet_collective_two_towers_per_worker(tmp_path):
  out, _ = launch_ok(
    tmp_path,
    2,
    [
      '--model=lenet',
      '--device=cpu',
      '--num_gpus=2',
      '--batch_size=4',
      '--num_batches=2',
      '--num_warmup_batches=1',
      '--variable_update=collective_all_reduce',
    ],
    launcher_flags=['--num_ps=0'],
  )


def _free_ports(n):
  from tf_cnn_benchmarks.commands import launch_local_cluster  # pylint: disable=g-import-not-at-top

  return launch_local_cluster.free_ports(n)


def test_tf_config_alone_starts_a_worker(tmp_path):
  # One worker, two towers, collective: the cluster comes from TF_CONFIG only.
  (port,) = _free_ports(1)
  env = _env()
  env['TF_CONFIG'] = json.dumps(
    {
      'cluster': {'worker': ['127.0.0.1:%d' % port]},
      'task': {'type': 'worker', 'index': 0},
    }
  )
  result_file = tmp_path / 'r.jsonl'
  proc = subprocess.run(
    [sys.executable, '-m', TASK_MODULE]
    + LINEAR
    + [
      '--variable_update=collective_all_reduce',
      '--num_gpus=2',
      '--result_file=%s' % result_file,
    ],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
  record = json.loads(result_file.read_text())
  assert record['task'] == {'job_name': 'worker', 'task_index': 0}
  assert 'this task: worker:0' in proc.stdout
  np.testing.assert_allclose(
    record['losses'], local_losses(batch_size=B, num_gpus=2), rtol=1e-4
  )


@pytest.mark.parametrize(
  'mode',
  [
    'parameter_server',
    pytest.param('collective_all_reduce', marks=pytest.mark.slow),
  ],
)
def test_killed_worker_makes_the_others_exit_with_a_message(mode):
  ps_port, w0, w1 = _free_ports(3)
  uses_ps = mode == 'parameter_server'
  hosts = ['--worker_hosts=127.0.0.1:%d,127.0.0.1:%d' % (w0, w1)]
  hosts += ['--ps_hosts=127.0.0.1:%d' % ps_port] if uses_ps else []
  flags = [
    '--model=test_linear',
    '--data_name=cifar10',
    '--device=cpu',
    '--batch_size=2',
    '--num_batches=100000',
    '--num_warmup_batches=0',
    '--display_every=1',
    '--variable_update=' + mode,
  ] + hosts
  tasks = [('worker', 0), ('worker', 1)] + ([('ps', 0)] if uses_ps else [])
  procs = {}
  for job, k in tasks:
    # Only the victim's table is read; the others' would fill their pipes.
    procs[(job, k)] = subprocess.Popen(
      [sys.executable, '-m', TASK_MODULE]
      + flags
      + ['--job_name=' + job, '--task_index=%d' % k],
      cwd=ROOT,
      env=_env(),
      stderr=subprocess.PIPE,
      text=True,
      stdout=subprocess.PIPE if k == 1 else subprocess.DEVNULL,
    )
  try:
    # Wait until worker 1 is stepping, then kill it.
    victim = procs[('worker', 1)]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
      line = victim.stdout.readline()
      if line.startswith('3\t'):
        break
    else:
      pytest.fail('worker 1 never reached step 3')
    victim.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    for task in tasks:
      if task == ('worker', 1):
        continue
      _, err = procs[task].communicate(timeout=75)
      assert time.monotonic() - killed_at < 60, task
      assert procs[task].returncode not in (0, None), task
      assert 'lost task worker:1' in err, (task, err[-2000:])
      # Not TensorFlow's ~30 lines of collective aborts before it.
      assert 'Aborting Ring' not in err, (task, err[-2000:])
  finally:
    for proc in procs.values():
      if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
  'flags,needle',
  [
    (['--job_name=worker'], '--worker_hosts'),
    (
      ['--job_name=worker', '--worker_hosts=127.0.0.1:5000', '--task_index=3'],
      '--task_index=3',
    ),
    (['--variable_update=collective_all_reduce'], 'needs a cluster'),
    (
      [
        '--job_name=worker',
        '--worker_hosts=127.0.0.1:5000',
        '--variable_update=replicated',
      ],
      'does not run in a cluster',
    ),
    (
      [
        '--job_name=worker',
        '--worker_hosts=127.0.0.1:5000',
        '--variable_update=distributed_replicated',
      ],
      '--ps_hosts: required',
    ),
    (
      [
        '--job_name=worker',
        '--worker_hosts=127.0.0.1:5000',
        '--variable_update=distributed_all_reduce',
      ],
      '--controller_host',
    ),
  ],
)
def test_bad_cluster_flags_are_one_line(flags, needle):
  from tf_cnn_benchmarks.config import params as params_lib

  with pytest.raises(params_lib.ParamsError, match=needle.replace('-', r'\-')):
    params_lib.make_params(
      device='cpu', **{f.split('=')[0].lstrip('-'): _value(f) for f in flags}
    )


def _value(flag):
  value = flag.split('=', 1)[1]
  return int(value) if value.isdigit() else value


def test_tf_config_is_read_and_flags_win():
  from tf_cnn_benchmarks.cluster import spec as cluster_lib

  env = {
    'TF_CONFIG': json.dumps(
      {
        'cluster': {
          'worker': ['127.0.0.1:1001', '127.0.0.1:1002'],
          'ps': ['127.0.0.1:1003'],
        },
        'task': {'type': 'worker', 'index': 1},
      }
    )
  }
  c = cluster_lib.resolve(None, None, None, None, None, 'grpc', env=env)
  assert (c.job_name, c.task_index, c.num_workers, c.num_ps) == (
    'worker',
    1,
    2,
    1,
  )
  c = cluster_lib.resolve(None, 0, None, None, None, 'grpc', env=env)
  assert c.task_index == 0  # --task_index=0 given: the flag wins
  assert (
    cluster_lib.resolve(None, None, None, None, None, 'grpc', env={}) is None
  )
  with pytest.raises(cluster_lib.ClusterError, match='TF_CONFIG'):
    cluster_lib.resolve(
      None, None, None, None, None, 'grpc', env={'TF_CONFIG': '{"cluster": 1}'}
    )


def test_bad_cluster_flag_exits_2_with_one_line():
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'tf_cnn_benchmarks',
      '--job_name=worker',
      '--worker_hosts=127.0.0.1:notaport',
      '--device=cpu',
    ],
    cwd=ROOT,
    env=_env(),
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert proc.returncode == 2
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and '--worker_hosts' in lines[0], proc.stderr


if __name__ == '__main__':
  sys.path.insert(0, ROOT)
  from tests import testing_models  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks import __main__ as cli  # pylint: disable=g-import-not-at-top

  testing_models.ensure_registered()
  sys.exit(
    cli.main(
      sys.argv,
      reports_results=(True if os.environ.get(EVERY_WORKER_REPORTS) else None),
    )
  )


FP16_MODES = [
  cluster_mode('collective_all_reduce'),
  cluster_mode('distributed_all_reduce'),
  cluster_mode(
    'parameter_server',
    '--ps_partition_threshold_bytes=100',
    launcher_flags=['--num_ps=2', '--no-controller'],
  ),
  cluster_mode('distributed_replicated'),
  # weights on the ps, biases all-reduced: one decision spans both.
  cluster_mode('hybrid', '--hybrid_threshold_bytes=100'),
]


# One ps-held and one all-reduced manager in the default suite; the rest slow.
SLOW_FP16_MODES = {
  'distributed_all_reduce',
  'parameter_server',
  'distributed_replicated',
}


@pytest.mark.parametrize(
  'mode,launcher_flags,extra',
  _mode_params(FP16_MODES, SLOW_FP16_MODES, name=lambda m: m[0]),
)
def test_fp16_auto_loss_scale_across_workers(
  tmp_path, mode, launcher_flags, extra
):
  """A huge initial scale: steps are skipped (scale halves) until finite.

  Every worker skips the same steps (its losses stay put while the scale
  halves) and then trains; the results agree between workers.
  """
  one_graph = mode == 'distributed_all_reduce'
  flags = (
    [f for f in LINEAR if not f.startswith('--num_batches')]
    + [
      '--variable_update=' + mode,
      '--num_batches=60',
      '--use_fp16',
      '--fp16_enable_auto_loss_scale',
      '--fp16_loss_scale=1e12',
      '--init_learning_rate=0.1',
    ]
    + extra
  )
  out, records = launch_ok(
    tmp_path,
    2,
    flags,
    launcher_flags=launcher_flags,
    every_worker_reports=not one_graph,
  )
  assert len(records) == (1 if one_graph else 2), out[-2000:]
  for record in records:
    skipped = record['skipped_steps']
    assert 0 < skipped < 50
    assert record['skipped_steps'] == records[0]['skipped_steps']
    assert record['loss_scale'] == pytest.approx(1e12 / 2**skipped)
    losses = np.array(record['losses'])
    assert np.all(np.isfinite(losses))
    assert np.all(losses[:skipped] == losses[0])  # skipped: nothing moved
    assert losses[-1] < losses[0]


def test_bf16_parameter_server_across_workers(tmp_path):
  out, records = launch_ok(
    tmp_path,
    2,
    LINEAR + ['--variable_update=parameter_server', '--use_bf16'],
    launcher_flags=['--num_ps=1', '--no-controller'],
  )
  assert records[0]['precision'] == 'bfloat16'
  assert np.all(np.isfinite(records[0]['losses']))


def _momentum_flags(train_dir):
  """LINEAR with momentum (its slots are saved too), no warm-up step and a
  train_dir; without --num_batches."""
  return [
    f for f in LINEAR if not f.startswith(('--num_batches', '--optimizer'))
  ] + [
    '--optimizer=momentum',
    '--num_warmup_batches=0',
    '--train_dir=' + train_dir,
  ]


@pytest.mark.parametrize(
  'first_distributed',
  [
    pytest.param(True, id='distributed_then_local', marks=pytest.mark.slow),
    pytest.param(False, id='local_then_distributed'),
  ],
)
def test_distributed_replicated_and_replicated_checkpoints_interchange(
  tmp_path, first_distributed
):
  """3 steps in one mode, 3 resumed in the other == 6 local steps.

  Two workers x one tower hold the examples of a local run's two towers, so
  the resumed steps must reproduce the uninterrupted local run's losses
  (momentum: the optimizer slots must come back too).
  """
  train_dir = str(tmp_path / 'train')
  common = _momentum_flags(train_dir)

  def distributed():
    out, records = launch_ok(
      tmp_path,
      2,
      common + ['--variable_update=distributed_replicated', '--num_batches=3'],
      launcher_flags=['--num_ps=1', '--no-controller'],
      every_worker_reports=True,
    )
    return sum(worker_losses(records, 2)) / 2

  def local():
    from tests import testing_models
    from tf_cnn_benchmarks import benchmark_cnn
    from tf_cnn_benchmarks.config import params as params_lib

    testing_models.ensure_registered()
    p = params_lib.make_params(
      **LINEAR_ON_CPU,
      num_gpus=2,
      batch_size=B,
      optimizer='momentum',
      num_batches=3,
      num_warmup_batches=0,
      display_every=100,
      variable_update='replicated',
      train_dir=train_dir,
    )
    return np.array(benchmark_cnn.run_benchmark(p, out=io.StringIO()).losses)

  whole = local_losses(
    batch_size=2 * B, optimizer='momentum', num_batches=6, num_warmup_batches=0
  )
  first, then = (
    (distributed, local) if first_distributed else (local, distributed)
  )
  np.testing.assert_allclose(first(), whole[:3], rtol=1e-4)
  np.testing.assert_allclose(then(), whole[3:], rtol=1e-4)


def test_two_workers_train_on_real_format_data(tmp_path):
  """Each worker's tower reads its own stream of the fake CIFAR-10 set."""
  from tf_cnn_benchmarks.commands import make_fake_data

  data_dir = tmp_path / 'cifar'
  make_fake_data.write_cifar10(str(data_dir), num_train=100, num_validation=20)
  out, records = launch_ok(
    tmp_path,
    2,
    [
      '--model=trivial',
      '--data_name=cifar10',
      '--device=cpu',
      '--batch_size=4',
      '--num_batches=3',
      '--num_warmup_batches=1',
      '--data_dir=%s' % data_dir,
      '--variable_update=parameter_server',
    ],
    launcher_flags=['--num_ps=1', '--no-controller'],
  )
  assert records[0]['data_dir'] == str(data_dir)
  assert np.all(np.isfinite(records[0]['losses']))


RESUME_MODES = [
  cluster_mode('parameter_server'),
  cluster_mode('collective_all_reduce'),
  cluster_mode('hybrid', '--hybrid_threshold_bytes=100'),
  cluster_mode('distributed_all_reduce', '--all_reduce_spec=xring'),
]


@pytest.mark.parametrize(
  'mode,launcher_flags,extra', RESUME_MODES, ids=[m[0] for m in RESUME_MODES]
)
@pytest.mark.slow  # default-suite budget (20 min); runs with -m slow
def test_cluster_run_resumes_from_its_checkpoint(
  tmp_path, mode, launcher_flags, extra
):
  """3 steps, then 3 resumed steps in a new cluster == 6 local steps."""
  one_graph = mode == 'distributed_all_reduce'  # the controller reports
  train_dir = str(tmp_path / 'train')
  common = _momentum_flags(train_dir) + [
    '--num_batches=3',
    '--variable_update=' + mode,
  ]
  common += extra

  def part(name):
    run_dir = tmp_path / name
    run_dir.mkdir()
    out, records = launch_ok(
      run_dir,
      2,
      common,
      launcher_flags=launcher_flags,
      every_worker_reports=not one_graph,
    )
    losses = (
      np.array(records[0]['losses'])
      if one_graph
      else sum(worker_losses(records, 2)) / 2
    )
    return losses, records

  whole = local_losses(
    batch_size=2 * B, optimizer='momentum', num_batches=6, num_warmup_batches=0
  )
  first, _ = part('first')
  then, records = part('then')
  np.testing.assert_allclose(first, whole[:3], rtol=1e-4)
  np.testing.assert_allclose(then, whole[3:], rtol=1e-4)
  assert {r['start_step'] for r in records} == {3}
