"""Tests for the models package: registry, builder, every model, counts, FLOPs.

Fast on CPU: batch 2, one training step per model, in NHWC and NCHW. Which
steps are marked slow (`pytest -m slow` runs them) is read from the models'
traits in models/declared.py: a 'slow' model's steps, and the NCHW step of
every model without the 'nchw' trait.
"""

import os

# NCHW convolutions / pooling on CPU need the oneDNN kernels; must be set
# before TensorFlow is imported.
os.environ.setdefault('TF_ENABLE_ONEDNN_OPTS', '1')

import importlib  # noqa: E402
import pathlib  # noqa: E402
import re  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import models  # noqa: E402
from models import declared  # noqa: E402
from models import initializers  # noqa: E402
from models import mobilenet  # noqa: E402
from models import mobilenet_v2  # noqa: E402
from models import registry  # noqa: E402
from models.builder import NetBuilder  # noqa: E402
from tf_cnn_benchmarks.training import towers  # noqa: E402

tf1 = tf.compat.v1

NUM_CLASSES = {'imagenet': 1001, 'cifar10': 10}
MODELS_DIR = pathlib.Path(models.__file__).parent


def _model_params(data_format='NHWC'):
  """One pytest.param per declared model, slow-marked by its traits: a
  'slow' model always, in NCHW every model without the 'nchw' trait."""
  params = []
  for d in sorted(declared.DECLARATIONS, key=lambda d: (d.name, d.dataset)):
    slow = d.has('slow') or (data_format == 'NCHW' and not d.has('nchw'))
    marks = [pytest.mark.slow] if slow else []
    params.append(
      pytest.param(
        d.name, d.dataset, marks=marks, id='%s-%s' % (d.dataset, d.name)
      )
    )
  return params


def _images(batch, size, data_format, seed=(7, 11)):
  shape = (
    [batch, size, size, 3] if data_format == 'NHWC' else [batch, 3, size, size]
  )
  return tf.random.stateless_uniform(shape, seed=seed, minval=-1.0, maxval=1.0)


def _train_once(
  model,
  *,
  data_format='NHWC',
  compute_dtype=tf.float32,
  image_size=None,
  batch=2,
):
  """Builds model + SGD step in a fresh graph, runs one step.

  Returns a dict with loss before/after the step, the logits, and the
  graph objects the callers inspect.
  """
  num_classes = NUM_CLASSES[model.dataset]
  graph = tf.Graph()
  with graph.as_default():
    images = _images(batch, image_size or model.image_size, data_format)
    labels = tf.constant([i % num_classes for i in range(batch)])
    out = model.build(
      images,
      num_classes,
      is_training=True,
      data_format=data_format,
      compute_dtype=compute_dtype,
    )
    loss = towers.cross_entropy(out.logits, labels)
    if out.aux_logits is not None:
      # As the harness does; also gives the head's variables gradients.
      loss += towers.AUX_LOSS_WEIGHT * towers.cross_entropy(
        out.aux_logits, labels
      )
    opt = tf1.train.GradientDescentOptimizer(0.01)
    grads_and_vars = opt.compute_gradients(loss)
    with tf.control_dependencies(out.update_ops):
      train_op = opt.apply_gradients(grads_and_vars)
    init = tf1.global_variables_initializer()
  with tf1.Session(graph=graph) as sess:
    sess.run(init)
    loss0, logits, _ = sess.run([loss, out.logits, train_op])
    loss1 = sess.run(loss)
  return dict(
    graph=graph,
    out=out,
    loss0=loss0,
    loss1=loss1,
    logits=logits,
    grads_and_vars=grads_and_vars,
  )


# --------------------------------------------------------------------------
# Registry


def _zoo_names(dataset):
  # Other test modules register throwaway 'test_*' models in the same process.
  return [n for n in models.names(dataset) if not n.startswith('test_')]


def test_registry_serves_the_declared_models():
  pairs = [(n, d) for n, d in models.list_models() if not n.startswith('test_')]
  assert pairs == declared.declared_models()
  for dataset in registry.DATASETS:
    assert _zoo_names(dataset) == sorted(
      {n for n, d in declared.declared_models() if d == dataset}
    )
  assert models.names() == sorted(
    set(models.names('imagenet')) | set(models.names('cifar10'))
  )
  pairs = models.list_models()
  assert pairs == sorted(pairs)
  assert set(pairs) == {
    (n, d) for d in ('imagenet', 'cifar10') for n in models.names(d)
  }


