"""What a run builds once per tower, kept to what the step needs (issue 57).

Towers that average their gradients hold the same weights: one of them
computes the L2 term for all (as the classic harness did), only tower 0
updates the moving statistics (classic), and towers whose variables the
manager overwrites after initialisation get no random initial values of
their own. Independent towers keep all three. These are graph facts; the
numbers they lead to are pinned by the equal-loss tests.
"""

import io
import re

import pytest

import models
from tests.helpers import graph_ancestors
from tests.test_driver import make
from tf_cnn_benchmarks import benchmark_cnn

TOWERS = 3


def _built(variable_update):
  p = make(
    model='resnet20',
    data_name='cifar10',
    batch_size=2,
    num_gpus=TOWERS,
    variable_update=variable_update,
    weight_decay=1e-4,
  )
  bench = benchmark_cnn.BenchmarkCNN(p, out=io.StringIO())
  return bench.build()


def _tower_of(op):
  return op.name.split('/')[0]  # 'v0', 'v1', ... (naming.tower_prefix)


def _per_tower(ops, op_types):
  counts = {}
  for op in ops:
    if op.type in op_types:
      counts[_tower_of(op)] = counts.get(_tower_of(op), 0) + 1
  return counts


@pytest.mark.parametrize('variable_update', ['replicated', 'independent'])
def test_each_tower_builds_only_what_its_manager_needs(variable_update):
  built = _built(variable_update)
  step = graph_ancestors([built.step_op])
  l2 = _per_tower(step, ('L2Loss',))
  stats = _per_tower(step, ('AssignSub', 'AssignSubVariableOp'))
  init = _per_tower(
    graph_ancestors(built.init_ops),
    ('StatelessRandomUniformV2', 'StatelessRandomNormalV2'),
  )
  every = {'v%d' % i for i in range(TOWERS)}
  if variable_update == 'independent':
    assert set(l2) == set(stats) == set(init) == every
  else:
    assert set(l2) == {'v%d' % (TOWERS - 1)}  # the last tower, classically
    assert set(stats) == {'v0'}
    assert set(init) == {'v0'}  # the others get v0's values after init
  assert len(set(l2.values())) == 1 and len(set(stats.values())) == 1


@pytest.mark.parametrize(
  'model,data_name',
  [
    ('resnet20', 'cifar10'),
    ('lenet', 'imagenet'),
    ('alexnet', 'cifar10'),
    ('inception3', 'imagenet'),  # the classic harness's: no auxiliary head
    ('mobilenet', 'imagenet'),  # depthwise convolutions
  ],
)
def test_flops_counted_in_the_run_graph_equal_an_inference_build(
  model, data_name
):
  p = make(
    model=model,
    data_name=data_name,
    batch_size=2,
    num_gpus=2,
    variable_update='replicated',
  )
  bench = benchmark_cnn.BenchmarkCNN(p, out=io.StringIO())
  built = bench.build()
  separate = models.model_flops_per_image(
    bench.model, bench.dataset.num_classes, data_format=p.data_format
  )
  assert built.flops_per_image == separate > 0


@pytest.mark.parametrize(
  'variable_update', ['replicated', 'parameter_server', 'independent']
)
def test_control_edges_do_not_multiply_with_towers_and_variables(
  variable_update,
):
  """An update waits for every gradient through one op (base.all_done), not
  one control edge per tower's gradient (107,380 edges in a 2-tower
  resnet50 step graph before, 1,868 after)."""
  built = _built(variable_update)
  worst = max(
    len(op.control_inputs)
    for op in built.graph.get_operations()
    if op.type != 'NoOp'  # tf.group's ops gather the edges, by design
  )
  assert worst <= 4


@pytest.mark.parametrize(
  'variable_update', ['replicated', 'parameter_server', 'independent']
)
def test_no_gradient_norm_ops_unless_a_summary_fetches_them(variable_update):
  """The applied gradient's norm (an L2 loss per gradient) is built only
  for the gradient_norm summary (--summary_verbosity=2): unfetched ops
  still cost start-up time."""
  ops = _built(variable_update).graph.get_operations()
  # Only the weight decay's L2 terms, in the towers' losses.
  l2 = [op.name for op in ops if op.type == 'L2Loss']
  assert l2 and all(re.match(r'(v|tower_)\d+/loss/', name) for name in l2), l2
  assert not [op for op in ops if 'global_norm' in op.name]


def test_one_tower_replicated_reduces_nothing():
  """One tower's sum is its gradient: no copy, no add, no scaling by 1."""
  p = make(
    model='resnet20',
    data_name='cifar10',
    batch_size=2,
    num_gpus=1,
    variable_update='replicated',
  )
  built = benchmark_cnn.BenchmarkCNN(p, out=io.StringIO()).build()
  step = graph_ancestors([built.step_op])
  assert not [op for op in step if op.name.startswith('allreduce')]
  applies = [op for op in step if op.type.startswith('Apply')]
  assert applies
  for op in applies:  # the gradient input comes straight from the backprop
    grad = op.inputs[-1].op
    assert grad.type != 'Mul' or 'gradients' in grad.name, grad.name
