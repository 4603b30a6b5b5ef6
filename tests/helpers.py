"""What the test files share, in one place.

- The repository's paths (ROOT, LAUNCHER).
- A run in this process: run_in_process (LINEAR_ON_CPU names the tiny test
  model; conftest's test_models_registered fixture registers it).
- The harness and the scripts run as processes: quiet_env, task_env,
  run_python, run_benchmark, run_script, cli_status (and TRIVIAL_FLAGS, a
  one-second run); children lists a process's children.
- Fake data sets written once per test module: fake_imagenet, fake_cifar10,
  separable_imagenet.
- The real-data streams of test_data_sources.py and test_input_failures.py:
  input_options, add_streams, build_streams, run_batches; tfrecord_records
  reads a TFRecord file by hand.

TensorFlow and the driver are imported by the functions that need them: a
task started as `python -m tests.test_distributed` imports this module
before its benchmark does.
"""

import argparse
import os
from pathlib import Path
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCHER = os.path.join(ROOT, 'scripts', 'launch_local_cluster.py')

# The tiny exact model of tests/testing_models.py on the CPU: the fields of a
# test run's params.Params that name it.
LINEAR_ON_CPU = dict(model='test_linear', data_name='cifar10', device='cpu')
# --variable_update=auto from a fixture profile, so nothing is measured.
AUTO_PROFILE = os.path.join(ROOT, 'tests', 'data', 'profile_resnet20_cpu.json')
AUTO_RESNET20 = dict(
  model='resnet20',
  data_name='cifar10',
  batch_size=32,
  device='cpu',
  variable_update='auto',
  scaling_profile=AUTO_PROFILE,
)


def run_in_process(**fields):
  """The BenchmarkResult of a run of params.make_params(**fields) in this
  process (its console output discarded)."""
  import io  # pylint: disable=g-import-not-at-top

  from tf_cnn_benchmarks import benchmark_cnn  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks.config import params as params_lib  # pylint: disable=g-import-not-at-top

  p = params_lib.make_params(**fields)
  return benchmark_cnn.run_benchmark(p, out=io.StringIO())


# ---- processes --------------------------------------------------------------

# A run of the trivial model that takes a second (add --num_batches).
TRIVIAL_FLAGS = [
  '--model=trivial',
  '--data_name=cifar10',
  '--device=cpu',
  '--batch_size=2',
  '--num_warmup_batches=0',
  '--display_every=100',
]


def quiet_env(**extra) -> dict:
  """This process's environment with TensorFlow's C++ log lines off."""
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', **extra)


def task_env() -> dict:
  """The environment of a launched task: quiet, unbuffered output (lines
  arrive as printed) and no TF_CONFIG or Slurm step of the caller's (a
  suite run inside srun must not turn the tasks into a Slurm cluster)."""
  env = quiet_env(PYTHONUNBUFFERED='1')
  env.pop('TF_CONFIG', None)
  for name in [n for n in env if n.startswith('SLURM_')]:
    env.pop(name)
  return env


def cli_status(*flags, timeout=120):
  """(exit status, stderr lines) of `python -m tf_cnn_benchmarks flags` run
  as a launched task (task_env)."""
  proc = run_benchmark(*flags, env=task_env(), timeout=timeout)
  return proc.returncode, [ln for ln in proc.stderr.splitlines() if ln]


def children(pid):
  """The child processes of pid ([] once it is gone)."""
  try:
    with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
      return [int(p) for p in f.read().split()]
  except OSError:
    return []


def run_python(args, *, env=None, cwd=ROOT, timeout=120, **kwargs):
  """`python ARGS` from the repository root: its CompletedProcess (text
  output captured). env None: this process's environment."""
  return subprocess.run(
    [sys.executable, *args],
    cwd=cwd,
    env=env,
    capture_output=True,
    text=True,
    timeout=timeout,
    **kwargs,
  )


def run_benchmark(*flags, module='tf_cnn_benchmarks', env=None, **kwargs):
  """`python -m tf_cnn_benchmarks FLAGS` (quiet_env unless env is given)."""
  return run_python(
    ['-m', module, *flags],
    env=quiet_env() if env is None else env,
    **kwargs,
  )


def run_script(script, *args, **kwargs):
  """`python scripts/SCRIPT ARGS` (see run_python for the keywords)."""
  return run_python([os.path.join(ROOT, 'scripts', script), *args], **kwargs)


# ---- fake data sets ---------------------------------------------------------


def fake_imagenet(tmp_path_factory, name='imagenet', **kwargs) -> str:
  """A fake ImageNet directory (make_fake_data.write_imagenet(**kwargs))."""
  from tf_cnn_benchmarks.commands import make_fake_data  # pylint: disable=g-import-not-at-top

  path = str(tmp_path_factory.mktemp(name))
  make_fake_data.write_imagenet(path, **kwargs)
  return path


def fake_cifar10(tmp_path_factory, name='cifar', **kwargs):
  """(directory, what write_cifar10 returned) of a fake CIFAR-10."""
  from tf_cnn_benchmarks.commands import make_fake_data  # pylint: disable=g-import-not-at-top

  path = str(tmp_path_factory.mktemp(name))
  return path, make_fake_data.write_cifar10(path, **kwargs)


