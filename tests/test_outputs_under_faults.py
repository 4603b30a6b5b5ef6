"""Issue 29's output defects: the step table's columns as classic printed
them, the results file and the train dir under faults, the cluster's
figures in their own labelled places."""

import io

import pytest

from tests import helpers

# Imported here, not under a test's capfd: the driver's console defaults to
# the sys.stdout of its import, which capfd replaces for one test only.
from tf_cnn_benchmarks import __main__ as entry
from tf_cnn_benchmarks import benchmark_cnn

pytestmark = pytest.mark.usefixtures('test_models_registered')


def _rows(console: str) -> list:
  """The step table's rows: [step, images/sec, loss, ...] as text fields."""
  lines = console.splitlines()
  start = next(i for i, ln in enumerate(lines) if ln.startswith('Step\t'))
  rows = []
  for line in lines[start + 1 :]:
    if not line[:1].isdigit():
      break
    rows.append(line.split('\t'))
  return rows


def _run(**fields):
  """(result, console text) of an in-process run of the tiny test model."""
  from tf_cnn_benchmarks.config import params as params_lib  # pylint: disable=g-import-not-at-top

  out = io.StringIO()
  p = params_lib.make_params(**dict(helpers.LINEAR_ON_CPU, **fields))
  result = benchmark_cnn.run_benchmark(p, out=out)
  return result, out.getvalue()


def test_forward_only_rows_print_a_zero_loss_and_the_line_the_real_one():
  result, console = _run(
    forward_only=True, num_batches=3, display_every=1, batch_size=4
  )
  rows = _rows(console)
  assert len(rows) == 3
  assert [row[2] for row in rows] == ['0.000'] * 3  # classic's column
  losses = result.to_record()['losses']
  assert len(losses) == 3 + result.num_warmup_steps
  assert all(loss > 0 for loss in losses)  # the real loss, in the line


def test_training_rows_keep_the_real_loss():
  result, console = _run(num_batches=2, display_every=1, batch_size=4)
  shown = [float(row[2]) for row in _rows(console)]
  assert shown == [round(x, 3) for x in result.losses[-2:]]
  assert all(x > 0 for x in shown)


# ---- item 8: full disks ------------------------------------------------------


def _main(argv, capfd):
  """`python -m tf_cnn_benchmarks ARGV` in process: (status, stderr lines)."""
  entry.FLAGS.unparse_flags()
  status = entry.main(['tf_cnn_benchmarks', *argv])
  _, err = capfd.readouterr()
  return status, [line for line in err.splitlines() if line.strip()]


TINY_FLAGS = [
  '--model=test_linear',
  '--data_name=cifar10',
  '--device=cpu',
  '--batch_size=2',
  '--num_batches=2',
  '--num_warmup_batches=0',
]