def test_registry_refuses_duplicates():
  with pytest.raises(ValueError, match='already registered'):
    models.register('resnet20', 'cifar10', lambda: None)
  with pytest.raises(ValueError, match='dataset'):
    models.register('new_model', 'mnist', lambda: None)


def test_registry_register_new_model(monkeypatch):
  # Work on a copy so the real registry is untouched after the test.
  monkeypatch.setattr(registry, '_REGISTRY', dict(registry._REGISTRY))
  models.register('tiny', 'cifar10', lambda: 'a model')
  assert models.create_model('tiny', 'cifar10') == 'a model'
  assert ('tiny', 'cifar10') in models.list_models()
  assert 'tiny' not in models.names('imagenet')


def test_unknown_model_lists_alternatives():
  with pytest.raises(models.UnknownModelError) as err:
    models.create_model('resnet21', 'cifar10')
  assert isinstance(err.value, ValueError)
  message = str(err.value)
  assert 'resnet21' in message
  for name in models.names('cifar10'):
    assert name in message
  assert 'resnet50' not in message  # an imagenet-only name
  with pytest.raises(models.UnknownModelError, match='dataset'):
    models.create_model('resnet50', 'mnist')


@pytest.mark.parametrize(
  'declaration',
  declared.DECLARATIONS,
  ids=lambda d: '%s-%s' % (d.dataset, d.name),
)
def test_created_model_is_its_declaration(declaration):
  """The declared family's class, with the declared attributes (no build)."""
  family = importlib.import_module('models.%s' % declaration.family)
  model = models.create_model(declaration.name, declaration.dataset)
  assert type(model) is getattr(family, declaration.constructor)
  assert isinstance(model, models.Model)
  assert (
    model.name,
    model.dataset,
    model.image_size,
    model.default_batch_size,
    model.default_learning_rate,
  ) == (
    declaration.name,
    declaration.dataset,
    declaration.image_size,
    declaration.default_batch_size,
    declaration.default_learning_rate,
  )
  # A fresh instance per call.
  assert model is not models.create_model(declaration.name, declaration.dataset)


def test_model_attributes():
  m = models.create_model('resnet50', 'imagenet')
  assert (
    m.name,
    m.dataset,
    m.image_size,
    m.default_batch_size,
    m.default_learning_rate,
  ) == ('resnet50', 'imagenet', 224, 64, 0.128)
  assert models.create_model('lenet', 'imagenet').image_size == 28


def test_classic_mobilenet_is_v2():
  v1, v2 = mobilenet.MobileNet, mobilenet_v2.MobileNetV2
  assert type(models.create_model('mobilenet', 'imagenet')) is v2
  assert type(models.create_model('mobilenet_v2', 'imagenet')) is v2
  assert type(models.create_model('mobilenet_v1', 'imagenet')) is v1


def test_models_package_is_self_contained():
  """models/ must not depend on the harness, Keras, tf.layers or TF privates."""
  forbidden = re.compile(
    r'tf_cnn_benchmarks|variable_mgr|keras|compat\.v1\.layers|tf1\.layers|'
    r'tensorflow\.python|rnn_cell'
  )
  for path in MODELS_DIR.glob('*.py'):
    for line in path.read_text().splitlines():
      code = line.split('#')[0]
      if 'import' in code or 'tf.' in code or 'tf1.' in code:
        assert not forbidden.search(code), '%s: %s' % (path.name, line)


# --------------------------------------------------------------------------
# One training step of every model


@pytest.mark.parametrize('name,dataset', _model_params())
def test_one_training_step_nhwc(name, dataset):
  model = models.create_model(name, dataset)
  result = _train_once(model)
  num_classes = NUM_CLASSES[dataset]
  assert result['logits'].shape == (2, num_classes)
  assert result['logits'].dtype == np.float32
  assert np.isfinite(result['loss0']) and np.isfinite(result['loss1'])
  assert np.all(np.isfinite(result['logits']))
  # Every trainable variable gets a gradient (the auxiliary head's through
  # the auxiliary loss).
  assert all(g is not None for g, _ in result['grads_and_vars'])
  aux = result['out'].aux_logits
  if declared.by_key()[name, dataset].has('aux'):
    assert aux is not None and aux.shape.as_list() == [2, num_classes]
  else:
    assert aux is None
  # Batch-norm updates come back in the output, not in the collection.
  with result['graph'].as_default():
    assert tf1.get_collection(tf1.GraphKeys.UPDATE_OPS) == []
    num_bn = len(
      [v for v in tf1.global_variables() if v.name.endswith('moving_mean:0')]
    )
  assert len(result['out'].update_ops) == 2 * num_bn


