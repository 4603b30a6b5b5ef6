"""Image preprocessing for real data, as TensorFlow graph functions.

Every function here works on one example and builds ops in the current graph
(they are meant to run inside a tf.data map). Randomness is stateless: each
random function takes a `seed`, an int64 tensor of shape [2], and derives its
own sub-seeds from it, so an example's preprocessing depends only on that seed
and never on thread timing or on how many examples came before in the process.

ImageNet (TF-slim TFRecords of JPEG images), the classic 'default'
preprocessor:
  training: a random crop guided by the bounding boxes (the whole image when
    there are none, or with --ml_perf, which ignores them); with
    fuse_decode_and_crop (the default) decoded with decode_and_crop_jpeg so
    only the crop is decoded, else the whole image is decoded and sliced
    (same pixels, more work); resized to the model size; random left-right
    flip; with distortions, the classic colour distortion (distort_color).
  evaluation: the central 87.5% of the image (decoded cropped the same way),
    resized.
  resize_method: nearest, bilinear, bicubic or area are tf.image.resize
    methods. 'crop' resizes with bilinear: the crop is already what the name
    promises (the random box for training, the central crop for evaluation),
    and it still has to become image_size x image_size. 'round_robin' cycles
    nearest, bilinear, bicubic, area by the example's position in its stream.
  Output: [-1, 1], or with --ml_perf the pixels in [0, 255] minus the
    ImageNet channel means (no scaling), as classic.
ImageNet, --input_preprocessor=official_models_imagenet (the model garden's
ResNet preprocessing the classic harness imported):
  training: the same bounding-box crop (always fused), flip, bilinear resize;
    no colour distortion.
  evaluation: aspect-preserving bilinear resize so the shorter side is 256
    (or the model size when larger), then a central image_size crop.
  Output: pixels in [0, 255] minus the channel means.
CIFAR-10 (raw 32x32x3 uint8 pixels):
  training: pad 4 pixels of zeros per side, random 32x32 crop, random flip.
  evaluation: the image as is.
CIFAR-10 ends scaled from [0, 1] to [-1, 1]; every image is float32, HWC.
"""

from __future__ import annotations

import dataclasses
import math
import typing

import tensorflow as tf

RESIZE_METHODS = (
  'crop',
  'nearest',
  'bilinear',
  'bicubic',
  'area',
  'round_robin',
)
# The methods 'round_robin' cycles through, in order.
ROUND_ROBIN_METHODS = ('nearest', 'bilinear', 'bicubic', 'area')

# Classic ImageNet training crop: the box must cover at least 10% of some
# object, keep a roughly natural aspect ratio and 5%..100% of the image.
MIN_OBJECT_COVERED = 0.1
ASPECT_RATIO_RANGE = (0.75, 1.33)
AREA_RANGE = (0.05, 1.0)
MAX_CROP_ATTEMPTS = 100
EVAL_CENTRAL_FRACTION = 0.875

# Colour distortion strengths (as the classic benchmark's).
BRIGHTNESS_MAX_DELTA = 32.0 / 255.0
SATURATION_RANGE = (0.5, 1.5)
HUE_MAX_DELTA = 0.2
CONTRAST_RANGE = (0.5, 1.5)
# In YIQ space (classic: contrib's random_hsv_in_yiq): the hue is a rotation
# of the IQ plane by up to this angle (radians), saturation scales IQ.
YIQ_HUE_MAX_DELTA = 0.2 * math.pi
# contrib's (and TF Addons') YIQ matrices (NTSC 1953; YIQ_TO_RGB is the
# inverse of RGB_TO_YIQ to 5 digits). Rows: output channels.
RGB_TO_YIQ = (
  (0.299, 0.587, 0.114),
  (0.596, -0.274, -0.322),
  (0.211, -0.523, 0.312),
)
YIQ_TO_RGB = (
  (1.0, 0.95617069, 0.62143257),
  (1.0, -0.2726886, -0.64681324),
  (1.0, -1.103744, 1.70062309),
)

# The ImageNet channel means (RGB, on [0, 255]) --ml_perf and the official
# models' preprocessing subtract (classic _CHANNEL_MEANS).
CHANNEL_MEANS = (123.68, 116.78, 103.94)
# official_models_imagenet evaluation: the shorter side after the
# aspect-preserving resize (the model garden's _RESIZE_MIN).
OFFICIAL_RESIZE_MIN = 256

CIFAR_IMAGE_SIZE = 32
CIFAR_DEPTH = 3
CIFAR_RECORD_BYTES = CIFAR_IMAGE_SIZE * CIFAR_IMAGE_SIZE * CIFAR_DEPTH
CIFAR_PADDING = 4

