"""The last classic flags of issue 14: preprocessing, freezing, LR device."""

import glob
import io
import math

import numpy as np
import pytest
import tensorflow as tf

from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.commands import make_fake_data
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.inputs import preprocessing
from tf_cnn_benchmarks.training import freezing

tf1 = tf.compat.v1

SIZE = 24
MEANS = np.array(preprocessing.CHANNEL_MEANS, np.float32)
# RGB -> YIQ (NTSC 1953), the matrix contrib's adjust_hsv_in_yiq used.
RGB_TO_YIQ = np.array(
  [[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]]
)


def numpy_hsv_in_yiq(rgb, delta_hue, saturation):
  """Reference: rotate (I, Q) by delta_hue, scale by saturation, in YIQ."""
  c, s = math.cos(delta_hue), math.sin(delta_hue)
  hsv = (
    np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
    * np.array([1, saturation, saturation])[:, None]
  )
  transform = np.linalg.inv(RGB_TO_YIQ) @ hsv @ RGB_TO_YIQ
  return rgb @ transform.T


def run(*tensors):
  with tf1.Session() as sess:
    return sess.run(list(tensors))


@pytest.mark.parametrize('delta_hue', [0.0, 0.3, -0.2 * math.pi])
@pytest.mark.parametrize('saturation', [0.5, 1.0, 1.37])
def test_hsv_in_yiq_matches_numpy(delta_hue, saturation):
  rgb = np.random.RandomState(0).uniform(size=(5, 7, 3)).astype(np.float32)
  with tf.Graph().as_default():
    (got,) = run(
      preprocessing.adjust_hsv_in_yiq(
        tf.constant(rgb), tf.constant(delta_hue), tf.constant(saturation)
      )
    )
  want = numpy_hsv_in_yiq(rgb.astype(np.float64), delta_hue, saturation)
  np.testing.assert_allclose(got, want, atol=2e-4)
  if delta_hue == 0.0 and saturation == 1.0:
    np.testing.assert_allclose(got, rgb, atol=2e-4)


def test_yiq_colour_step_draws_classic_ranges():
  # A pure-chroma probe: the drawn hue angle and saturation scale are
  # recovered from how (I, Q) of one pixel moved.
  grey_plus_i = np.array([[[0.6, 0.4, 0.3]]], np.float32)
  angles, scales = [], []
  with tf.Graph().as_default():
    image = tf.constant(grey_plus_i)
    outs = [
      preprocessing._colour_step(image, True, tf.constant([i, 7], tf.int64))
      for i in range(200)
    ]
    got = run(*outs)
  iq0 = (RGB_TO_YIQ @ grey_plus_i.reshape(3))[1:]
  for out in got:
    iq = (RGB_TO_YIQ @ out.reshape(3).astype(np.float64))[1:]
    angles.append(math.atan2(iq[1], iq[0]) - math.atan2(iq0[1], iq0[0]))
    scales.append(np.linalg.norm(iq) / np.linalg.norm(iq0))
  angles = np.array(angles)
  assert np.abs(angles).max() <= 0.2 * math.pi + 1e-3
  assert np.abs(angles).max() > 0.15 * math.pi  # the range is used
  assert 0.5 - 1e-3 <= min(scales) and max(scales) <= 1.5 + 1e-3
  assert min(scales) < 0.6 and max(scales) > 1.4


@pytest.fixture(scope='module')
def jpegs(tmp_path_factory):
  """(encoded JPEG, bboxes) of a few fake ImageNet training records."""
  path = str(tmp_path_factory.mktemp('imagenet'))
  make_fake_data.write_imagenet(
    path, num_train=6, num_validation=2, num_shards=1, image_size=80, seed=3
  )
  files = sorted(glob.glob(path + '/train-*'))
  raws = [raw for f in files for raw in tf1.io.tf_record_iterator(f)]
  with tf.Graph().as_default():
    parsed = [preprocessing.parse_imagenet_record(tf.constant(r)) for r in raws]
    got = run(*[(p.encoded, p.bboxes) for p in parsed])
  records = [tuple(pair) for pair in got]
  return records