def separable_imagenet(tmp_path_factory) -> str:
  """Two classes, each one solid grey level (black / white)."""
  return fake_imagenet(
    tmp_path_factory,
    'separable',
    num_train=64,
    num_validation=16,
    num_classes=2,
    num_shards=2,
    image_size=40,
    separable=True,
    seed=2,
  )


# ---- real-data streams ------------------------------------------------------

# test_data_sources.py's fake ImageNet: its JPEGs are STORED_SIZE big and the
# streams resize them to MODEL_SIZE.
IMAGENET_TRAIN = 48
IMAGENET_VALIDATION = 20
IMAGENET_SHARDS = 4
STORED_SIZE = 48
MODEL_SIZE = 40
CIFAR_TRAIN = 100
CIFAR_VALIDATION = 30


def streams_imagenet(tmp_path_factory) -> str:
  """The fake ImageNet the stream tests read (1000 classes)."""
  return fake_imagenet(
    tmp_path_factory,
    num_train=IMAGENET_TRAIN,
    num_validation=IMAGENET_VALIDATION,
    num_shards=IMAGENET_SHARDS,
    image_size=STORED_SIZE,
    num_classes=1000,
    seed=1,
  )


def streams_cifar10(tmp_path_factory):
  """(directory, written arrays) of the fake CIFAR-10 the stream tests read."""
  return fake_cifar10(
    tmp_path_factory,
    num_train=CIFAR_TRAIN,
    num_validation=CIFAR_VALIDATION,
    seed=2,
  )


def input_options(data_dir, data_name='imagenet', **kw):
  """InputOptions of data_dir (other fields as given, else defaults)."""
  from tf_cnn_benchmarks.inputs import input_options as input_options_lib  # pylint: disable=g-import-not-at-top

  return input_options_lib.InputOptions(
    data_dir=data_dir, data_name=data_name, **kw
  )


# tower_batches' arguments that build_streams gives unless told otherwise.
STREAM_DEFAULTS = dict(
  subset='train',
  train=True,
  batch_size=4,
  first_stream=0,
  num_streams=1,
  host_device='/device:CPU:0',
)


def add_streams(opts, *, image_size=None, num_local_towers=None, **kw):
  """TowerInputs built in the current graph: tower_batches with
  STREAM_DEFAULTS, the model size of the data set and one local tower per
  stream from first_stream on, unless `kw` says otherwise."""
  from tf_cnn_benchmarks.inputs import data_sources  # pylint: disable=g-import-not-at-top

  args = dict(STREAM_DEFAULTS, **kw)
  if image_size is None:
    image_size = 32 if opts.data_name == 'cifar10' else MODEL_SIZE
  towers = num_local_towers or args['num_streams'] - args['first_stream']
  return data_sources.tower_batches(
    opts, image_size=image_size, num_local_towers=towers, **args
  )


def build_streams(opts, **kw):
  """(graph, TowerInputs) of add_streams(opts, **kw) in a fresh graph."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  graph = tf.Graph()
  with graph.as_default():
    inputs = add_streams(opts, **kw)
  return graph, inputs


def run_batches(graph, inputs, max_batches):
  """Up to max_batches steps (fewer if the streams end): [[(images,
  labels) per tower] per step]."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  steps = []
  with tf.compat.v1.Session(graph=graph) as sess:
    sess.run(inputs.initializer)
    try:
      for _ in range(max_batches):
        steps.append(sess.run(list(inputs.batches)))
    except tf.errors.OutOfRangeError:
      pass
  return steps


def tfrecord_records(path):
  """(offsets, payloads) of a TFRecord file, read by hand."""
  raw = Path(path).read_bytes()
  offsets, payloads, pos = [], [], 0
  while pos < len(raw):
    (length,) = struct.unpack('<Q', raw[pos : pos + 8])
    offsets.append(pos)
    payloads.append(raw[pos + 12 : pos + 12 + length])
    pos += 12 + length + 4
  return offsets, payloads


class FakeSwitch:
  """Hands out addresses and namespace prefixes as the launcher's
  SwitchNetwork does (tf_cnn_benchmarks/commands/netshape.py), without a
  network."""

  def __init__(self):
    self.hosts = 0

  def add_host(self):
    self.hosts += 1
    return '10.31.0.%d' % self.hosts

  def host(self, index):
    while self.hosts <= index:
      self.add_host()
    return '10.31.0.%d' % (index + 1)

  def prefix(self, index):
    return ['nsenter', '--net=/proc/%d/ns/net' % (1000 + index), '--']


def launcher_args(**changes):
  """The launcher's parsed options (scripts/launch_local_cluster.py) of a
  two-worker launch on 100 Mbit/s switch ports, with `changes`."""
  return argparse.Namespace(
    **dict(
      num_workers=2,
      num_ps=None,
      controller=None,
      link_mbits=100.0,
      topology='switch',
      tasks_measure_link=False,
      auto_trials=0,
      auto_trial_batches=10,
      python=sys.executable,
      module='tf_cnn_benchmarks',
    )
    | changes
  )


def graph_ancestors(tensors_or_ops) -> set:
  """Every op the given tensors or ops depend on (data and control)."""
  seen, stack = set(), [getattr(t, 'op', t) for t in tensors_or_ops]
  while stack:
    op = stack.pop()
    if op not in seen:
      seen.add(op)
      stack.extend(t.op for t in op.inputs)
      stack.extend(op.control_inputs)
  return seen
