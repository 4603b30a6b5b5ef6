"""Models: parameter counts and FLOPs against published figures (split from
test_models.py, which builds and trains every model)."""

import os

# NCHW convolutions / pooling on CPU need the oneDNN kernels; must be set
# before TensorFlow is imported.
os.environ.setdefault('TF_ENABLE_ONEDNN_OPTS', '1')

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import models  # noqa: E402
from tests.test_models import _images  # noqa: E402

tf1 = tf.compat.v1


# --------------------------------------------------------------------------
# Parameter counts and FLOPs


@pytest.mark.parametrize(
  'name,dataset,num_classes,expected',
  [
    # torchvision resnet50 / resnet101 / resnet152 "num_params" (same v1
    # architecture; v1.5 moves a stride, no parameters).
    ('resnet50', 'imagenet', 1000, 25_557_032),
    ('resnet50_v1.5', 'imagenet', 1000, 25_557_032),
    pytest.param(
      'resnet101', 'imagenet', 1000, 44_549_160, marks=pytest.mark.slow
    ),
    pytest.param(
      'resnet152', 'imagenet', 1000, 60_192_808, marks=pytest.mark.slow
    ),
    # He et al. 2015, Table 6: ResNet-20 "0.27M", ResNet-110 "1.7M". Exactly,
    # for the option-A (parameter-free shortcut) network built here:
    #   stem conv 3*3*3*16 + BN 2*16                         =     464
    #   stage 1: 6 convs 3*3*16*16 + 6 BN 2*16               =  14,016
    #   stage 2: 3*3*16*32 + 5 * 3*3*32*32 + 6 BN 2*32       =  51,072
    #   stage 3: 3*3*32*64 + 5 * 3*3*64*64 + 6 BN 2*64       = 203,520
    #   classifier 64*10 + 10                                =     650
    ('resnet20', 'cifar10', 10, 269_722),
    ('resnet110', 'cifar10', 10, 1_727_962),
    # v2 swaps each block's second BN (over the block's output width) for a
    # pre-activation BN over its input width, and adds a final BN: the two
    # downsampling blocks lose 2*(32-16) and 2*(64-32), the final BN adds 2*64:
    #   269,722 - 32 - 64 + 128 = 269,754.
    ('resnet20_v2', 'cifar10', 10, 269_754),
    # Classic one-tower AlexNet (conv 64-192-384-384-256, fc 4096-4096), 1000
    # classes: 23,296 + 307,392 + 663,936 + 1,327,488 + 884,992 (convs)
    # + 37,752,832 + 16,781,312 + 4,097,000 (fc) = 61,838,248.
    ('alexnet', 'imagenet', 1000, 61_838_248),
    # torchvision's alexnet (61,100,840) has 256 filters in conv4: 3*3*384*256
    # fewer weights in conv4 and 3*3*128*256 fewer in conv5, 128 fewer biases.
    (
      'alexnet',
      'imagenet',
      1000,
      61_100_840 + 9 * 128 * 384 + 9 * 128 * 256 + 128,
    ),
    # lenet: 5*5*3*32+32 + 5*5*32*64+64 + 3136*512+512 + 512*1001+1001.
    ('lenet', 'imagenet', 1001, 2_432 + 51_264 + 1_606_144 + 513_513),
    # torchvision vgg11 / vgg16 / vgg19 "num_params" (Simonyan & Zisserman
    # 2014, Table 2: 133M / 138M / 144M).
    ('vgg11', 'imagenet', 1000, 132_863_336),
    ('vgg16', 'imagenet', 1000, 138_357_544),
    ('vgg19', 'imagenet', 1000, 143_667_240),
    # GoogLeNet: torchvision's googlenet has 6,624,904 (aux heads dropped) but
    # differs from the paper (and from the classic harness, which we follow)
    # twice: its "5x5" branch is a 3x3 conv (a documented torchvision quirk),
    # and it uses BN (gamma + beta) where we have a conv bias. Over the nine
    # modules the 5x5 convs have sum(reduce * out) = 23,808, so 16 * 23,808
    # more weights here; the 7,280 conv channels carry 1 bias instead of 2 BN
    # parameters. (Paper, Table 1: ~6.8M weights, rounded per layer.)
    ('googlenet', 'imagenet', 1000, 6_624_904 + 16 * 23_808 - 7_280),
    # OverFeat fast (Sermanet et al. 2013, Table 1), weights + biases:
    # convs 34,944 + 614,656 + 1,180,160 + 4,719,616 + 9,438,208,
    # fc 36,864*3,072+3,072 + 3,072*4,096+4,096 + 4,096*1,000+1,000.
    (
      'overfeat',
      'imagenet',
      1000,
      15_987_584 + 113_249_280 + 12_587_008 + 4_097_000,
    ),
    # DenseNet (L=40, k=12), Huang et al. 2016, Table 2: "1.0M"; exactly, for
    # the classic harness's layout (conv biases, transition width unchanged):
    ('densenet40_k12', 'cifar10', 10, 1_020_634),
  ],
)
def test_param_count(name, dataset, num_classes, expected):
  model = models.create_model(name, dataset)
  assert models.model_param_count(model, num_classes) == expected