def _train_images(records, style, distortions=False, seed=5):
  with tf.Graph().as_default():
    outs = [
      preprocessing.imagenet_train_image(
        tf.constant(encoded),
        tf.constant(bboxes),
        image_size=SIZE,
        resize_method='bilinear',
        distortions=distortions,
        seed=tf.constant([seed, i], tf.int64),
        index=tf.constant(i, tf.int64),
        style=style,
      )
      for i, (encoded, bboxes) in enumerate(records)
    ]
    return run(*outs)


def _eval_images(records, style):
  with tf.Graph().as_default():
    outs = [
      preprocessing.imagenet_eval_image(
        tf.constant(encoded),
        image_size=SIZE,
        resize_method='bilinear',
        index=tf.constant(i, tf.int64),
        style=style,
      )
      for i, (encoded, _) in enumerate(records)
    ]
    return run(*outs)


def test_fused_and_unfused_decode_give_the_same_crops(jpegs):
  # The fake set's JPEGs are chroma-subsampled (4:2:0): libjpeg upsamples a
  # pixel's chroma from its neighbours, which a cropped decode does not read
  # beyond the window, so the window's first and last columns may differ.
  with tf.Graph().as_default():
    pairs = []
    for i, (encoded, bboxes) in enumerate(jpegs):
      window = preprocessing.train_crop_window(
        tf.constant(encoded), tf.constant(bboxes), tf.constant([5, i], tf.int64)
      )
      pairs.append(
        [
          preprocessing.decode_window(tf.constant(encoded), window, fused)
          for fused in (True, False)
        ]
      )
    got = run(*pairs)
  for fused, sliced in got:
    assert fused.shape == sliced.shape
    np.testing.assert_array_equal(fused[:, 1:-1], sliced[:, 1:-1])
  fused = preprocessing.ImagenetStyle(fuse_decode_and_crop=True)
  unfused = preprocessing.ImagenetStyle(fuse_decode_and_crop=False)
  a, b = _train_images(jpegs, fused), _train_images(jpegs, unfused)
  for x, y in zip(a, b):
    assert np.abs(x - y).mean() < 0.01
  # Different seeds give different crops (the comparison can fail).
  assert not np.allclose(a[0], _train_images(jpegs, fused, seed=6)[0])


def test_decode_window_is_decode_then_slice():
  # Without chroma subsampling the cropped decode is exact.
  pixels = np.random.RandomState(1).randint(0, 256, (48, 64, 3), np.uint8)
  with tf.Graph().as_default():
    encoded = tf.io.encode_jpeg(
      tf.constant(pixels), quality=95, chroma_downsampling=False
    )
    fused, sliced, whole = run(
      *[
        preprocessing.decode_window(encoded, tf.constant(window), fused)
        for window, fused in (([8, 13, 24, 33], True), ([8, 13, 24, 33], False))
      ],
      tf.io.decode_jpeg(encoded, channels=3),
    )
  np.testing.assert_array_equal(fused, sliced)
  np.testing.assert_array_equal(fused, whole[8:32, 13:46])


@pytest.mark.parametrize('in_yiq', [True, False])
def test_distortions_stay_in_range_and_differ_by_colour_space(jpegs, in_yiq):
  style = preprocessing.ImagenetStyle(distort_color_in_yiq=in_yiq)
  plain = _train_images(jpegs, style)
  distorted = _train_images(jpegs, style, distortions=True)
  for x, y in zip(plain, distorted):
    assert -1.0 <= y.min() and y.max() <= 1.0
    assert not np.array_equal(x, y)
  other = preprocessing.ImagenetStyle(distort_color_in_yiq=not in_yiq)
  assert not np.allclose(
    distorted[0], _train_images(jpegs, other, distortions=True)[0]
  )


