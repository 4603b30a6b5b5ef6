"""hybrid's skipped fp16 steps: the ps-held update's conditional stays on
its ps task.

A conditional runs as switches and merges; on a skipped step its untaken
branch sends dead tensors between the devices it spans, which no op waits
for. With the workers' steps sharing one step id (collectives), the other
worker's end of step cleaned up that id on the ps while the chief's ps
still waited for them: "AbortedError: From /job:ps/...: Cleanup <id>"
(test_distributed's fp16 hybrid run, now and then under load). The graphs
are built for the chief of a 2-worker cluster without servers (building
needs only device names); the run itself is test_distributed's.
"""

import pytest
import tensorflow as tf

from tf_cnn_benchmarks.training import optimizers
from variable_mgr import base
from variable_mgr import hybrid
from variable_mgr import loss_scale as loss_scale_lib

tf1 = tf.compat.v1

WORKERS = ('/job:worker/replica:0/task:0', '/job:worker/replica:0/task:1')


def _ps(k):
  return '/job:ps/replica:0/task:%d/device:CPU:0' % k


def _task(device: str) -> tuple:
  spec = tf.DeviceSpec.from_string(device)
  return spec.job, spec.task


def _forward():
  """Two big variables (on the ps tasks) and a small one (all-reduced)."""
  w = tf1.get_variable('w', initializer=tf.ones([40, 3]))
  w2 = tf1.get_variable('w2', initializer=tf.ones([3, 40]))
  b = tf1.get_variable('b', initializer=tf.zeros([3]))
  out = tf.matmul(tf.matmul(tf.ones([2, 40]), w) + b, w2)
  return tf.reduce_sum(out * out)


def _chief_graph(num_ps: int, optimizer: str):
  """The chief's graph of an fp16 auto-scaled hybrid step (1 tower)."""
  cluster = base.ClusterDevices(
    ps_devices=tuple(_ps(k) for k in range(num_ps)),
    worker_devices=WORKERS,
    task_index=0,
    is_chief=True,
  )
  manager = hybrid.Hybrid(
    [WORKERS[0] + '/device:CPU:0'],
    cluster=cluster,
    threshold_bytes=100,
    use_resource_vars=True,
  )
  graph = tf.Graph()
  with graph.as_default():
    with tf.device(manager.global_step_device):
      global_step = tf1.train.get_or_create_global_step()
      scale = loss_scale_lib.LossScale(
        loss_scale_lib.LossScaleConfig(initial=1e12, auto=True),
        manager.global_step_device,
      )
      # A schedule: the rate is computed on the worker every step.
      rate = 0.1 / tf.cast(global_step + 1, tf.float32)
    with manager.tower_scope(0):
      loss = _forward()
      variables = manager.tower_trainable_variables(0)
      grads = tf1.gradients(scale.scale_loss(loss), variables)
    manager.build_train_op(
      [list(zip(grads, variables))],
      base.StepUpdate(
        optimizers.optimizer_factory(
          optimizers.OptimizerConfig(name=optimizer), rate
        ),
        global_step,
        loss_scale=scale,
        learning_rate=rate,
      ),
    )
  return graph


def _ps_conditionals(graph) -> list:
  """The If ops that update ps-held variables."""
  return [
    op
    for op in graph.get_operations()
    if op.type in ('If', 'StatelessIf')
    and op.name.startswith(hybrid.PS_OPTIMIZER_SCOPE)
  ]


def _branch_devices(graph, op) -> list:
  """The devices of the ops of both branches of the If `op`.

  Without the reads of a variable given no device: TensorFlow places a
  read with its variable (Adam's beta powers, here on the ps).
  """
  names = {op.get_attr(b).name for b in ('then_branch', 'else_branch')}
  return [
    node.device
    for f in graph.as_graph_def().library.function
    if f.signature.name in names
    for node in f.node_def
    if node.device or node.op != 'ReadVariableOp'
  ]


@pytest.mark.parametrize('optimizer', ['sgd', 'momentum', 'adam'])
@pytest.mark.parametrize('num_ps', [1, 2])
def test_the_ps_update_is_decided_and_skipped_on_its_ps_task(num_ps, optimizer):
  graph = _chief_graph(num_ps, optimizer)
  conds = _ps_conditionals(graph)
  # One per ps task holding variables (w and w2 are placed by bytes).
  assert sorted(_task(c.device) for c in conds) == [
    ('ps', k) for k in range(num_ps)
  ]
  for cond in conds:
    here = _task(cond.device)
    # Nothing the conditional reads comes from another task: the verdict
    # and the learning rate arrive as copies made on its task.
    assert [t.name for t in cond.inputs if _task(t.device) != here] == []
    devices = _branch_devices(graph, cond)
    assert devices and [d for d in devices if _task(d) != here] == []
    # The verdict's copy waits for every value read (the variables are
    # handles on this task), so the merge, in either branch, does too.
    values = {t.op.name for t in cond.inputs[1:] if t.dtype != tf.resource}
    waited = {op.name for op in cond.inputs[0].op.control_inputs}
    assert values and values - waited == set()
