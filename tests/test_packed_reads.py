"""parameter_server in a cluster: towers read the ps variables packed.

The graphs are built for a worker of a 1 ps + 2 worker cluster without
starting servers (building needs only device names); what crosses from the
ps to the worker in one step is counted on the ops the step runs. The
numbers (packed and direct reads train alike) are checked on real clusters
in test_distributed.
"""

import pytest
import tensorflow as tf

from tf_cnn_benchmarks.observability import placement
from variable_mgr import base
from variable_mgr import distributed

tf1 = tf.compat.v1

PS = '/job:ps/replica:0/task:0/device:CPU:0'
WORKER = '/job:worker/replica:0/task:1'


def _forward(images):
  """Three trainable float32 variables, one float16 and one statistic."""
  w = tf1.get_variable('w', initializer=tf.ones([4, 3]))
  b = tf1.get_variable('b', initializer=tf.zeros([3]))
  w2 = tf1.get_variable('w2', initializer=tf.ones([3, 2]))
  half = tf1.get_variable(
    'half', dtype=tf.float16, initializer=tf.ones([2], tf.float16)
  )
  moving = tf1.get_variable(
    'moving', initializer=tf.zeros([2]), trainable=False
  )
  out = tf.matmul(tf.nn.relu(tf.matmul(images, w) + b), w2)
  out = out * tf.cast(half, tf.float32)
  return tf.reduce_sum(out * out), moving  # as in training, moving is unread


def _build(pack: bool, num_towers: int = 1):
  """(graph, manager, train op, towers' grads_and_vars) of worker 1."""
  cluster = base.ClusterDevices(
    ps_devices=(PS,),
    worker_devices=('/job:worker/replica:0/task:0', WORKER),
    task_index=1,
    is_chief=False,
    pack_transfers=pack,
  )
  towers = ['%s/device:CPU:%d' % (WORKER, i) for i in range(num_towers)]
  manager = distributed.ClusterParameterServer(towers, cluster=cluster)
  graph = tf.Graph()
  with graph.as_default():
    with tf.device(manager.global_step_device):
      global_step = tf1.train.get_or_create_global_step()
    manager.prepare_towers(
      lambda: _forward(tf1.placeholder(tf.float32, [2, 4]))
    )
    tower_grads = []
    for i in range(num_towers):
      with manager.tower_scope(i):
        loss, moving = _forward(tf.ones([2, 4]) * (i + 1))
        variables = manager.tower_trainable_variables(i)
        grads = tf1.gradients(loss, manager.tower_weights(i, variables))
        tower_grads.append(list(zip(grads, variables)))
    train_op = manager.build_train_op(
      tower_grads,
      base.StepUpdate(
        lambda: tf1.train.GradientDescentOptimizer(0.1), global_step
      ),
    )
  return graph, manager, train_op, tower_grads, moving


def _ps_to_worker_edges(train_op) -> int:
  return sum(
    t['edges']
    for t in placement.transfers(placement.closure([train_op]))
    if t['src'].startswith('/job:ps') and t['dst'].startswith('/job:worker')
  )


def test_packed_reads_cross_once_per_dtype():
  _, _, packed_op, *_ = _build(pack=True)
  _, _, direct_op, *_ = _build(pack=False)
  # Direct: w, b, w2 and half each cross.
  assert _ps_to_worker_edges(direct_op) == 4
  # Packed: one float32 transfer (w, b, w2), half alone in its dtype.
  assert _ps_to_worker_edges(packed_op) == 1 + 1


def test_two_towers_share_one_packed_read():
  _, _, one, *_ = _build(pack=True, num_towers=1)
  _, _, two, *_ = _build(pack=True, num_towers=2)
  assert _ps_to_worker_edges(two) == _ps_to_worker_edges(one)


@pytest.mark.parametrize('pack', [True, False])
def test_gradients_pair_with_the_ps_variables(pack):
  graph, manager, _, tower_grads, moving = _build(pack=pack)
  (grads_and_vars,) = tower_grads
  assert [v.op.name for _, v in grads_and_vars] == [
    'v/w',
    'v/b',
    'v/w2',
    'v/half',
  ]
  assert all(v.device == PS for _, v in grads_and_vars)
  assert all(g is not None for g, _ in grads_and_vars)
  # The statistic is the variable itself (the model assigns to it).
  assert isinstance(moving, tf.Variable) and moving.device == PS
  # Outside the tower: the variables, as a checkpoint wants them.
  with graph.as_default():
    trainable = manager.tower_trainable_variables(0)
  assert trainable == [v for _, v in grads_and_vars]


def test_the_creation_pass_runs_in_no_step():
  graph, _, train_op, *_ = _build(pack=True)
  step = {op.name for op in placement.closure([train_op])}
  creation = [
    op.name
    for op in graph.get_operations()
    if op.name.startswith('variable_creation/')
  ]
  assert creation and not step.intersection(creation)
