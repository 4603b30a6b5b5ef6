"""The input settings of a real-data run (InputOptions) and DataError.

The lowest module of the real-data pipeline: the data-dir checks
(data_dir_checks.py), the readers (cifar_files.py, imagenet_records.py), the
streams (data_sources.py) and the failure descriptions (input_failures.py)
all take an InputOptions and raise DataError.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tf_cnn_benchmarks.inputs import preprocessing

SUBSETS = ('train', 'validation')
DATA_NAMES = ('imagenet', 'cifar10')
DATA_FORMATS = ('NHWC', 'NCHW')
# Name scope of every input op: how describe_input_failure knows an error
# came from the input pipeline.
INPUT_SCOPE = 'real_input'
DEFAULT_INTERLEAVE_CYCLE_LENGTH = 10


# (InputOptions field, the params.Params field it is) of the fields that are
# a flag's value as it is.
_PARAMS_FIELDS = (
  ('data_dir', 'data_dir'),
  ('data_name', 'data_name'),
  ('distortions', 'distortions'),
  ('resize_method', 'resize_method'),
  ('num_private_threads', 'datasets_num_private_threads'),
  ('prefetch_buffer_size', 'datasets_prefetch_buffer_size'),
  ('use_caching', 'datasets_use_caching'),
  ('interleave_cycle_length', 'datasets_parallel_interleave_cycle_length'),
  ('sloppy_interleave', 'datasets_sloppy_parallel_interleave'),
  ('interleave_prefetch', 'datasets_parallel_interleave_prefetch'),
  ('repeat_cached_sample', 'datasets_repeat_cached_sample'),
  ('seed', 'tf_random_seed'),
  ('data_format', 'data_format'),
)


class DataError(Exception):
  """Unusable input data or input flags; the message is one line naming the
  path (or the flag) and what is wrong."""


@dataclasses.dataclass(frozen=True)
class InputOptions:
  """Input settings of a run (the real-data and datasets_* flags)."""

  data_dir: Optional[str]
  data_name: str = 'imagenet'
  distortions: bool = True
  resize_method: str = 'bilinear'
  num_private_threads: Optional[int] = None
  prefetch_buffer_size: int = 1
  use_caching: bool = False
  interleave_cycle_length: Optional[int] = None
  # ImageNet: the file interleave may leave deterministic order; files it
  # opens ahead (None: tf.data autotunes).
  sloppy_interleave: bool = False
  interleave_prefetch: Optional[int] = None
  repeat_cached_sample: bool = False
  seed: int = 1234
  data_format: str = 'NHWC'
  # Copy each tower's batches onto its device ahead of the step, holding this
  # many there (--datasets_use_prefetch, --multi_device_iterator_max_buffer_
  # size); 0: the tower reads them from the host.
  device_prefetch: int = 0
  # ImageNet: the classic preprocessing flags (input_settings.py).
  imagenet_style: preprocessing.ImagenetStyle = preprocessing.ImagenetStyle()

  def __post_init__(self):
    checks = (
      (
        self.data_name in DATA_NAMES,
        '--data_name=%s: must be one of %s'
        % (self.data_name, ', '.join(DATA_NAMES)),
      ),
      (
        self.resize_method in preprocessing.RESIZE_METHODS,
        '--resize_method=%s: must be one of %s'
        % (self.resize_method, ', '.join(preprocessing.RESIZE_METHODS)),
      ),
      (
        self.data_format in DATA_FORMATS,
        '--data_format=%s: must be one '
        'of %s' % (self.data_format, ', '.join(DATA_FORMATS)),
      ),
      (
        self.num_private_threads is None or self.num_private_threads >= 1,
        '--datasets_num_private_threads=%s: must be >= 1 (or unset)'
        % self.num_private_threads,
      ),
      (
        self.prefetch_buffer_size >= 0,
        '--datasets_prefetch_buffer_size=%s: must be >= 0'
        % self.prefetch_buffer_size,
      ),
      (
        self.interleave_cycle_length is None
        or self.interleave_cycle_length >= 1,
        '--datasets_parallel_interleave_cycle_length=%s: must be >= 1 (or '
        'unset)' % self.interleave_cycle_length,
      ),
    )
    for ok, message in checks:
      if not ok:
        raise DataError(message)

  @classmethod
  def from_params(cls, params) -> 'InputOptions':
    """The options of a resolved params.Params."""
    return cls(
      **{field: getattr(params, name) for field, name in _PARAMS_FIELDS},
      # As classic: GPU runs only (the CPU towers share the host's memory).
      device_prefetch=(
        params.multi_device_iterator_max_buffer_size
        if params.datasets_use_prefetch and params.device == 'gpu'
        else 0
      ),
      imagenet_style=preprocessing.imagenet_style(params),
    )

  @property
  def cycle_length(self) -> int:
    """Files each stream reads in parallel."""
    return self.interleave_cycle_length or DEFAULT_INTERLEAVE_CYCLE_LENGTH