_BBOX_KEYS = ('ymin', 'xmin', 'ymax', 'xmax')


@dataclasses.dataclass(frozen=True)
class ImagenetStyle:
  """How ImageNet images are preprocessed: the classic input flags.

  fuse_decode_and_crop: decode only the crop window (decode_and_crop_jpeg);
    false decodes the whole JPEG, then slices the same window.
  distort_color_in_yiq: with distortions, hue and saturation are one
    transform in YIQ space (else tf.image's HSV-based hue and saturation).
  use_bboxes: the training crop is guided by the record's boxes (--ml_perf:
    false, the whole image is the object).
  mean_subtraction: end as pixels in [0, 255] minus CHANNEL_MEANS instead
    of [-1, 1] (--ml_perf).
  official: the official_models_imagenet preprocessor (its own crops,
    resize and mean subtraction; the fields above except use_bboxes, and
    resize_method and distortions, do not apply).
  """

  fuse_decode_and_crop: bool = True
  distort_color_in_yiq: bool = True
  use_bboxes: bool = True
  mean_subtraction: bool = False
  official: bool = False


def imagenet_style(p) -> ImagenetStyle:
  """The ImagenetStyle of a params.Params (its classic input flags)."""
  return ImagenetStyle(
    fuse_decode_and_crop=p.fuse_decode_and_crop,
    distort_color_in_yiq=p.distort_color_in_yiq,
    use_bboxes=not p.ml_perf,
    mean_subtraction=p.ml_perf,
    official=p.input_preprocessor == 'official_models_imagenet',
  )


class ImagenetRecord(typing.NamedTuple):
  """The fields of an ImageNet example the benchmark uses."""

  encoded: tf.Tensor  # scalar string: the JPEG bytes ('' when missing)
  label: tf.Tensor  # scalar int64 ('image/class/label'; -1 when missing)
  bboxes: tf.Tensor  # float32 [N, 4] as (ymin, xmin, ymax, xmax) in [0, 1]


def parse_imagenet_record(serialized: tf.Tensor) -> ImagenetRecord:
  """Parses one serialized TF-slim ImageNet tf.train.Example.

  Only image/encoded, image/class/label and image/object/bbox/* are read;
  every other feature (height, width, format, filename, class text, synset,
  ...) may be present and is ignored. A missing image or label parses to a
  default ('' / -1) so the caller can reject it with a message naming the
  record, instead of a parse error that names nothing.

  Args:
    serialized: scalar string tensor, one serialized tf.train.Example.

  Returns:
    An ImagenetRecord.
  """
  features = {
    'image/encoded': tf.io.FixedLenFeature([], tf.string, default_value=''),
    'image/class/label': tf.io.FixedLenFeature([], tf.int64, default_value=-1),
  }
  for key in _BBOX_KEYS:
    features['image/object/bbox/' + key] = tf.io.VarLenFeature(tf.float32)
  parsed = tf.io.parse_single_example(serialized, features)
  coords = [
    tf.sparse.to_dense(parsed['image/object/bbox/' + key]) for key in _BBOX_KEYS
  ]
  ymin, xmin, ymax, xmax = [tf.clip_by_value(c, 0.0, 1.0) for c in coords]
  # Order each pair so a box written with swapped corners is still a box
  # (sample_distorted_bounding_box rejects min > max outright).
  bboxes = tf.stack(
    [
      tf.minimum(ymin, ymax),
      tf.minimum(xmin, xmax),
      tf.maximum(ymin, ymax),
      tf.maximum(xmin, xmax),
    ],
    axis=1,
  )
  return ImagenetRecord(
    parsed['image/encoded'], parsed['image/class/label'], bboxes
  )


def _sub_seeds(seed: tf.Tensor, count: int) -> list[tf.Tensor]:
  """`count` independent stateless seeds derived from `seed`."""
  return tf.unstack(tf.random.experimental.stateless_split(seed, num=count))


def _resize_with(image: tf.Tensor, image_size: int, method: str) -> tf.Tensor:
  """uint8 HWC image -> float32 [image_size, image_size, C] in [0, 1]."""
  if method == 'crop':
    method = 'bilinear'
  resized = tf.image.resize(image, [image_size, image_size], method=method)
  # bicubic overshoots; the other methods stay in range and clipping is free.
  return tf.clip_by_value(tf.cast(resized, tf.float32) / 255.0, 0.0, 1.0)


