"""The official_resnet* names as the classic harness built them: the TF
official models' r1 ResNets (official/r1/resnet/resnet_model.py), with the
classic's default batch sizes and its L2 term (batch norm included).

Parameter counts are in tests/test_classic_compat.py; these are the
defaults, FLOPs, batch-norm decay and weight decay.
"""

import re

import numpy as np
import pytest
import tensorflow as tf

import models
from models import declared
from tests.test_models import _images
from tf_cnn_benchmarks.training import towers

tf1 = tf.compat.v1

OFFICIAL = sorted(
  d.name for d in declared.DECLARATIONS if d.name.startswith('official_')
)


def test_every_classic_official_name_is_declared():
  # The classic model_config's official_resnet* table: six depths, v1 and v2.
  depths = (18, 34, 50, 101, 152, 200)
  assert OFFICIAL == sorted(
    'official_resnet%d%s' % (d, v) for d in depths for v in ('', '_v2')
  )


@pytest.mark.parametrize('name', OFFICIAL)
def test_default_batch_is_the_classic_one(name):
  # official_resnet_model.py: {50: 128, 101: 32, 152: 32}, any other 32.
  depth = int(re.match(r'official_resnet(\d+)', name).group(1))
  classic = {50: 128, 101: 32, 152: 32}.get(depth, 32)
  assert models.create_model(name, 'imagenet').default_batch_size == classic


def _flops(name, num_classes=1000):
  return models.model_stats(models.create_model(name, 'imagenet'), num_classes)[
    1
  ]


def test_official_resnet18_flops_count_the_stage_1_projection():
  # ResNet-18's multiply-adds (torchvision's "1.81 G"), counted by hand:
  # stem 112*112*64*147, stage 1 4 * 56*56*64*576, stages 2-4 411,041,792
  # each (3x3 convs and the 1x1 projection), fc 512*1000; plus the official
  # 1x1 64->64 projection of stage 1's first block at 56x56.
  torchvision_macs = 1_814_073_344
  projection_macs = 56 * 56 * 64 * 64
  expected = 2 * (torchvision_macs + projection_macs)
  assert _flops('official_resnet18') == expected
  assert _flops('official_resnet18_v2') == expected


def test_official_v2_bottleneck_strides_in_its_3x3():
  # Convs and strides as the official v1 (v1.5 here): the same FLOPs, more
  # than the classic resnet50_v2, which strides in the 1x1 as resnet50.
  official_v2 = _flops('official_resnet50_v2')
  assert official_v2 == _flops('official_resnet50')
  assert official_v2 > _flops('resnet50_v2') == _flops('resnet50')


def _moving_mean_decay(name):
  """The decay of the first batch norm's moving mean, from two updates.

  From a zero moving mean, one update gives m1 = (1 - d) * mu; a second one
  with the same batch (nothing else changes) gives m2 = m1 + (1 - d) *
  (mu - m1), so m2 / m1 = 1 + d.
  """
  graph = tf.Graph()
  with graph.as_default():
    model = models.create_model(name, 'imagenet')
    out = model.build(_images(2, 32, 'NHWC'), 1001, is_training=True)
    first = next(v for v in tf1.global_variables() if 'moving_mean' in v.name)
    init = tf1.global_variables_initializer()
  with tf1.Session(graph=graph) as sess:
    sess.run(init)
    sess.run(out.update_ops)
    m1 = sess.run(first)
    sess.run(out.update_ops)
    m2 = sess.run(first)
  big = np.abs(m1) > 0.1 * np.abs(m1).max()
  return float(np.median(m2[big] / m1[big])) - 1.0


@pytest.mark.parametrize(
  'name,decay',
  [
    # official resnet_model.py: _BATCH_NORM_DECAY = 0.997.
    ('official_resnet18', 0.997),
    ('official_resnet18_v2', 0.997),
    # The classic resnet* (its resnet_model.py): the builder's 0.9.
    pytest.param('resnet50', 0.9, marks=pytest.mark.slow),
  ],
)
def test_batch_norm_decay(name, decay):
  assert _moving_mean_decay(name) == pytest.approx(decay, abs=1e-4)


