"""Input and runtime knobs: interleave order and prefetch, NUMA affinity,
grappler on/off, RewriterConfig text, --benchmark_log_dir / _test_id.

Checked on what they change: the built input graph and its dataset options,
the session config and the partitioned graphs the session ran, and the
records written.
"""

import glob
import io
import json
from pathlib import Path

from google.protobuf import text_format
import pytest
import tensorflow as tf
from tensorflow.core.framework import dataset_options_pb2

from tests import helpers
from tests import testing_models
from tests.helpers import LINEAR_ON_CPU
from tf_cnn_benchmarks import __main__ as entry
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.inputs import input_options
from tf_cnn_benchmarks.platform import runtime_knobs
from tf_cnn_benchmarks.reporting import outputs

REPO = Path(__file__).resolve().parent.parent

from tf_cnn_benchmarks.commands import make_fake_data  # noqa: E402

tf1 = tf.compat.v1
RewriterConfig = type(tf1.ConfigProto().graph_options.rewrite_options)

VALIDATION = 12


@pytest.fixture(scope='module')
def imagenet_dir(tmp_path_factory):
  path = tmp_path_factory.mktemp('imagenet')
  make_fake_data.write_imagenet(
    str(path),
    num_train=8,
    num_validation=VALIDATION,
    num_shards=4,
    image_size=40,
    num_classes=1000,
    seed=3,
  )
  return str(path)


def make(**kw):
  testing_models.ensure_registered()
  common = dict(
    **LINEAR_ON_CPU,
    num_gpus=2,
    variable_update='replicated',
    batch_size=4,
    num_batches=2,
    num_warmup_batches=0,
    display_every=100,
    peak_tflops_per_device='none',
  )
  common.update(kw)
  return params_lib.make_params(**common)


def session_config(**kw):
  return benchmark_cnn.BenchmarkCNN(make(**kw))._session_config()  # pylint: disable=protected-access


# ---- tf.data interleave ----------------------------------------------------


def validation_pipeline(data_dir, **kw):
  """(interleave op, dataset Options proto, labels of one pass)."""
  graph = tf.Graph()
  with graph.as_default():
    inputs = helpers.add_streams(
      helpers.input_options(data_dir, **kw),
      subset='validation',
      train=False,
      batch_size=2,
      image_size=32,
    )
  ops = graph.get_operations()
  (interleave,) = [op for op in ops if 'InterleaveDataset' in op.type]
  (options_op,) = [op for op in ops if op.type == 'OptionsDataset']
  options = dataset_options_pb2.Options()
  options.ParseFromString(options_op.get_attr('serialized_options'))
  labels = []
  with tf1.Session(graph=graph) as sess:
    sess.run(inputs.initializer)
    try:
      while True:
        labels.extend(sess.run(inputs.batches[0][1]).tolist())
    except tf.errors.OutOfRangeError:
      pass
  return interleave, options, sorted(labels)


def prefetch_input_elements(interleave_op) -> int:
  """The interleave's prefetch_input_elements input (a constant)."""
  (value,) = [
    t
    for t in interleave_op.inputs
    if t.op.name.endswith('/prefetch_input_elements')
  ]
  return int(tf.make_ndarray(value.op.get_attr('value')))


@pytest.mark.parametrize('prefetch', [None, 3])
def test_sloppy_interleave_sets_the_dataset_option(imagenet_dir, prefetch):
  default, default_options, default_labels = validation_pipeline(
    imagenet_dir, interleave_prefetch=prefetch
  )
  sloppy, sloppy_options, sloppy_labels = validation_pipeline(
    imagenet_dir, sloppy_interleave=True, interleave_prefetch=prefetch
  )
  assert default_options.deterministic is True
  assert sloppy_options.deterministic is False
  assert default.get_attr('deterministic') == b'true'
  assert sloppy.get_attr('deterministic') == b'false'
  # Any order, the same examples: one pass reads every validation record.
  assert len(sloppy_labels) == VALIDATION
  assert sloppy_labels == default_labels


def test_interleave_prefetch_reaches_the_interleave(imagenet_dir):
  autotuned, _, _ = validation_pipeline(imagenet_dir)
  classic, _, _ = validation_pipeline(imagenet_dir, interleave_prefetch=3)
  assert prefetch_input_elements(autotuned) == -1  # tf.data.AUTOTUNE
  assert prefetch_input_elements(classic) == 3


def test_interleave_flags_reach_the_input_options():
  p = make(
    data_dir='/nowhere/cifar10',
    datasets_sloppy_parallel_interleave=True,
    datasets_parallel_interleave_prefetch=2,
  )
  options = input_options.InputOptions.from_params(p)
  assert (options.sloppy_interleave, options.interleave_prefetch) == (True, 2)
  with pytest.raises(params_lib.ParamsError, match='interleave_prefetch=0'):
    make(datasets_parallel_interleave_prefetch=0)


# ---- grappler and RewriterConfig -------------------------------------------


def test_enable_optimizations_switches_grappler_in_the_session_config():
  on = session_config()
  off = session_config(enable_optimizations=False)
  assert on.graph_options.rewrite_options.disable_meta_optimizer is False
  assert off.graph_options.rewrite_options.disable_meta_optimizer is True
  assert off.graph_options.optimizer_options.opt_level == (
    tf1.OptimizerOptions.L0
  )
  assert on.graph_options.optimizer_options.opt_level != (
    tf1.OptimizerOptions.L0
  )


