"""The classic ImageNet preprocessing flags (issue 14).

The flags live in `InputSettings`, a base class of `params.Params` (so they
are Params fields like any other); inputs.preprocessing.imagenet_style turns
them into the ImagenetStyle the real-data pipeline uses.
They change ImageNet real data only (--data_dir): CIFAR-10 has its one
classic preprocessor, and synthetic data is not preprocessed.

  --fuse_decode_and_crop (default true): decode only the crop window of each
    JPEG (decode_and_crop_jpeg); false decodes the whole image, then slices
    the same window (same pixels, more decode work).
  --distort_color_in_yiq (default true, with --distortions): hue and
    saturation as one rotation and scaling of the chroma plane in YIQ space
    (the classic contrib random_hsv_in_yiq); false: tf.image's saturation
    then hue.
  --ml_perf: the classic MLPerf-compliant input: the training crop ignores
    the bounding boxes, and images end as pixels in [0, 255] minus the
    ImageNet channel means instead of scaled to [-1, 1].
  --input_preprocessor: 'default', or for ImageNet 'official_models_imagenet'
    (the model garden's ResNet preprocessing), as classic.
"""

from __future__ import annotations

import dataclasses
from typing import Any

# Classic _SUPPORTED_INPUT_PREPROCESSORS, for the data sets this harness has.
INPUT_PREPROCESSORS = {
  'imagenet': ('default', 'official_models_imagenet'),
  'cifar10': ('default',),
}


def _field(default: Any, help_text: str) -> Any:
  # The metadata params._field gives (params imports this module).
  return dataclasses.field(
    default=default, metadata={'help': help_text, 'choices': ()}
  )


@dataclasses.dataclass(frozen=True)
class InputSettings:
  """The ImageNet preprocessing flags of `params.Params` (a base)."""

  fuse_decode_and_crop: bool = _field(
    True,
    'ImageNet real data: decode only the crop window of each JPEG '
    '(decode_and_crop_jpeg); false decodes the whole image, then crops.',
  )
  distort_color_in_yiq: bool = _field(
    True,
    'With --distortions (ImageNet real data): random hue and saturation '
    'as one transform in YIQ space, as classic; false: tf.image saturation '
    'then hue.',
  )
  ml_perf: bool = _field(
    False,
    'ImageNet real data, MLPerf-compliant input as classic: the training '
    'crop ignores the bounding boxes, and images are pixels in [0, 255] '
    'minus the channel means (no scaling to [-1, 1]).',
  )
  input_preprocessor: str = _field(
    'default',
    "Input preprocessor: 'default', or with ImageNet "
    "'official_models_imagenet' (the model garden's ResNet preprocessing: "
    'no colour distortion, aspect-preserving evaluation resize, '
    'channel means subtracted).',
  )


def check(p, data_name: str, error_cls) -> list[str]:
  """Validates the flags; returns warning lines.

  Args:
    p: params.Params.
    data_name: the run's data set.
    error_cls: raised (with one line) for a bad value.

  Returns:
    Warning lines: flags set that change nothing in this run.
  """
  allowed = INPUT_PREPROCESSORS.get(data_name, ('default',))
  if p.input_preprocessor not in allowed:
    raise error_cls(
      '--input_preprocessor=%s: with %s data must be one of %s'
      % (p.input_preprocessor, data_name, ', '.join(allowed))
    )
  real_imagenet = p.data_dir is not None and data_name == 'imagenet'
  set_flags = [
    name
    for name, default in (
      ('ml_perf', False),
      ('fuse_decode_and_crop', True),
      ('distort_color_in_yiq', True),
    )
    if getattr(p, name) != default
  ]
  if p.input_preprocessor != 'default':
    set_flags.append('input_preprocessor')
  if real_imagenet:
    return []
  return [
    'warning: --%s has no effect: it changes ImageNet real data (--data_dir) '
    'only' % name
    for name in set_flags
  ]
