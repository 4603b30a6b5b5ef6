"""What TensorBoard reads from the training summaries: the graph and the
images/sec scalar, read back through summary_iterator (TensorBoard's event
file reader)."""

import glob

import pytest
import tensorflow as tf

from tests import test_profiling
from tf_cnn_benchmarks.observability import summaries

tf1 = tf.compat.v1


def read_events(train_dir):
  """(graph_defs, {tag: [(step, value)]}) of the event file in train_dir."""
  (path,) = glob.glob(str(train_dir / 'events.out.tfevents.*'))
  graphs, scalars = [], {}
  for event in tf1.train.summary_iterator(path):
    if event.graph_def:
      graph_def = tf1.GraphDef()
      graph_def.ParseFromString(event.graph_def)
      graphs.append(graph_def)
    for value in event.summary.value:
      scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
  return graphs, scalars


def test_summaries_hold_the_graph_and_images_per_sec(tmp_path):
  train_dir = tmp_path / 'train'
  result, _ = test_profiling.run(
    1,
    num_batches=4,
    train_dir=str(train_dir),
    summary_verbosity=1,
    save_summaries_steps=2,
  )
  graphs, scalars = read_events(train_dir)
  (graph_def,) = graphs  # TensorBoard's Graphs tab
  ops = {n.op for n in graph_def.node}
  assert {'MatMul', 'SparseSoftmaxCrossEntropyWithLogits'} <= ops
  rates = scalars[summaries.IMAGES_PER_SEC_TAG]
  # Written with every summary (global steps 2 and 4 of 1 warm-up + 4).
  assert [step for step, _ in rates] == [s for s, _ in scalars['total_loss']]
  assert [step for step, _ in rates] == [2, 4]
  assert all(rate > 0 for _, rate in rates)
  assert result.training.end_step == 5


def test_tensorboard_loads_the_graph_and_images_per_sec(tmp_path):
  """TensorBoard's own loader (the optional tools install)."""
  pytest.importorskip(
    'tensorboard', reason='tensorboard is not installed (requirements-tools)'
  )
  from tensorboard.backend.event_processing import event_accumulator  # pylint: disable=g-import-not-at-top

  train_dir = tmp_path / 'train'
  test_profiling.run(
    1,
    num_batches=4,
    train_dir=str(train_dir),
    summary_verbosity=1,
    save_summaries_steps=2,
  )
  loaded = event_accumulator.EventAccumulator(str(train_dir))
  loaded.Reload()
  assert loaded.Tags()['graph']
  assert summaries.IMAGES_PER_SEC_TAG in loaded.Tags()['scalars']
  scalars = loaded.Scalars(summaries.IMAGES_PER_SEC_TAG)
  assert [e.step for e in scalars] == [2, 4]
  assert all(e.value > 0 for e in scalars)


def test_images_per_sec_covers_the_steps_since_the_last_summary():
  throughput = summaries.ThroughputSummary(images_per_step=32)
  throughput.add(0.5)
  throughput.add(1.5)
  (value,) = throughput.summary().value
  assert value.tag == 'images_per_sec'
  assert value.simple_value == pytest.approx(32 * 2 / 2.0)
  throughput.add(0.25)  # a new interval
  (value,) = throughput.summary().value
  assert value.simple_value == pytest.approx(128.0)
  throughput.add(10.0)  # a warm-up step, forgotten
  throughput.reset()
  throughput.add(0.5)
  (value,) = throughput.summary().value
  assert value.simple_value == pytest.approx(64.0)