def _densenet_params(layers_per_block, growth, num_classes=10):
  """Exact DenseNet-(3n+4, k) count for the layout in models/densenet.py."""
  channels = 16
  total = 3 * 3 * 3 * 16 + 16  # stem conv
  for block in range(3):
    for _ in range(layers_per_block):
      total += 2 * channels + 9 * channels * growth + growth  # BN, conv
      channels += growth
    if block < 2:
      total += 2 * channels + channels * channels + channels  # transition
  return total + 2 * channels + channels * num_classes + num_classes


def test_densenet_param_formula():
  assert _densenet_params(12, 12) == 1_020_634
  # Huang et al. 2016, Table 2: DenseNet (L=100, k=12) 7.0M, (L=100, k=24)
  # 27.2M.
  assert _densenet_params(32, 12) == pytest.approx(7.0e6, rel=0.01)
  assert _densenet_params(32, 24) == pytest.approx(27.2e6, rel=0.01)


def _inference_counts(name, num_classes=1000):
  """(trainable, all parameters, forward FLOPs) of the inference network
  from one build; 'all' counts batch-norm moving means and variances, as
  Keras's "Total params" does."""
  graph = tf.Graph()
  with graph.as_default():
    model = models.create_model(name, 'imagenet')
    size = model.image_size
    model.build(tf.zeros([1, size, size, 3]), num_classes, is_training=False)
    trainable = sum(v.shape.num_elements() for v in tf1.trainable_variables())
    everything = sum(v.shape.num_elements() for v in tf1.global_variables())
  return (
    trainable,
    everything,
    models.count_forward_flops(graph.get_operations()),
  )