def test_rewriter_config_replaces_the_grappler_settings():
  config = session_config(
    rewriter_config='constant_folding: OFF  memory_optimization: NO_MEM_OPT',
    enable_optimizations=False,  # classic: the RewriterConfig wins
  )
  rewrite = config.graph_options.rewrite_options
  assert rewrite.constant_folding == RewriterConfig.OFF
  assert rewrite.memory_optimization == RewriterConfig.NO_MEM_OPT
  assert rewrite.disable_meta_optimizer is False


def partition_node_count(tmp_path, name, **kw) -> int:
  prefix = tmp_path / name / 'g.pbtxt'
  benchmark_cnn.run_benchmark(
    make(num_batches=1, partitioned_graph_file_prefix=str(prefix), **kw),
    out=io.StringIO(),
  )
  count = 0
  for path in glob.glob(str(prefix.parent / '*')):
    graph_def = tf1.GraphDef()
    text_format.Parse(Path(path).read_text(), graph_def)
    count += len(graph_def.node)
  return count


def test_grappler_off_and_rewriter_config_change_the_graphs_that_ran(tmp_path):
  """The session really runs what the config says: without the optimisers
  the partitioned graphs keep nodes grappler would have removed."""
  on = partition_node_count(tmp_path, 'on')
  off = partition_node_count(tmp_path, 'off', enable_optimizations=False)
  meta_off = partition_node_count(
    tmp_path, 'meta_off', rewriter_config='disable_meta_optimizer: true'
  )
  assert off > on and meta_off > on


def run_main(argv, capfd):
  entry.FLAGS.unparse_flags()
  status = entry.main(['tf_cnn_benchmarks', *argv])
  out, err = capfd.readouterr()
  return status, out, err


@pytest.mark.parametrize(
  'text', ['constant_folding: MAYBE', 'no_such_field: 1', 'constant_folding {']
)
def test_bad_rewriter_config_exits_2_with_one_line(text, capfd):
  status, _, err = run_main(
    ['--device=cpu', '--only_check_args', '--rewriter_config=%s' % text],
    capfd,
  )
  assert status == 2
  assert len(err.strip().splitlines()) == 1
  assert err.startswith('error: --rewriter_config=')


# ---- NUMA ------------------------------------------------------------------


def test_numa_affinity_in_the_config_and_the_header(tmp_path, capsys):
  assert session_config(use_numa_affinity=True).experimental.use_numa_affinity
  assert not session_config().experimental.use_numa_affinity
  for i in range(2):
    (tmp_path / ('node%d' % i)).mkdir()
  (tmp_path / 'possible').write_text('0-1')
  assert runtime_knobs.numa_node_count(str(tmp_path)) == 2
  p = make(use_numa_affinity=True)
  assert runtime_knobs.header_rows(p, num_numa_nodes=2) == [
    ('NUMA bind', 'True (2 NUMA nodes)')
  ]
  assert capsys.readouterr().err == ''
  assert runtime_knobs.header_rows(p, num_numa_nodes=1) == [
    ('NUMA bind', 'True (no effect: this machine has one NUMA node)')
  ]
  assert len(capsys.readouterr().err.splitlines()) == 1  # one warning line
  (row,) = runtime_knobs.header_rows(p, in_cluster=True, num_numa_nodes=2)
  assert 'no effect' in row[1]
  assert len(capsys.readouterr().err.splitlines()) == 1
  assert runtime_knobs.header_rows(make()) == []


# ---- benchmark_log_dir / benchmark_test_id ---------------------------------


def test_benchmark_log_dir_gets_the_record_with_the_test_id(tmp_path):
  log_dir = tmp_path / 'logs'
  result_file = tmp_path / 'r.jsonl'
  for test_id in ('resnet-sweep-1', None):
    benchmark_cnn.run_benchmark(
      make(
        benchmark_log_dir=str(log_dir),
        benchmark_test_id=test_id,
        result_file=str(result_file),
      ),
      out=io.StringIO(),
    )
  logged = [
    json.loads(line)
    for line in (log_dir / outputs.BENCHMARK_LOG_NAME).read_text().splitlines()
  ]
  written = [json.loads(line) for line in result_file.read_text().splitlines()]
  assert logged == written  # the same records, one per run
  assert [r['benchmark_test_id'] for r in logged] == ['resnet-sweep-1', None]
  assert logged[0]['num_steps'] == 2 and logged[0]['images_per_sec'] > 0


def test_eval_lines_go_to_the_benchmark_log_too(tmp_path):
  train_dir = str(tmp_path / 'train')
  log_dir = tmp_path / 'logs'
  benchmark_cnn.run_benchmark(
    make(num_gpus=1, variable_update='parameter_server', train_dir=train_dir),
    out=io.StringIO(),
  )
  evaluated = benchmark_cnn.run_benchmark(
    make(
      num_gpus=1,
      variable_update='parameter_server',
      train_dir=train_dir,
      eval=True,
      benchmark_log_dir=str(log_dir),
      benchmark_test_id='eval-1',
    ),
    out=io.StringIO(),
  )
  (logged,) = [
    json.loads(line)
    for line in (log_dir / outputs.BENCHMARK_LOG_NAME).read_text().splitlines()
  ]
  assert (logged['mode'], logged['benchmark_test_id']) == ('eval', 'eval-1')
  assert logged['top_1_accuracy'] == evaluated.evaluation.top_1_accuracy


def test_empty_strings_are_unset_as_classic():
  p = make(benchmark_test_id='', rewriter_config='', tfprof_file='')
  assert (p.benchmark_test_id, p.rewriter_config, p.tfprof_file) == (
    None,
    None,
    None,
  )