@pytest.mark.parametrize('name,dataset', _model_params('NCHW'))
def test_one_training_step_nchw(name, dataset):
  model = models.create_model(name, dataset)
  result = _train_once(model, data_format='NCHW')
  assert result['logits'].shape == (2, NUM_CLASSES[dataset])
  assert np.isfinite(result['loss0']) and np.isfinite(result['loss1'])
  assert np.all(np.isfinite(result['logits']))


@pytest.mark.parametrize(
  'name,dataset,image_size,is_training',
  [
    ('resnet20', 'cifar10', 32, True),
    ('resnet20_v2', 'cifar10', 32, False),
    # Fully convolutional, so a small input keeps these cheap.
    ('resnet50_v1.5', 'imagenet', 64, True),
    ('resnet50_v2', 'imagenet', 64, False),
    # Depthwise convolutions; concatenation on the channel axis.
    ('mobilenet_v2', 'imagenet', 64, True),
    ('densenet40_k12', 'cifar10', 32, False),
    # Separable convolutions and the pixel-shifted factorised reduction
    # (~20 s: NASNet's graph is large whatever the image size).
    pytest.param('nasnet', 'imagenet', 96, False, marks=pytest.mark.slow),
  ],
)
def test_nchw_matches_nhwc(name, dataset, image_size, is_training):
  """Same seed and names => same weights, so both layouts give the same logits
  (models without a flatten, whose feature order depends on the layout)."""
  model = models.create_model(name, dataset)
  num_classes = NUM_CLASSES[dataset]
  logits = {}
  for data_format in ('NHWC', 'NCHW'):
    graph = tf.Graph()
    with graph.as_default():
      images = _images(2, image_size, 'NHWC')
      if data_format == 'NCHW':
        images = tf.transpose(images, [0, 3, 1, 2])
      out = model.build(
        images, num_classes, is_training=is_training, data_format=data_format
      )
      init = tf1.global_variables_initializer()
    with tf1.Session(graph=graph) as sess:
      sess.run(init)
      logits[data_format] = sess.run(out.logits)
  # Different conv kernels per layout round differently; batch-statistics BN
  # over tiny late-stage maps amplifies that, hence the loose tolerance (a
  # layout bug gives O(1) differences).
  np.testing.assert_allclose(
    logits['NHWC'], logits['NCHW'], rtol=1e-3, atol=2e-3
  )


@pytest.mark.parametrize('compute_dtype', [tf.float16, tf.bfloat16])
@pytest.mark.parametrize(
  'name,dataset',
  [
    ('resnet20', 'cifar10'),
    ('resnet20_v2', 'cifar10'),
    ('alexnet', 'cifar10'),  # LRN has no 16-bit GPU kernel: runs in float32
    ('lenet', 'imagenet'),
  ],
)
def test_16bit_compute(name, dataset, compute_dtype):
  model = models.create_model(name, dataset)
  result = _train_once(model, compute_dtype=compute_dtype)
  assert result['out'].logits.dtype == compute_dtype
  assert np.isfinite(result['loss0']) and np.isfinite(result['loss1'])
  with result['graph'].as_default():
    variables = tf1.global_variables()
  # Variables, hence their gradients, stay float32.
  assert variables and all(v.dtype.base_dtype == tf.float32 for v in variables)
  assert all(
    g.dtype.base_dtype == tf.float32 for g, _ in result['grads_and_vars']
  )