@pytest.mark.parametrize(
  'name,trainable,total,macs',
  [
    # Parameters: keras-applications InceptionV3 (include_top, 1000 classes):
    # 23,851,784 total / 23,817,352 trainable. Keras's BN has no gamma
    # (scale=False) like the classic harness's, and no auxiliary head: ours is
    # built only for training, so the inference network matches exactly.
    # Multiply-adds: Zoph et al. 2017 (NASNet), Table 2: Inception-v3 5.72B.
    ('inception3', 23_817_352, 23_851_784, 5.72e9),
    # keras-applications MobileNet (alpha 1.0, 224): 4,253,864 total /
    # 4,231,976 trainable. Howard et al. 2017, Table 1: 4.2M, 569M mult-adds.
    ('mobilenet_v1', 4_231_976, 4_253_864, 569e6),
    # keras-applications MobileNetV2 (alpha 1.0, 224): 3,538,984 total;
    # trainable 3,504,872 = torchvision mobilenet_v2. Sandler et al. 2018,
    # Table 4: 3.4M, 300M mult-adds.
    ('mobilenet_v2', 3_504_872, 3_538_984, 300e6),
    # The classic --model=mobilenet is MobileNet V2 as TF-slim built it:
    # slim's logits layer (1x1 conv 1280 -> 1001 with bias) under the
    # classifier, 1001 -> 1000 here, in place of 1280 -> 1000.
    (
      'mobilenet',
      3_504_872 - 1281 * 1000 + 1281 * 1001 + 1002 * 1000,
      3_538_984 - 1281 * 1000 + 1281 * 1001 + 1002 * 1000,
      300e6 + 1001 * 1000,
    ),
    # keras-applications NASNetMobile: 5,326,716 total (it has no auxiliary
    # head either). Ours, like the classic harness's, has a conv bias per BN
    # channel instead of keras's BN gamma: the same counts. Zoph et al.
    # 2017, Table 2: NASNet-A (4 @ 1056) 5.3M, 564M mult-adds.
    ('nasnet', 5_289_978, 5_326_716, 564e6),
    # timm's inception_v4 has 42,679,816, with a BN gamma (ours, like the
    # classic harness's, has none): minus one gamma per BN channel (31,584).
    # Zoph et al. 2017, Table 2: Inception-v4 42.7M, 12.27B mult-adds.
    (
      'inception4',
      42_679_816 - 31_584,
      42_679_816 - 31_584 + 2 * 31_584,
      12.27e9,
    ),
    # keras-applications NASNetLarge: 88,949,818 total. Zoph et al. 2017,
    # Table 2: NASNet-A (6 @ 4032) 88.9M, 23.8B mult-adds.
    pytest.param(
      'nasnetlarge', 88_753_150, 88_949_818, 23.8e9, marks=pytest.mark.slow
    ),
  ],
)
def test_counts_match_published(name, trainable, total, macs):
  params, everything, flops = _inference_counts(name)
  assert (params, everything) == (trainable, total)
  assert flops == pytest.approx(2 * macs, rel=0.05)


def test_resnet50_flops():
  """ResNet-50 forward: 2 x multiply-adds.

  v1 (stride in the 1x1): He et al. 2015, Table 1, "3.8 x 10^9 FLOPs"
  (multiply-adds). v1.5 (stride in the 3x3): torchvision's ResNet50 (a
  v1.5) lists 4.09 GFLOPS (multiply-adds), i.e. the often-quoted ~4.1e9.
  """
  v1 = models.model_flops_per_image(
    models.create_model('resnet50', 'imagenet'), 1000
  )
  v15 = models.model_flops_per_image(
    models.create_model('resnet50_v1.5', 'imagenet'), 1000, data_format='NCHW'
  )
  assert v1 == pytest.approx(2 * 3.8e9, rel=0.05)
  assert v15 == pytest.approx(2 * 4.1e9, rel=0.05)
  assert v15 > v1


def test_vgg16_flops():
  """Simonyan & Zisserman's VGG-16: ~15.5 x 10^9 multiply-adds (the figure
  torchvision lists as 15.47 GFLOPS)."""
  flops = models.model_flops_per_image(
    models.create_model('vgg16', 'imagenet'), 1000
  )
  assert flops == pytest.approx(2 * 15.5e9, rel=0.05)


def test_depthwise_convolutions_are_counted():
  """MobileNet's depthwise layers, exactly: sum of H_out * W_out * C * 9."""
  graph = tf.Graph()
  with graph.as_default():
    models.create_model('mobilenet_v1', 'imagenet').build(
      tf.zeros([1, 224, 224, 3]), 1000, is_training=False
    )
  depthwise = [
    op for op in graph.get_operations() if op.type == 'DepthwiseConv2dNative'
  ]
  assert len(depthwise) == 13
  # (output side, channels) of the 13 depthwise layers.
  layers = (
    [(112, 32), (56, 64), (56, 128), (28, 128), (28, 256), (14, 256)]
    + [(14, 512)] * 5
    + [(7, 512), (7, 1024)]
  )
  assert models.count_forward_flops(depthwise) == 2 * sum(
    side * side * channels * 9 for side, channels in layers
  )