def resize(
  image: tf.Tensor, image_size: int, resize_method: str, index: tf.Tensor
) -> tf.Tensor:
  """Resizes a uint8 HWC image to a square float32 image in [0, 1].

  Args:
    image: uint8 [H, W, C].
    image_size: side of the result.
    resize_method: one of RESIZE_METHODS.
    index: int64 scalar, the example's position in its stream; picks the
      method when resize_method is 'round_robin'.

  Returns:
    float32 [image_size, image_size, C] in [0, 1].
  """
  if resize_method not in RESIZE_METHODS:
    raise ValueError(
      'resize_method=%r: must be one of %s'
      % (resize_method, ', '.join(RESIZE_METHODS))
    )
  if resize_method != 'round_robin':
    return _resize_with(image, image_size, resize_method)
  branches = [
    lambda m=m: _resize_with(image, image_size, m) for m in ROUND_ROBIN_METHODS
  ]
  choice = tf.cast(index % len(ROUND_ROBIN_METHODS), tf.int32)
  resized = tf.switch_case(choice, branches)
  return tf.ensure_shape(resized, [image_size, image_size, image.shape[-1]])


def adjust_hsv_in_yiq(
  image: tf.Tensor, delta_hue: tf.Tensor, scale_saturation: tf.Tensor
) -> tf.Tensor:
  """Hue rotation and saturation scaling of an RGB image in YIQ space.

  Y (luma) is kept; the chroma vector (I, Q) is rotated by `delta_hue`
  radians (I' = s (I cos h - Q sin h), Q' = s (I sin h + Q cos h)) and
  scaled by `scale_saturation`, then the image goes back to RGB: contrib's
  adjust_hsv_in_yiq with value scale 1. Not clipped.

  Args:
    image: float32 [..., 3] RGB.
    delta_hue: float32 scalar, radians.
    scale_saturation: float32 scalar.

  Returns:
    float32, the shape of `image`.
  """
  cos = scale_saturation * tf.cos(delta_hue)
  sin = scale_saturation * tf.sin(delta_hue)
  zero, one = tf.zeros_like(cos), tf.ones_like(cos)
  # Row vectors: pixel @ RGB->YIQ @ hue/saturation @ YIQ->RGB.
  hsv = tf.stack(
    [
      tf.stack([one, zero, zero]),
      tf.stack([zero, cos, sin]),
      tf.stack([zero, -sin, cos]),
    ]
  )
  rgb_to_yiq = tf.constant(RGB_TO_YIQ, tf.float32, shape=[3, 3])
  yiq_to_rgb = tf.constant(YIQ_TO_RGB, tf.float32, shape=[3, 3])
  transform = tf.matmul(
    tf.matmul(tf.transpose(rgb_to_yiq), hsv), tf.transpose(yiq_to_rgb)
  )
  return tf.tensordot(image, transform, axes=[[-1], [0]])


def _colour_step(image: tf.Tensor, in_yiq: bool, seed: tf.Tensor) -> tf.Tensor:
  """Random hue and saturation: one YIQ transform, or saturation then hue."""
  hue_seed, saturation_seed = _sub_seeds(seed, 2)
  if in_yiq:
    delta_hue = tf.random.stateless_uniform(
      [], hue_seed, -YIQ_HUE_MAX_DELTA, YIQ_HUE_MAX_DELTA
    )
    scale = tf.random.stateless_uniform([], saturation_seed, *SATURATION_RANGE)
    return adjust_hsv_in_yiq(image, delta_hue, scale)
  image = tf.image.stateless_random_saturation(
    image, *SATURATION_RANGE, seed=saturation_seed
  )
  return tf.image.stateless_random_hue(image, HUE_MAX_DELTA, hue_seed)


def distort_color(
  image: tf.Tensor, seed: tf.Tensor, index: tf.Tensor, in_yiq: bool = True
) -> tf.Tensor:
  """The classic colour distortion: brightness, colour, contrast.

  Random brightness first; then, for an even `index`, random hue and
  saturation followed by random contrast, for an odd one contrast first (the
  classic harness's two orders, picked by the image's position in its
  batch; here by its position in its stream, the same parity for an even
  batch size). Hue and saturation are one YIQ transform with `in_yiq`
  (classic --distort_color_in_yiq, the default), else tf.image's saturation
  then hue. Clipped to [0, 1] once at the end, as classic.

  Args:
    image: float32 [H, W, 3] in [0, 1].
    seed: int64 [2] stateless seed.
    index: int64 scalar, the example's position in its stream.
    in_yiq: hue and saturation in YIQ space.

  Returns:
    float32 [H, W, 3] in [0, 1].
  """
  brightness_seed, colour_seed, contrast_seed = _sub_seeds(seed, 3)
  image = tf.image.stateless_random_brightness(
    image, BRIGHTNESS_MAX_DELTA, brightness_seed
  )

  def colour(x):
    return _colour_step(x, in_yiq, colour_seed)

  def contrast(x):
    return tf.image.stateless_random_contrast(
      x, *CONTRAST_RANGE, seed=contrast_seed
    )

  shape = image.shape
  image = tf.cond(
    tf.equal(index % 2, 0),
    lambda: contrast(colour(image)),
    lambda: colour(contrast(image)),
  )
  image.set_shape(shape)
  return tf.clip_by_value(image, 0.0, 1.0)


