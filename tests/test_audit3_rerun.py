"""Issue 58's cases re-run as a new user would (items 8 and the leftovers):
the defects that re-run found.

- A full disk (here a file size limit, `ulimit -f`) while writing the
  TensorBoard summaries, --graph_file or --placement_file was a traceback
  (the summary writer's thread printed its own, then an IndexError); now
  one line naming the file, exit 1, and no temporary file left behind. A
  failed --trace_file or --tfprof_file was left torn, and a failed
  partition graph was named by its prefix with TensorFlow's temporary
  file's name as the reason (and that file left).
- The evaluator task evaluated a damaged checkpoint without reading it
  first: TensorFlow's restore traceback; now one line naming it.
- --measure_link on a link too slow to answer: a TimeoutError traceback
  from the sender, and a TypeError once --timeout passed (--timeout was not
  converted on that path, so --timeout=nan was taken too).
- --scaling_profile / --profile compared only --model with the profile's:
  a profile of another batch size, data format or precision ranked the
  strategies for that run silently.
"""

import os
import resource
import socket
import subprocess
import sys

import pytest

from tests.helpers import AUTO_PROFILE
from tests.helpers import AUTO_RESNET20
from tests.helpers import LAUNCHER
from tests.helpers import ROOT
from tests.helpers import TRIVIAL_FLAGS
from tests.helpers import run_benchmark
from tests.helpers import task_env
from tf_cnn_benchmarks.commands import measure_link
from tf_cnn_benchmarks.commands import predict_scaling
from tf_cnn_benchmarks.scaling.auto import auto

# ---- a full disk on the outputs besides the results file ---------------------

FILE_LIMIT = 16 << 10  # bytes: each output below is larger, a results line not


def _file_size_limit():
  # Python ignores SIGXFSZ, so a write past the limit fails with EFBIG
  # (as on a full disk), it does not kill the process.
  resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))


@pytest.mark.parametrize(
  'flags, what',
  [
    (
      [
        '--train_dir={d}',
        '--save_summaries_steps=1',
        '--summary_verbosity=1',
        '--save_model_secs=100000',
      ],
      'summaries in {d}',
    ),
    (['--graph_file={d}/graph.pbtxt'], 'file {d}/graph.pbtxt'),
    (['--placement_file={d}/placement.json'], 'file {d}/placement.json'),
    (['--trace_file={d}/trace.json'], 'file {d}/trace.json'),
    (['--tfprof_file={d}/tfprof'], 'file {d}/tfprof'),
    (
      ['--partitioned_graph_file_prefix={d}/part'],
      'file {d}/part_job_localhost_replica_0_task_0_device_CPU_0',
    ),
  ],
)
def test_a_full_disk_on_an_output_is_one_line(tmp_path, flags, what):
  out = tmp_path / 'out'
  out.mkdir()
  proc = run_benchmark(
    *TRIVIAL_FLAGS,
    '--num_batches=3',
    *[f.format(d=out) for f in flags],
    preexec_fn=_file_size_limit,
    timeout=300,
  )
  err = [ln for ln in proc.stderr.splitlines() if ln.strip()]
  assert (proc.returncode, len(err)) == (1, 1), proc.stderr[-3000:]
  assert err[0] == 'error: writing the %s failed: File too large' % (
    what.format(d=out)
  )
  if 'summaries' not in what:
    # Written whole or not at all: no torn file, no temporary piece.
    assert os.listdir(out) == []


# ---- the evaluator task and a damaged checkpoint -----------------------------