def test_model_stats_builds_once_and_agrees():
  model = models.create_model('resnet20', 'cifar10')
  built = []
  original = model.build
  model.build = lambda *a, **k: built.append(1) or original(*a, **k)
  params, flops = models.model_stats(model, 10)
  assert len(built) == 1
  model.build = original
  assert params == models.model_param_count(model, 10) == 269_722
  assert flops == models.model_flops_per_image(model, 10)


def _trainable_names(name, image_size, is_training):
  model = models.create_model(name, 'imagenet')
  graph = tf.Graph()
  with graph.as_default():
    out = model.build(
      _images(2, image_size, 'NHWC'), 1001, is_training=is_training
    )
    return out, {v.op.name for v in tf1.trainable_variables()}


def test_inception3_trains_without_an_auxiliary_head_as_classic():
  """The classic harness's inception3 never built the paper's auxiliary
  classifier (Inceptionv3Model(auxiliary=False)): training builds the same
  variables as inference."""
  out, trained = _trainable_names('inception3', 299, True)
  _, inferred = _trainable_names('inception3', 299, False)
  assert out.aux_logits is None
  assert trained == inferred


@pytest.mark.slow
def test_nasnet_trains_without_an_auxiliary_head_as_classic():
  """The classic harness's nasnet built slim's NASNet without num_classes,
  so without its auxiliary head (slim's use_aux_head needs num_classes):
  training builds the same variables as inference."""
  out, trained = _trainable_names('nasnet', 224, True)
  _, inferred = _trainable_names('nasnet', 224, False)
  assert out.aux_logits is None
  assert trained == inferred


def test_count_forward_flops_exact():
  graph = tf.Graph()
  with graph.as_default():
    x = tf.zeros([1, 8, 8, 3])
    # MACs: 8*8*4 outs * 27.
    conv = tf.nn.conv2d(x, tf.zeros([3, 3, 3, 4]), 1, 'SAME')
    # 4*4*4 outs * 3.
    conv_s2 = tf.nn.conv2d(x, tf.zeros([1, 1, 3, 4]), 2, 'VALID')
    # 8*8*6 * 9.
    dw = tf.nn.depthwise_conv2d(x, tf.zeros([3, 3, 3, 2]), [1, 1, 1, 1], 'SAME')
    a = tf.zeros([2, 5])
    # 2*7 * 5.
    mm = tf.linalg.matmul(a, tf.zeros([5, 7]))
    # 2*7 * 5.
    mm_t = tf.linalg.matmul(
      tf.zeros([5, 2]), tf.zeros([7, 5]), transpose_a=True, transpose_b=True
    )
    # 4*2*3 * 5.
    bmm = tf.linalg.matmul(tf.zeros([4, 2, 5]), tf.zeros([4, 5, 3]))
    total = sum(tf.reduce_sum(t) for t in (conv, conv_s2, dw, mm, mm_t, bmm))
    forward_ops = graph.get_operations()
    tf.gradients(total, [x, a])  # backward MatMuls etc. must be skipped
  macs = 8 * 8 * 4 * 27 + 4 * 4 * 4 * 3 + 8 * 8 * 6 * 9 + 70 + 70 + 24 * 5
  assert models.count_forward_flops(forward_ops) == 2 * macs
  assert models.count_forward_flops(graph.get_operations()) == 2 * macs


def test_count_forward_flops_needs_static_shapes():
  graph = tf.Graph()
  with graph.as_default():
    a = tf1.placeholder(tf.float32, [None, 5])
    tf.linalg.matmul(a, tf.zeros([5, 3]))
  with pytest.raises(ValueError, match='not fully known'):
    models.count_forward_flops(graph.get_operations())