def to_symmetric_range(image: tf.Tensor) -> tf.Tensor:
  """Maps a float image in [0, 1] to [-1, 1]."""
  return image * 2.0 - 1.0


def subtract_channel_means(image: tf.Tensor) -> tf.Tensor:
  """Maps a float image in [0, 1] to [0, 255] minus CHANNEL_MEANS."""
  return image * 255.0 - tf.constant(CHANNEL_MEANS, tf.float32)


def _finish(image: tf.Tensor, style: ImagenetStyle) -> tf.Tensor:
  if style.mean_subtraction or style.official:
    return subtract_channel_means(image)
  return to_symmetric_range(image)


def decode_window(
  encoded: tf.Tensor, window: tf.Tensor, fused: bool = True
) -> tf.Tensor:
  """The uint8 [h, w, 3] crop `window` (y, x, h, w) of a JPEG.

  fused: decode only the window (decode_and_crop_jpeg); else decode the
  whole image and slice it (same pixels).
  """
  if fused:
    return tf.io.decode_and_crop_jpeg(encoded, window, channels=3)
  image = tf.io.decode_jpeg(encoded, channels=3)
  return tf.slice(image, [window[0], window[1], 0], [window[2], window[3], 3])


def train_crop_window(
  encoded: tf.Tensor, bboxes: tf.Tensor, seed: tf.Tensor
) -> tf.Tensor:
  """The random training crop (y, x, h, w), from the JPEG header's shape."""
  shape = tf.io.extract_jpeg_shape(encoded)
  begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
    shape,
    bounding_boxes=tf.expand_dims(bboxes, 0),
    seed=seed,
    min_object_covered=MIN_OBJECT_COVERED,
    aspect_ratio_range=ASPECT_RATIO_RANGE,
    area_range=AREA_RANGE,
    max_attempts=MAX_CROP_ATTEMPTS,
    use_image_if_no_bounding_boxes=True,
  )
  return tf.stack([begin[0], begin[1], size[0], size[1]])


def imagenet_train_image(
  encoded: tf.Tensor,
  bboxes: tf.Tensor,
  *,
  image_size: int,
  resize_method: str,
  distortions: bool,
  seed: tf.Tensor,
  index: tf.Tensor,
  style: ImagenetStyle = ImagenetStyle(),
) -> tf.Tensor:
  """A training image from JPEG bytes: random box crop, resize, flip, colour.

  Args:
    encoded: scalar string, JPEG bytes.
    bboxes: float32 [N, 4] (ymin, xmin, ymax, xmax), N may be 0.
    image_size: side of the result.
    resize_method: one of RESIZE_METHODS ('crop' resizes with bilinear).
    distortions: whether to apply the random colour distortion.
    seed: int64 [2] stateless seed of this example.
    index: int64 scalar, the example's position in its stream.
    style: the classic input flags' choices (ImagenetStyle).

  Returns:
    float32 [image_size, image_size, 3]: in [-1, 1], or mean-subtracted
    pixels (see ImagenetStyle).
  """
  crop_seed, flip_seed, color_seed = _sub_seeds(seed, 3)
  if not style.use_bboxes:
    bboxes = tf.zeros([0, 4], tf.float32)
  # The crop is chosen from the header's shape alone, so (fused) only that
  # window is decoded: most of a large JPEG's decode cost is skipped.
  window = train_crop_window(encoded, bboxes, crop_seed)
  fused = style.fuse_decode_and_crop or style.official
  image = decode_window(encoded, window, fused)
  if style.official:
    resize_method, distortions = 'bilinear', False
  image = resize(image, image_size, resize_method, index)
  image = tf.image.stateless_random_flip_left_right(image, flip_seed)
  if distortions:
    image = distort_color(
      image, color_seed, index, in_yiq=style.distort_color_in_yiq
    )
  return _finish(image, style)


