"""Failures and robustness (issue 17), reported as one stderr line.

Each test runs the harness (or a script) as a process, causes the fault and
compares numbers: exit codes, stderr lines, records in a results file. This
file: results lines, ranges and memory, output paths, TF_CONFIG, a cut
TFRecord, quiet stderr (the rest of issue 17 is in test_failures.py).
"""

import os
import subprocess
import sys

import pytest

from tests.helpers import LAUNCHER
from tests.helpers import ROOT
from tests.helpers import TRIVIAL_FLAGS as TRIVIAL
from tests.helpers import children as _children
from tests.helpers import cli_status as cli
from tests.helpers import run_benchmark
from tests.helpers import run_python
from tests.helpers import run_script
from tests.helpers import task_env as _env

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

  proc = run_benchmark(
    *TRIVIAL,
    '--num_batches=2',
    '--result_file=%s' % result_file,
    env=_env(),
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
    # An evaluator joins no cluster now (issue 30), and "master" is the
    # chief: what stays refused is an evaluator task TF_CONFIG lists no
    # slot for, and a chief named twice.
    _tf_config('evaluator', 1, worker=['h:1'], evaluator=['h:9']),
    _tf_config('worker', 0, worker=['h:1'], master=['h:2'], chief=['h:3']),
  ],
)
def test_bad_tf_config_is_refused(tf_config):
  from tf_cnn_benchmarks.cluster import spec  # pylint: disable=g-import-not-at-top

  with pytest.raises(spec.ClusterError):
    _resolve(tf_config)


def test_bad_tf_config_is_one_line_exit_2():
  env = dict(_env(), TF_CONFIG=_tf_config('worker', 1.9, worker=['h:1', 'h:2']))
  proc = run_benchmark(*TRIVIAL, env=env, timeout=60)
  assert (proc.returncode, len(proc.stderr.splitlines())) == (2, 1)


# --- TFRecord cut inside a record header (item 12) ---------------------------


def test_tfrecord_cut_inside_a_header_is_one_line_exit_2(tmp_path):
  from tf_cnn_benchmarks.commands import make_fake_data  # pylint: disable=g-import-not-at-top

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
  proc = run_script(script, *argv, env=env)
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
    '  runpy.run_module(%r, run_name="__main__", alter_sys=True)\n'
    'except SystemExit:\n'
    '  pass\n'
    'sys.stderr.write(str("tensorflow" in sys.modules))\n'
  ) % (
    [script, *argv],
    ROOT,
    'tf_cnn_benchmarks.commands.' + script[: -len('.py')],
  )
  proc = run_python(['-c', probe], env=env)
  assert proc.stderr in ('True', 'False'), proc.stderr
  return proc.stderr == 'True'


def _imagenet_with_a_corrupt_jpeg(data_dir, corrupt):
  """Fake ImageNet TFRecords; record 1 of the second train shard's JPEG is
  replaced by corrupt(jpeg bytes) (the record itself stays well-formed)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  from tf_cnn_benchmarks.commands import make_fake_data  # pylint: disable=g-import-not-at-top

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


def _user_run(data_dir, *flags):
  """The trivial model on data_dir's ImageNet, run as a user runs it (with
  TensorFlow's C++ log lines)."""
  env = _env()
  env.pop('TF_CPP_MIN_LOG_LEVEL')
  return run_benchmark(
    '--model=trivial',
    '--device=cpu',
    '--batch_size=2',
    *flags,
    '--num_warmup_batches=0',
    '--data_dir=%s' % data_dir,
    env=env,
  )


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
  proc = _user_run(tmp_path, '--num_batches=20')
  # Before: libjpeg's own lines (4 to 8 of them) before ours.
  lines = proc.stderr.splitlines()
  assert (proc.returncode, len(lines)) == (2, 1), lines
  assert shard in lines[0] and 'record 1' in lines[0]


def test_good_imagenet_run_prints_nothing_on_stderr(tmp_path):
  _imagenet_with_a_corrupt_jpeg(tmp_path, lambda b: b)  # nothing corrupt
  proc = _user_run(tmp_path, '--num_batches=4')
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
