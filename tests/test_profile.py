"""The host profile (tf_cnn_benchmarks/scaling): tensors, times, chunks.

Short local runs of tiny models (no transport run here: test_transport.py
measures those); no assertion on how long anything took.
"""

import pytest
import tensorflow as tf

import models
from tf_cnn_benchmarks.config import datasets
from tf_cnn_benchmarks.scaling.model import profile_format
from tf_cnn_benchmarks.scaling.profile import profile
from tf_cnn_benchmarks.scaling.profile import profile_chunks
from tf_cnn_benchmarks.scaling.profile import profile_concurrent
from variable_mgr import allreduce_spec

tf1 = tf.compat.v1

# Two models of the registry, on their own datasets.
MODELS = (('trivial', 'cifar10'), ('lenet', 'imagenet'))


@pytest.fixture(scope='module')
def profiles():
  """{model: Profile} of a few steps each, without transports."""
  return {
    name: profile.measure_profile(
      model=name,
      data_name=data,
      batch_size=4,
      device='cpu',
      num_steps=3,
      num_traced=2,
      transport_sizes=(),
      concurrent_copies=(),
    )
    for name, data in MODELS
  }


def _model_variables(name, data_name):
  """[(name, shape, bytes)] of the model built alone, in creation order."""
  model = models.create_model(name, data_name)
  dataset = datasets.get(data_name)
  with tf.Graph().as_default():
    size = model.image_size
    images = tf1.placeholder(tf.float32, [2, size, size, dataset.depth])
    model.build(images, dataset.num_classes, is_training=True)
    return [
      (v.op.name, [int(n) for n in v.shape], v.shape.num_elements() * 4)
      for v in tf1.trainable_variables()
    ]


@pytest.mark.parametrize('name,data_name', MODELS)
def test_gradients_are_the_model_variables(profiles, name, data_name):
  got = [(g.name, list(g.shape), g.bytes) for g in profiles[name].gradients]
  assert got == _model_variables(name, data_name)
  assert all(g.dtype == 'float32' for g in profiles[name].gradients)


@pytest.mark.parametrize('name', [m for m, _ in MODELS])
def test_ready_times_lie_within_the_step(profiles, name):
  p = profiles[name]
  c = p.compute
  assert c.step_ms_p10 <= c.step_ms <= c.step_ms_p90
  for g in p.gradients:
    assert 0.0 <= g.ready_ms <= c.step_ms, g
  assert c.forward_ms >= 0 and c.backward_ms >= 0
  assert c.forward_ms + c.backward_ms <= c.step_ms * (1 + 1e-9)
  assert c.cores_busy > 0


@pytest.mark.parametrize('name', [m for m, _ in MODELS])
def test_chunk_lists_sum_to_the_gradient_bytes(profiles, name):
  p = profiles[name]
  total = p.total_gradient_bytes
  assert 'repacking=0' in p.chunks
  for key, chunks in p.chunks.items():
    assert sum(chunks) == total, key
  for key, algorithms in p.chunk_algorithms.items():
    assert len(algorithms) == len(p.chunks[key]), key
  assert p.chunks['repacking=0'] == tuple(g.bytes for g in p.gradients)
  assert len(p.chunks['repacking=2']) == 2


def test_every_registered_algorithm_has_chunk_lists(profiles):
  p = profiles['lenet']
  for name in allreduce_spec.algorithm_names():
    for packing in profile_chunks.PACKINGS:
      key = 'spec=%s' % name
      key += '' if packing == 'repacking=0' else ',' + packing
      assert set(p.chunk_algorithms[key]) == {name}, key


def test_size_ranges_pick_the_algorithm_per_chunk(profiles):
  p = profiles['lenet']
  key = 'spec=pscpu:32k:xring'
  for nbytes, alg in zip(p.chunks[key], p.chunk_algorithms[key]):
    assert alg == ('pscpu' if nbytes // 4 <= 32 * 1024 else 'xring')
  assert set(p.chunk_algorithms[key]) == {'pscpu', 'xring'}


def test_small_gradient_packs_follow_the_harness_grouping():
  # Four small float32 tensors and a big one between them.
  gradients = [
    ((4,), 'float32'),
    ((8,), 'float32'),
    ((100000,), 'float32'),
    ((2,), 'float32'),
    ((3,), 'float32'),
  ]
  chunks, _ = profile_chunks.measure_chunks(
    gradients,
    specs=('xring',),
    packings={'small': {'agg_small_grads_max_bytes': 64}},
  )
  assert chunks['small'] == (48, 400000, 20)


def test_profile_round_trips_through_json(profiles, tmp_path):
  path = str(tmp_path / 'p.json')
  for p in profiles.values():
    profile_format.save_profile(p, path)
    assert profile_format.load_profile(path) == p


def test_summary_names_the_figures(profiles):
  lines = profile.summary_lines(profiles['trivial'])
  assert lines[1].startswith('run: trivial cifar10 batch 4')
  assert any(line.startswith('gradients: 6 tensors') for line in lines)


@pytest.mark.slow  # ~20 s; tests/test_profile_format.py fakes the copies
def test_concurrent_copies_run_the_benchmark():
  # Real copies of the local benchmark, 2 at once: whatever this machine's
  # speedup, it is a positive figure per k (no timing asserted).
  got = profile_concurrent.measure_speedups(
    {'model': 'trivial', 'data_name': 'cifar10', 'batch_size': 4},
    cores=2,
    copies=(2,),
    num_steps=2,
    timeout=300,
    rounds=1,
  )
  assert [k for k, _ in got] == [2]
  assert got[0][1] > 0