def _official_eval_image(encoded: tf.Tensor, image_size: int) -> tf.Tensor:
  """Aspect-preserving resize (shorter side 256), central crop; [0, 1]."""
  image = tf.io.decode_jpeg(encoded, channels=3)
  shape = tf.cast(tf.shape(image)[:2], tf.float32)
  shorter = float(max(OFFICIAL_RESIZE_MIN, image_size))
  scale = shorter / tf.reduce_min(shape)
  new_size = tf.cast(shape * scale, tf.int32)
  resized = tf.image.resize(image, new_size, method='bilinear')
  top = (new_size[0] - image_size) // 2
  left = (new_size[1] - image_size) // 2
  image = tf.slice(resized, [top, left, 0], [image_size, image_size, 3])
  image = tf.clip_by_value(image / 255.0, 0.0, 1.0)
  return tf.ensure_shape(image, [image_size, image_size, 3])


def imagenet_eval_image(
  encoded: tf.Tensor,
  *,
  image_size: int,
  resize_method: str,
  index: tf.Tensor,
  style: ImagenetStyle = ImagenetStyle(),
) -> tf.Tensor:
  """An evaluation image from JPEG bytes: central 87.5% crop, then resize.

  Args:
    encoded: scalar string, JPEG bytes.
    image_size: side of the result.
    resize_method: one of RESIZE_METHODS ('crop' resizes with bilinear).
    index: int64 scalar, the example's position in its stream.
    style: the classic input flags' choices (ImagenetStyle).

  Returns:
    float32 [image_size, image_size, 3]: in [-1, 1], or mean-subtracted
    pixels (see ImagenetStyle).
  """
  if style.official:
    return _finish(_official_eval_image(encoded, image_size), style)
  shape = tf.io.extract_jpeg_shape(encoded)
  height, width = shape[0], shape[1]
  crop_h = tf.cast(
    tf.cast(height, tf.float32) * EVAL_CENTRAL_FRACTION, tf.int32
  )
  crop_w = tf.cast(tf.cast(width, tf.float32) * EVAL_CENTRAL_FRACTION, tf.int32)
  # A 1-pixel image would otherwise crop to nothing.
  crop_h, crop_w = tf.maximum(crop_h, 1), tf.maximum(crop_w, 1)
  window = tf.stack(
    [(height - crop_h) // 2, (width - crop_w) // 2, crop_h, crop_w]
  )
  image = decode_window(encoded, window, style.fuse_decode_and_crop)
  return _finish(resize(image, image_size, resize_method, index), style)


def cifar_record_image(record: tf.Tensor) -> tf.Tensor:
  """One CIFAR-10 record (3072 bytes, CHW order) -> uint8 [32, 32, 3]."""
  pixels = tf.io.decode_raw(record, tf.uint8)
  chw = tf.reshape(pixels, [CIFAR_DEPTH, CIFAR_IMAGE_SIZE, CIFAR_IMAGE_SIZE])
  return tf.transpose(chw, [1, 2, 0])


def _cifar_finish(image: tf.Tensor, image_size: int) -> tf.Tensor:
  image = tf.cast(image, tf.float32) / 255.0
  if image_size != CIFAR_IMAGE_SIZE:
    # Only for a model whose input is not 32x32; CIFAR models all are.
    image = tf.image.resize(image, [image_size, image_size])
  return to_symmetric_range(image)


def cifar_train_image(
  image: tf.Tensor, *, image_size: int, seed: tf.Tensor
) -> tf.Tensor:
  """CIFAR-10 training image: zero-pad 4, random 32x32 crop, random flip.

  Args:
    image: uint8 [32, 32, 3].
    image_size: side of the result (32 for every CIFAR model).
    seed: int64 [2] stateless seed of this example.

  Returns:
    float32 [image_size, image_size, 3] in [-1, 1].
  """
  crop_seed, flip_seed = _sub_seeds(seed, 2)
  padded_size = CIFAR_IMAGE_SIZE + 2 * CIFAR_PADDING
  image = tf.image.pad_to_bounding_box(
    image, CIFAR_PADDING, CIFAR_PADDING, padded_size, padded_size
  )
  image = tf.image.stateless_random_crop(
    image, [CIFAR_IMAGE_SIZE, CIFAR_IMAGE_SIZE, CIFAR_DEPTH], crop_seed
  )
  image = tf.image.stateless_random_flip_left_right(image, flip_seed)
  return _cifar_finish(image, image_size)


def cifar_eval_image(image: tf.Tensor, *, image_size: int) -> tf.Tensor:
  """CIFAR-10 evaluation image: uint8 [32, 32, 3] -> float32 in [-1, 1]."""
  return _cifar_finish(image, image_size)