def test_l2_penalty_leaves_batch_norm_out_unless_asked():
  with tf.Graph().as_default():
    kernel = tf1.get_variable(
      'conv0/kernel', initializer=tf.constant([3.0, 4.0])
    )
    gamma = tf1.get_variable(
      'conv0/batchnorm0/gamma', initializer=tf.constant([2.0])
    )
    without = towers.l2_penalty([kernel, gamma], 0.1)
    with_bn = towers.l2_penalty([kernel, gamma], 0.1, decay_batch_norm=True)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      without, with_bn = sess.run((without, with_bn))
  assert without == pytest.approx(0.1 * 0.5 * 25)
  assert with_bn == pytest.approx(0.1 * 0.5 * 29)


def _l2_term_and_variables(name, dataset, num_classes, size):
  """(total - base loss at weight decay 1, {name: value} of the trainables)."""
  graph = tf.Graph()
  with graph.as_default():
    tower = towers.build_tower(
      models.create_model(name, dataset),
      _images(2, size, 'NHWC'),
      tf.constant([0, 1]),
      num_classes=num_classes,
      data_format='NHWC',
      compute_dtype=tf.float32,
      seed=1234,
      weight_decay=1.0,
      trainable_variables=tf1.trainable_variables,
      forward_only=True,
    )
    variables = tf1.trainable_variables()
    init = tf1.global_variables_initializer()
  with tf1.Session(graph=graph) as sess:
    sess.run(init)
    total, base, values = sess.run((tower.loss, tower.base_loss, variables))
  names = [v.op.name for v in variables]
  return float(total) - float(base), dict(zip(names, values))


def _half_sum_of_squares(values):
  return sum(0.5 * np.sum(np.square(v, dtype=np.float64)) for v in values)


@pytest.mark.parametrize(
  'name,dataset,num_classes,size,batch_norm_decayed',
  [
    # The classic harness's filter ('batchnorm' not in the name) never
    # matched the official models' 'batch_normalization' variables.
    ('official_resnet18', 'imagenet', 1001, 32, True),
    # Its own models' batch norms it did leave out.
    ('resnet20', 'cifar10', 10, 32, False),
  ],
)
def test_l2_term_covers_batch_norm_only_for_official_models(
  name, dataset, num_classes, size, batch_norm_decayed
):
  l2, variables = _l2_term_and_variables(name, dataset, num_classes, size)
  decayed = [
    v
    for n, v in variables.items()
    if batch_norm_decayed or 'batchnorm' not in n
  ]
  batch_norm = [v for n, v in variables.items() if 'batchnorm' in n]
  # The batch-norm part (gamma starts at 1) tells the two apart.
  assert _half_sum_of_squares(batch_norm) > 100
  assert l2 == pytest.approx(_half_sum_of_squares(decayed), rel=1e-5)


def _classifier_weights(name, num_classes=1001):
  """The initial classifier weights of `name` built on 32x32 images."""
  graph = tf.Graph()
  with graph.as_default():
    models.create_model(name, 'imagenet').build(
      _images(2, 32, 'NHWC'), num_classes, is_training=True
    )
    weights = [
      v
      for v in tf1.global_variables()
      if v.shape.as_list()[-1:] == [num_classes] and v.shape.ndims == 2
    ]
    assert len(weights) == 1
    with tf1.Session(graph=graph) as sess:
      sess.run(weights[0].initializer)
      return sess.run(weights[0])


def test_official_classifier_draws_as_tf_layers_dense():
  # tf.layers.dense's default kernel: Glorot uniform, bound
  # sqrt(6 / (fan_in + fan_out)), standard deviation bound / sqrt(3).
  w = _classifier_weights('official_resnet18')
  bound = (6.0 / (512 + 1001)) ** 0.5
  assert np.abs(w).max() <= bound
  assert w.std() == pytest.approx(bound / 3**0.5, rel=0.02)


def test_classic_resnet_classifier_keeps_the_classic_layer():
  # The classic final layer: truncated normal (two standard deviations),
  # stddev sqrt(1 / fan_in).
  w = _classifier_weights('resnet50')
  stddev = (1.0 / 2048) ** 0.5
  assert np.abs(w).max() <= 2 * stddev
  assert w.std() < 0.9 * stddev  # truncation narrows it (0.88 x)