def test_ml_perf_subtracts_means_and_ignores_boxes(jpegs):
  plain = preprocessing.ImagenetStyle()
  ml_perf = preprocessing.ImagenetStyle(use_bboxes=False, mean_subtraction=True)
  no_boxes = [(encoded, np.zeros([0, 4], np.float32)) for encoded, _ in jpegs]
  want = [
    (x + 1.0) / 2.0 * 255.0 - MEANS for x in _train_images(no_boxes, plain)
  ]
  for got, expected in zip(_train_images(jpegs, ml_perf), want):
    np.testing.assert_allclose(got, expected, atol=1e-3)
  for got, symmetric in zip(
    _eval_images(jpegs, ml_perf), _eval_images(jpegs, plain)
  ):
    np.testing.assert_allclose(
      got, (symmetric + 1) / 2 * 255 - MEANS, atol=1e-3
    )
  # ml_perf's crops are not those a box would guide (the check can fail):
  # a small box in a corner pulls every crop onto that corner.
  corner = np.array([[0.0, 0.0, 0.1, 0.1]], np.float32)
  cornered = [(encoded, corner) for encoded, _ in jpegs]
  guided = _train_images(cornered, plain)
  for i, x in enumerate(_train_images(cornered, ml_perf)):
    np.testing.assert_allclose(x, want[i], atol=1e-3)
  assert any(
    not np.allclose((y + 1.0) / 2.0 * 255.0 - MEANS, w, atol=1)
    for y, w in zip(guided, want)
  )