def test_inference_build_has_no_update_ops_or_dropout():
  graph = tf.Graph()
  with graph.as_default():
    images = _images(2, 227, 'NHWC')
    out = models.create_model('alexnet', 'imagenet').build(
      images, 1001, is_training=False
    )
    assert out.update_ops == ()
    op_types = {op.type for op in graph.get_operations()}
  # Dropout would add a stateful random op; inference must be deterministic.
  assert not [
    t for t in op_types if 'Random' in t and not t.startswith('Stateless')
  ]
  graph = tf.Graph()
  with graph.as_default():
    models.create_model('alexnet', 'imagenet').build(
      _images(2, 227, 'NHWC'), 1001, is_training=True
    )
    assert 'RandomUniform' in {op.type for op in graph.get_operations()}

  graph = tf.Graph()
  with graph.as_default():
    out = models.create_model('resnet20', 'cifar10').build(
      _images(2, 32, 'NHWC'), 10, is_training=False
    )
    assert out.update_ops == ()
    assert isinstance(out, models.ModelOutput) and out.aux_logits is None


class _TwoHeads(models.Model):
  """A made-up trunk with an auxiliary head (no declared model has one: the
  classic harness's inception3 and NASNets built none)."""

  def body(self, net):
    trunk = net.conv(4, 3, 2)
    features = net.flatten()
    net.set_top(trunk)
    net.conv(4, 3, 1)
    net.flatten()
    return features


def test_a_trunk_returning_features_gets_a_weighted_auxiliary_loss():
  model = _TwoHeads('two_heads', 'cifar10', 8, 2, 0.1)
  graph = tf.Graph()
  with graph.as_default():
    labels = tf.constant([0, 1])
    out = model.build(_images(2, 8, 'NHWC'), 10, is_training=True)
    plain = towers.cross_entropy(out.logits, labels)
    aux = towers.cross_entropy(out.aux_logits, labels)
    total = towers._base_loss(out, labels)
    init = tf1.global_variables_initializer()
  with tf1.Session(graph=graph) as sess:
    sess.run(init)
    plain, aux, total = sess.run([plain, aux, total])
  assert out.aux_logits.shape.as_list() == [2, 10]
  assert total == pytest.approx(plain + 0.4 * aux, rel=1e-6)
  assert aux > 0.0


# --------------------------------------------------------------------------
# Deterministic initialisation


def _initial_values(graph, scopes):
  """Runs the initialisers; returns {scope: {name relative to scope: value}}.

  '' stands for variables built with no outer scope.
  """
  with graph.as_default():
    init = tf1.global_variables_initializer()
    variables = tf1.global_variables()
  with tf1.Session(graph=graph) as sess:
    sess.run(init)
    values = sess.run({v.name: v for v in variables})
  by_scope = {}
  for scope in scopes:
    prefix = '%s/' % scope if scope else ''
    others = tuple('%s/' % s for s in scopes if s and s != scope)
    by_scope[scope] = {
      name[len(prefix) :]: value
      for name, value in values.items()
      if name.startswith(prefix)
      and not name.startswith(others)
      and name != 'unrelated:0'
    }
  return by_scope


def _build_under(scope, name, dataset, seed=1234):
  model = models.create_model(name, dataset)
  images = _images(2, model.image_size, 'NHWC')
  if scope:
    with tf1.variable_scope(scope):
      model.build(images, NUM_CLASSES[dataset], seed=seed)
  else:
    model.build(images, NUM_CLASSES[dataset], seed=seed)


@pytest.mark.parametrize(
  'name,dataset', [('resnet20', 'cifar10'), ('alexnet', 'cifar10')]
)
def test_initial_values_depend_only_on_seed_and_relative_name(name, dataset):
  graph_a = tf.Graph()
  with graph_a.as_default():
    _build_under('v0', name, dataset)
    _build_under('v1', name, dataset)
  values_a = _initial_values(graph_a, ['v0', 'v1'])

  # Another graph: unrelated random ops first, other scopes, reverse order,
  # and a build with no outer scope at all.
  graph_b = tf.Graph()
  with graph_b.as_default():
    tf.random.uniform([3], seed=5)
    tf1.get_variable('unrelated', [4], initializer=tf1.ones_initializer())
    _build_under('tower_0', name, dataset)
    _build_under('', name, dataset)
  values_b = _initial_values(graph_b, ['tower_0', ''])

  reference = values_a['v0']
  assert len(reference) >= 10
  for values in (values_a['v1'], values_b['tower_0'], values_b['']):
    assert sorted(values) == sorted(reference)
    for var_name, value in reference.items():
      np.testing.assert_array_equal(values[var_name], value, err_msg=var_name)


