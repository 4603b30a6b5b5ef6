"""Tests for variable_mgr/naming.py: the replica naming protocol."""

import pytest
import tensorflow as tf

from variable_mgr import base
from variable_mgr import local
from variable_mgr import naming

tf1 = tf.compat.v1


def test_prefixes_and_names():
  assert naming.SHARED_SCOPE == 'v' and naming.SHARED_PREFIX == 'v/'
  assert naming.tower_scope_name(0) == 'v0'
  assert naming.tower_prefix(12) == 'v12/'
  assert naming.tower_name(2, 'conv0/kernel') == 'v2/conv0/kernel'
  assert naming.shared_name('conv0/kernel') == 'v/conv0/kernel'


@pytest.mark.parametrize(
  'name,replica,relative',
  [
    ('v/conv0/kernel', True, 'conv0/kernel'),
    ('v0/conv0/kernel', True, 'conv0/kernel'),
    ('v12/fc/bias/Momentum', True, 'fc/bias/Momentum'),
    ('global_step', False, 'global_step'),
    ('loss_scale_state/loss_scale', False, 'loss_scale_state/loss_scale'),
    # Only a leading 'v', digits and '/' make a replica prefix.
    ('vgg/conv0/kernel', False, 'vgg/conv0/kernel'),
    ('v1x/w', False, 'v1x/w'),
    ('tower_0/v0/w', False, 'tower_0/v0/w'),
    ('v0/v1/w', True, 'v1/w'),
  ],
)
def test_replica_prefix(name, replica, relative):
  assert naming.is_replica_name(name) == replica
  assert naming.strip_replica_prefix(name) == relative


def test_relative_name():
  assert naming.relative_name('v0/a/b', naming.tower_prefix(0)) == 'a/b'
  assert naming.relative_name('v10/a', naming.tower_prefix(1)) is None
  assert naming.relative_name('v/a', naming.SHARED_PREFIX) == 'a'
  assert naming.relative_name('global_step', naming.SHARED_PREFIX) is None


@pytest.mark.parametrize('saved_prefix', ['v0/', 'v/'])
def test_checkpoint_name(saved_prefix):
  """The copy that stands for every tower is saved under the bare name."""
  assert (
    naming.checkpoint_name(saved_prefix + 'conv0/kernel', saved_prefix)
    == 'conv0/kernel'
  )
  others = {'v0/', 'v1/', 'v/'} - {saved_prefix}
  for prefix in others:
    assert naming.checkpoint_name(prefix + 'conv0/kernel', saved_prefix) is None
  assert naming.checkpoint_name('global_step', saved_prefix) == 'global_step'


def test_names_round_trip():
  for i in (0, 1, 7, 10):
    name = naming.tower_name(i, 'a/b')
    assert naming.is_replica_name(name)
    assert naming.strip_replica_prefix(name) == 'a/b'
    assert naming.relative_name(name, naming.tower_prefix(i)) == 'a/b'
  assert naming.strip_replica_prefix(naming.shared_name('a/b')) == 'a/b'


def _variables(names):
  with tf1.variable_scope('', reuse=tf1.AUTO_REUSE):
    return [tf1.get_variable(n, shape=[1], use_resource=True) for n in names]


def test_tower_copies_by_relative_name():
  with tf.Graph().as_default():
    variables = _variables(
      ['v1/b', 'v0/b', 'v0/a', 'v1/a', 'v2/a', 'v/c', 'global_step']
    )
    copies = base.tower_copies(variables, 3)
  assert list(copies) == ['a', 'b']  # sorted, tower 0's names only
  assert [c.op.name for c in copies['a']] == ['v0/a', 'v1/a', 'v2/a']
  assert [None if c is None else c.op.name for c in copies['b']] == [
    'v0/b',
    'v1/b',
    None,
  ]


def test_copy_from_replica_zero_assigns_every_existing_copy():
  with tf.Graph().as_default():
    variables = _variables(['v0/a', 'v1/a', 'v2/a', 'v0/b', 'v1/b'])
    ops = local.copy_from_replica_zero(variables, 3)
    assert len(ops) == 3
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      sess.run(ops)
      values = sess.run({v.op.name: v for v in variables})
  for name, value in values.items():
    assert value == values['v0/' + naming.strip_replica_prefix(name)], name


def test_savable_variables_use_the_checkpoint_names():
  with tf.Graph().as_default():
    manager = local.Independent(['/cpu:0', '/cpu:0'])
    variables = _variables(['v0/w', 'v1/w', 'global_step'])
    saved = local.Replicated(['/cpu:0', '/cpu:0']).savable_variables()
    assert saved == {'w': variables[0], 'global_step': variables[2]}
    assert manager.savable_variables() == {
      'w': variables[0],
      'v1/w': variables[1],
      'global_step': variables[2],
    }