def test_official_eval_is_aspect_resize_then_central_crop():
  # 300 x 600: shorter side to 256 -> 256 x 512, central 24 x 24 crop. The
  # left half is red, the right half blue: the centre column splits them.
  pixels = np.zeros((300, 600, 3), np.uint8)
  pixels[:, :300, 0] = 255
  pixels[:, 300:, 2] = 255
  style = preprocessing.ImagenetStyle(official=True)
  with tf.Graph().as_default():
    jpeg = tf.io.encode_jpeg(tf.constant(pixels), quality=100)
    (got,) = run(
      preprocessing.imagenet_eval_image(
        jpeg,
        image_size=SIZE,
        resize_method='nearest',
        index=tf.constant(0, tf.int64),
        style=style,
      )
    )
  assert got.shape == (SIZE, SIZE, 3)
  red = np.array([255.0, 0.0, 0.0]) - MEANS
  blue = np.array([0.0, 0.0, 255.0]) - MEANS
  np.testing.assert_allclose(got[:, : SIZE // 2 - 2].mean((0, 1)), red, atol=4)
  np.testing.assert_allclose(got[:, SIZE // 2 + 2 :].mean((0, 1)), blue, atol=4)


def test_official_train_ignores_distortions(jpegs):
  style = preprocessing.ImagenetStyle(official=True)
  a = _train_images(jpegs, style)
  b = _train_images(jpegs, style, distortions=True)
  for x, y in zip(a, b):
    np.testing.assert_array_equal(x, y)
  plain = _train_images(jpegs, preprocessing.ImagenetStyle())
  np.testing.assert_allclose(a[0], (plain[0] + 1) / 2 * 255 - MEANS, atol=1e-3)


def test_input_flags_reach_the_pipeline_style():
  p = params_lib.make_params(
    device='cpu',
    ml_perf=True,
    fuse_decode_and_crop=False,
    distort_color_in_yiq=False,
    input_preprocessor='official_models_imagenet',
  )
  assert preprocessing.imagenet_style(p) == preprocessing.ImagenetStyle(
    fuse_decode_and_crop=False,
    distort_color_in_yiq=False,
    use_bboxes=False,
    mean_subtraction=True,
    official=True,
  )


@pytest.mark.parametrize(
  'overrides, message',
  [
    (dict(input_preprocessor='bogus'), 'must be one of default, official'),
    (
      dict(input_preprocessor='official_models_imagenet', data_name='cifar10'),
      'with cifar10 data must be one of default',
    ),
    (
      dict(forward_only=True, freeze_when_forward_only=True, train_dir='/tmp'),
      '--freeze_when_forward_only: not with --train_dir',
    ),
  ],
)
def test_bad_values_are_one_line(overrides, message):
  with pytest.raises(params_lib.ParamsError, match=message):
    params_lib.make_plan(device='cpu', **overrides)


def test_flags_without_effect_warn():
  plan = params_lib.make_plan(
    device='cpu', ml_perf=True, freeze_when_forward_only=True
  )
  assert sorted(plan.warnings) == [
    'warning: --freeze_when_forward_only has no effect without --forward_only',
    'warning: --ml_perf has no effect: it changes ImageNet real data '
    '(--data_dir) only',
  ]


def _forward_params(**kw):
  return params_lib.make_params(
    device='cpu',
    model='trivial',
    forward_only=True,
    batch_size=4,
    num_gpus=2,
    variable_update='replicated',
    **kw,
  )


def test_frozen_graph_has_constants_and_the_same_loss():
  bench = benchmark_cnn.BenchmarkCNN(_forward_params(), out=io.StringIO())
  built = bench.build()
  config = bench._session_config()  # the run's two logical CPU devices
  with tf1.Session(graph=built.graph, config=config) as sess:
    sess.run(built.init_ops)
    sess.run(built.post_init_ops)
    loss, images = sess.run([built.loss, built.tower_inputs[0][0]])
  frozen = freezing.freeze(built, config)
  variable_ops = {'VariableV2', 'VarHandleOp'}
  assert sum(op.type in variable_ops for op in built.graph.get_operations()) > 1
  assert [
    op.name for op in frozen.graph.get_operations() if op.type in variable_ops
  ] == [built.global_step.op.name]
  with tf1.Session(graph=frozen.graph, config=config) as sess:
    sess.run(frozen.init_ops)
    assert sess.run(frozen.global_step) == 0
    frozen_loss, frozen_images = sess.run(
      [frozen.loss, frozen.tower_inputs[0][0]]
    )
  np.testing.assert_array_equal(frozen_images, images)
  np.testing.assert_allclose(frozen_loss, loss, rtol=1e-6)


def test_frozen_run_reports_the_unfrozen_losses():
  kw = dict(num_warmup_batches=0, num_batches=2, display_every=100)
  plain = benchmark_cnn.run_benchmark(_forward_params(**kw), out=io.StringIO())
  frozen = benchmark_cnn.run_benchmark(
    _forward_params(freeze_when_forward_only=True, **kw), out=io.StringIO()
  )
  np.testing.assert_allclose(frozen.losses, plain.losses, rtol=1e-6)
  assert frozen.params['freeze_when_forward_only']


def test_frozen_run_on_real_data_reads_the_same_batches(tmp_path):
  # The input iterators' initialisers survive the freeze.
  make_fake_data.write_imagenet(
    str(tmp_path), num_train=32, num_validation=4, num_shards=2, image_size=48
  )
  kw = dict(
    num_warmup_batches=0,
    num_batches=3,
    display_every=100,
    data_dir=str(tmp_path),
  )
  plain = benchmark_cnn.run_benchmark(_forward_params(**kw), out=io.StringIO())
  frozen = benchmark_cnn.run_benchmark(
    _forward_params(freeze_when_forward_only=True, **kw), out=io.StringIO()
  )
  assert len(set(plain.losses)) > 1  # different batches each step
  np.testing.assert_allclose(frozen.losses, plain.losses, rtol=1e-6)


def _lr_device(**kw):
  p = params_lib.make_params(
    device='cpu',
    model='trivial',
    batch_size=2,
    job_name='worker',
    ps_hosts='127.0.0.1:1',
    worker_hosts='127.0.0.1:2',
    variable_update='parameter_server',
    build_only=True,
    **kw,
  )
  bench = benchmark_cnn.BenchmarkCNN(p, out=io.StringIO())
  built = bench.build()
  return built.graph.get_tensor_by_name('learning_rate_schedule/value:0').device


def test_compute_lr_on_cpu_moves_the_schedule_off_the_ps():
  assert '/job:ps/' in _lr_device()
  on_cpu = _lr_device(compute_lr_on_cpu=True)
  assert '/job:worker/' in on_cpu and on_cpu.endswith('CPU:0')