def test_initial_values_change_with_seed_and_name():
  graph = tf.Graph()
  with graph.as_default():
    _build_under('a', 'resnet20', 'cifar10', seed=1234)
    _build_under('b', 'resnet20', 'cifar10', seed=4321)
  values = _initial_values(graph, ['a', 'b'])
  a, b = values['a'], values['b']
  # Two kernels of the same shape inside one model differ ...
  assert a['block0/conv1/kernel:0'].shape == a['block0/conv2/kernel:0'].shape
  assert not np.array_equal(
    a['block0/conv1/kernel:0'], a['block0/conv2/kernel:0']
  )
  # ... and a different seed gives different kernels, same constants.
  assert not np.array_equal(a['conv0/kernel:0'], b['conv0/kernel:0'])
  np.testing.assert_array_equal(
    a['conv0/batchnorm0/gamma:0'], b['conv0/batchnorm0/gamma:0']
  )


# --------------------------------------------------------------------------
# Builder details


def test_variable_names_and_batch_norm_variables():
  graph = tf.Graph()
  with graph.as_default(), tf1.variable_scope('tower_0'):
    models.create_model('resnet20', 'cifar10').build(_images(2, 32, 'NHWC'), 10)
    trainable = {v.name for v in tf1.trainable_variables()}
    everything = {v.name for v in tf1.global_variables()}
  assert 'tower_0/conv0/kernel:0' in trainable
  assert 'tower_0/affine0/weights:0' in trainable
  assert 'tower_0/affine0/biases:0' in trainable
  bn_trainable = {n for n in trainable if 'batchnorm' in n}
  assert bn_trainable and all(
    n.endswith(('gamma:0', 'beta:0')) for n in bn_trainable
  )
  moving = everything - trainable
  assert moving and all('batchnorm' in n and 'moving_' in n for n in moving)


def test_batch_norm_moving_average_update():
  graph = tf.Graph()
  with graph.as_default():
    x = tf.constant(
      np.arange(2 * 3 * 3 * 2, dtype=np.float32).reshape(2, 3, 3, 2)
    )
    net = NetBuilder(x, is_training=True, batch_norm_decay=0.9)
    net.batch_norm()
    with tf1.variable_scope('batchnorm0', reuse=True):
      mean = tf1.get_variable('moving_mean')
      var = tf1.get_variable('moving_variance')
    init = tf1.global_variables_initializer()
  assert len(net.update_ops) == 2
  with tf1.Session(graph=graph) as sess:
    sess.run(init)
    sess.run(net.update_ops)
    mean_value, var_value = sess.run([mean, var])
  flat = np.arange(36, dtype=np.float64).reshape(-1, 2)
  np.testing.assert_allclose(mean_value, 0.1 * flat.mean(0), rtol=1e-5)
  # Moving variance tracks the unbiased batch variance.
  np.testing.assert_allclose(
    var_value, 0.9 + 0.1 * flat.var(0, ddof=1), rtol=1e-5
  )


def test_initializer_statistics():
  graph = tf.Graph()
  with graph.as_default():
    shape = [3, 3, 64, 128]
    fan_in, fan_avg = 3 * 3 * 64, (3 * 3 * 64 + 3 * 3 * 128) / 2
    samples = {
      'vs': (
        initializers.variance_scaling()(shape, tf.float32, (1, 2)),
        (1 / fan_in) ** 0.5,
        2 * (1 / fan_in) ** 0.5 / 0.8796,
      ),
      'he': (
        initializers.he_normal()(shape, tf.float32, (1, 3)),
        (2 / fan_in) ** 0.5,
        None,
      ),
      'glorot': (
        initializers.glorot_uniform()(shape, tf.float32, (1, 4)),
        (1 / fan_avg) ** 0.5,
        (3 / fan_avg) ** 0.5,
      ),
      'tn': (
        initializers.truncated_normal(0.04)(shape, tf.float32, (1, 5)),
        0.04 * 0.8796,
        0.08,
      ),
    }
    again = initializers.truncated_normal(0.04)(shape, tf.float32, (1, 5))
  with tf1.Session(graph=graph) as sess:
    values = sess.run({k: v[0] for k, v in samples.items()})
    assert np.array_equal(sess.run(again), values['tn'])
  for key, (_, std, bound) in samples.items():
    assert values[key].std() == pytest.approx(std, rel=0.03), key
    assert abs(values[key].mean()) < 0.05 * std, key
    if bound is not None:
      assert np.abs(values[key]).max() <= bound * 1.0001, key