def _damaged_checkpoint(train_dir) -> str:
  """A checkpoint (model.ckpt-1) whose data file lost all but 10 bytes."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  tf1 = tf.compat.v1
  with tf.Graph().as_default():
    tf1.Variable(tf.ones([1000]), name='weights')
    saver = tf1.train.Saver()
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      path = saver.save(sess, os.path.join(train_dir, 'model.ckpt'), 1)
  (data,) = [n for n in os.listdir(train_dir) if '.data-' in n]
  with open(os.path.join(train_dir, data), 'r+b') as f:
    f.truncate(10)
  return path


def test_the_evaluator_refuses_a_damaged_checkpoint_before_restoring(tmp_path):
  from tf_cnn_benchmarks.evaluation import evaluator_task  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks.training import checkpoints  # pylint: disable=g-import-not-at-top

  path = _damaged_checkpoint(str(tmp_path))
  # No setup or run facts: the check comes before anything is built.
  with pytest.raises(checkpoints.CheckpointError) as e:
    evaluator_task._evaluate_if_kept(None, None, path, print)  # pylint: disable=protected-access
  assert str(e.value).startswith(
    '%s (named by %s): damaged or incomplete checkpoint ('
    % (path, tmp_path / 'checkpoint')
  )


# ---- --measure_link on a link that carries nothing ---------------------------


def test_the_sender_on_a_silent_link_is_one_line(capsys):
  with socket.create_server(('127.0.0.1', 0)) as server:
    port = server.getsockname()[1]
    # The connection is taken, nothing ever comes back (1 byte/s).
    status = measure_link.main(
      ['--send=127.0.0.1:%d' % port, '--wait_s=0.5', '--pings=1']
    )
  err = capsys.readouterr().err.strip().splitlines()
  assert status == 1
  assert err == [
    'nothing came back from 127.0.0.1:%d for 0.5 s: the link carries too '
    'little to be measured in that time' % port
  ]


def _launcher(*argv, timeout=120):
  return subprocess.run(
    [sys.executable, LAUNCHER, *argv],
    cwd=ROOT,
    env=task_env(),
    capture_output=True,
    text=True,
    timeout=timeout,
  )


def test_measure_link_checks_its_timeout():
  proc = _launcher('--measure_link', '--timeout=nan')
  assert proc.returncode == 2, proc.stderr
  assert proc.stderr.splitlines() == [
    'error: --timeout=nan: must be a number of seconds > 0'
  ]
  assert proc.stdout == ''  # nothing measured


def test_measure_link_past_its_timeout_is_one_line(monkeypatch, capsys):
  args, _ = measure_link_args('--timeout=0.5')

  def slow(argv, timeout, **kwargs):
    raise subprocess.TimeoutExpired(argv, timeout)

  monkeypatch.setattr(measure_link.subprocess, 'run', slow)
  assert measure_link.between_tasks(args, None) == 124
  assert capsys.readouterr().err.splitlines() == [
    'error: --measure_link: no figures within --timeout=0.5 s (4 MB at '
    '--link_mbits=0.01)'
  ]


def measure_link_args(*argv):
  from tf_cnn_benchmarks.commands import launch_local_cluster  # pylint: disable=g-import-not-at-top

  return launch_local_cluster.parse_args(
    ['--measure_link', '--link_mbits=0.01', *argv]
  )


# ---- a profile of another run ------------------------------------------------


def _refused(**changes) -> str:
  with pytest.raises(auto.AutoError) as e:
    auto.choose(dict(AUTO_RESNET20, **changes))
  return str(e.value)


@pytest.mark.parametrize(
  'changes, theirs, ours',
  [
    (dict(batch_size=8), '--batch_size=32', '--batch_size=8'),
    # Not given: the model's default batch size (resnet20: 128).
    (dict(batch_size=None), '--batch_size=32', '--batch_size=128'),
    (dict(use_fp16=True), '--use_fp16=False', '--use_fp16=True'),
    (dict(data_format='NCHW'), '--data_format=NHWC', '--data_format=NCHW'),
  ],
)
def test_a_profile_of_another_run_of_the_model_is_refused(
  changes, theirs, ours
):
  assert _refused(**changes) == (
    '--scaling_profile=%s: a profile of --model=resnet20 %s, this run is '
    '--model=resnet20 %s (it would rank the strategies for resnet20 at %s); '
    'give --scaling_profile_any_model to use it anyway'
    % (AUTO_PROFILE, theirs, ours, theirs)
  )


def test_every_difference_is_named():
  assert _refused(model='trivial', batch_size=2).startswith(
    '--scaling_profile=%s: a profile of --model=resnet20 --batch_size=32, '
    'this run is --model=trivial --batch_size=2 (it would rank the '
    'strategies for resnet20 at --batch_size=32); ' % AUTO_PROFILE
  )


def test_any_model_ranks_from_it_with_a_warning_naming_the_difference(capsys):
  overrides = dict(AUTO_RESNET20, batch_size=8, scaling_profile_any_model=True)
  plan, choice = auto.make_auto_plan(**overrides)
  assert plan.params.variable_update == choice.best.strategy.variable_update
  warnings = [
    ln for ln in capsys.readouterr().err.splitlines() if 'warning' in ln
  ]
  assert warnings == [
    'warning: --scaling_profile=%s profiles --model=resnet20 '
    '--batch_size=32, this run is --model=resnet20 --batch_size=8: the '
    'ranking is of that run (--scaling_profile_any_model)' % AUTO_PROFILE
  ]


def test_predict_scaling_compares_the_flags_given(capsys):
  argv = ['--profile=' + AUTO_PROFILE, '--num_workers=2', '--batch_size=8']
  assert predict_scaling.main(argv) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert err == [
    'predict_scaling.py: error: --profile=%s: a profile of --model=resnet20 '
    '--batch_size=32, this run is --model=resnet20 --batch_size=8 (it would '
    'rank the strategies for resnet20 at --batch_size=32); give '
    '--profile_any_model to use it anyway' % AUTO_PROFILE
  ]
  assert predict_scaling.main([*argv, '--profile_any_model']) == 0
  assert predict_scaling.main(argv[:2] + ['--batch_size=32']) == 0


# ---- Ctrl-C while TensorFlow loads -------------------------------------------


def _stderr_fd_after(error, capfd) -> str:
  from tf_cnn_benchmarks.platform import quiet  # pylint: disable=g-import-not-at-top

  capfd.readouterr()
  with pytest.raises(type(error)):
    with quiet.captured_stderr_fd():
      os.write(2, b'I0000 port.cc:153] oneDNN custom operations are on.\n')
      raise error
  return capfd.readouterr().err


def test_ctrl_c_while_tensorflow_loads_replays_nothing(capfd):
  # The run then prints `interrupted` alone (it printed TensorFlow's three
  # start-up lines before it).
  assert _stderr_fd_after(KeyboardInterrupt(), capfd) == ''


def test_a_failure_while_tensorflow_loads_still_shows_its_lines(capfd):
  assert 'oneDNN' in _stderr_fd_after(RuntimeError('no libcuda'), capfd)


def test_ctrl_c_that_tensorflow_turned_into_another_error_is_one_line(
  monkeypatch, capsys
):
  import signal  # pylint: disable=g-import-not-at-top

  from tf_cnn_benchmarks import __main__ as entry  # pylint: disable=g-import-not-at-top

  def building(argv, reports_results=None):
    del argv, reports_results
    try:
      os.kill(os.getpid(), signal.SIGINT)  # the handler runs on return
    except KeyboardInterrupt:
      # What TensorFlow's nest utilities made of it while a graph was built.
      raise TypeError() from None
    raise AssertionError('SIGINT did not arrive')

  monkeypatch.setattr(entry, '_main', building)
  previous = signal.signal(signal.SIGINT, signal.default_int_handler)
  try:
    assert entry.main(['tf_cnn_benchmarks']) == 130
  finally:
    signal.signal(signal.SIGINT, previous)
  assert capsys.readouterr().err == 'interrupted\n'
  # Outside a run, SIGINT is Python's again.
  assert signal.getsignal(signal.SIGINT) is previous