@pytest.mark.parametrize('how', ['short', 'raises'])
def test_a_failed_results_append_leaves_the_file_as_it_was(
  tmp_path, monkeypatch, how
):
  from tf_cnn_benchmarks.reporting import result_lines  # pylint: disable=g-import-not-at-top

  path = tmp_path / 'results.jsonl'
  result_lines.append_json_line(str(path), {'first': 1})
  before = path.read_bytes()
  real_write = result_lines.os.write

  def full_disk(fd, data):
    # The disk takes part of the line, then is full.
    written = real_write(fd, data[: len(data) // 2])
    if how == 'short':
      return written
    raise OSError(28, 'No space left on device')

  monkeypatch.setattr(result_lines.os, 'write', full_disk)
  with pytest.raises(OSError):
    result_lines.append_json_line(str(path), {'second': 2, 'pad': 'x' * 100})
  assert path.read_bytes() == before
  monkeypatch.undo()
  result_lines.append_json_line(str(path), {'third': 3})
  assert [r for _, r in result_lines.read_json_lines(str(path))] == [
    {'first': 1},
    {'third': 3},
  ]


@pytest.mark.parametrize(
  'error,reason',
  [
    ('ResourceExhaustedError', 'No space left on device'),  # ENOSPC
    ('OutOfRangeError', 'File too large'),  # EFBIG: ulimit -f
  ],
)
def test_a_failed_final_checkpoint_is_one_line_and_keeps_the_results_line(
  tmp_path, monkeypatch, capfd, error, reason
):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  from tf_cnn_benchmarks.reporting import result_lines  # pylint: disable=g-import-not-at-top

  def full_disk(*args, **kwargs):
    # As a session reports it: the OS's text after the file's name.
    raise getattr(tf.errors, error)(
      None,
      None,
      'Graph execution error:\n\nDetected at node save/SaveV2\n'
      'model.ckpt-2.data.tempstate1; %s\n\t [[{{node save/SaveV2}}]]' % reason,
    )

  monkeypatch.setattr(tf.compat.v1.train.Saver, 'save', full_disk)
  result_file = tmp_path / 'r.jsonl'
  train_dir = tmp_path / 'train'
  status, err = _main(
    [
      *TINY_FLAGS,
      '--train_dir=%s' % train_dir,
      '--result_file=%s' % result_file,
    ],
    capfd,
  )
  assert status == 1
  assert len(err) == 1, err
  assert err[0] == 'error: writing the checkpoint %s failed: %s' % (
    train_dir / 'model.ckpt-2',
    reason,
  )
  [(_, record)] = result_lines.read_json_lines(str(result_file))
  assert record['num_steps'] == 2


def test_a_failed_trace_write_is_one_line(tmp_path, monkeypatch, capfd):
  from tf_cnn_benchmarks.observability import summaries  # pylint: disable=g-import-not-at-top

  def full_disk(path, *args, **kwargs):
    raise OSError(28, 'No space left on device')

  monkeypatch.setattr(summaries, 'write_step_trace', full_disk)
  trace = tmp_path / 'trace.json'
  status, err = _main([*TINY_FLAGS, '--trace_file=%s' % trace], capfd)
  assert status == 1
  assert len(err) == 1, err
  assert str(trace) in err[0] and 'No space left on device' in err[0]


# ---- item 7: one run per --train_dir -------------------------------------


def test_a_second_run_on_a_train_dir_in_use_is_refused(tmp_path, capfd):
  import fcntl  # pylint: disable=g-import-not-at-top

  from tf_cnn_benchmarks.training import checkpoints  # pylint: disable=g-import-not-at-top

  train_dir = tmp_path / 'train'
  train_dir.mkdir()
  with open(train_dir / checkpoints.LOCK_FILE, 'w') as held:
    fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # the first run, still going
    held.write('pid 4242 on first-host\n')
    held.flush()
    status, err = _main([*TINY_FLAGS, '--train_dir=%s' % train_dir], capfd)
  assert status == 2
  assert len(err) == 1, err
  assert str(train_dir) in err[0] and 'pid 4242 on first-host' in err[0]
  assert checkpoints.existing_checkpoints(str(train_dir)) == []


def test_the_lock_of_a_dead_run_does_not_block(tmp_path, capfd):
  from tf_cnn_benchmarks.training import checkpoints  # pylint: disable=g-import-not-at-top

  train_dir = tmp_path / 'train'
  # A run that took the lock and died: its file stays, its lock does not.
  train_dir.mkdir()
  dead = helpers.run_python(
    [
      '-c',
      'import fcntl, os, sys\n'
      'f = open(sys.argv[1], "w")\n'
      'fcntl.flock(f.fileno(), fcntl.LOCK_EX)\n'
      'f.write("pid %d on here" % os.getpid()); f.flush()\n'
      'os._exit(0)\n',
      str(train_dir / checkpoints.LOCK_FILE),
    ]
  )
  assert dead.returncode == 0, dead.stderr
  assert (train_dir / checkpoints.LOCK_FILE).exists()
  status, err = _main([*TINY_FLAGS, '--train_dir=%s' % train_dir], capfd)
  assert status == 0, err
  assert checkpoints.latest_checkpoint(str(train_dir)).endswith('ckpt-2')
  # Released at the end of the run: the next run in this process goes on.
  status, err = _main([*TINY_FLAGS, '--train_dir=%s' % train_dir], capfd)
  assert status == 0, err


# ---- items 3 and 20: a two-worker run ----------------------------------------


@pytest.fixture(scope='module')
def two_workers(tmp_path_factory):
  """(console, {task index: results line}) of a two-worker collective run
  in which both workers write their line (about 10 s)."""
  from tests import test_distributed  # pylint: disable=g-import-not-at-top

  out, records = test_distributed.launch_ok(
    tmp_path_factory.mktemp('cluster'),
    2,
    test_distributed.LINEAR
    + ['--variable_update=collective_all_reduce', '--print_training_accuracy'],
    launcher_flags=test_distributed.TASKS['collective_all_reduce'],
    every_worker_reports=True,
  )
  return out, {r['task']['task_index']: r for r in records}


def _worker_rows(console: str, worker: int) -> list:
  """(step, images/sec) of one worker's step table rows."""
  prefix = '[worker:%d] ' % worker
  rows = []
  for line in console.splitlines():
    fields = line[len(prefix) :].split('\t')
    if line.startswith(prefix) and fields[0].isdigit() and len(fields) > 2:
      rows.append((int(fields[0]), float(fields[1].split()[1])))
  return rows


def test_cluster_rows_show_each_workers_own_images_per_sec(two_workers):
  from tests import test_distributed  # pylint: disable=g-import-not-at-top

  console, records = two_workers
  for worker, record in records.items():
    rows = _worker_rows(console, worker)
    assert [step for step, _ in rows] == [1, 2, 3]
    last = rows[-1][1]
    # The worker's own batch over its own timed steps (the line's mean).
    own = test_distributed.B * 1e3 / record['step_time_ms']['mean']
    assert last == pytest.approx(own, abs=0.06)
    assert last == pytest.approx(record['images_per_sec_per_worker'], abs=0.06)
    # The classic total stays the cluster's: every worker's images.
    assert record['images_per_sec'] == pytest.approx(2 * own, rel=1e-6)


def test_cluster_accuracies_are_the_mean_of_the_workers(two_workers):
  # The line's top_1/top_5_accuracies are the cluster's (the mean of the
  # workers' own, which are worker_top_*_accuracies); the rows keep each
  # worker's own, as classic printed them.
  import numpy as np  # pylint: disable=g-import-not-at-top

  console, records = two_workers
  for k in (1, 5):
    key = 'top_%d_accuracies' % k
    own = [np.array(records[w]['worker_' + key]) for w in (0, 1)]
    for record in records.values():
      np.testing.assert_allclose(record[key], (own[0] + own[1]) / 2, rtol=1e-6)
  own_top_1 = [records[w]['worker_top_1_accuracies'] for w in (0, 1)]
  assert own_top_1[0] != own_top_1[1]  # the scopes differ in this run
  for w in (0, 1):
    prefix = '[worker:%d] ' % w
    rows = [
      line[len(prefix) :].split('\t')
      for line in console.splitlines()
      if line.startswith(prefix) and line[len(prefix) :][:1].isdigit()
    ]
    shown = [float(row[3]) for row in rows]
    assert shown == pytest.approx(own_top_1[w][-len(shown) :], abs=5e-4)
