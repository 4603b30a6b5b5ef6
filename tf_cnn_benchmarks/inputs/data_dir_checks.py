"""Checks of --data_dir before any graph: the files of a subset, by name.

check_data_dir raises DataError for a missing, non-directory or empty
--data_dir, no matching ImageNet shards (or a shard cut inside a record
header), missing CIFAR-10 batch files; the message names the path and, when
the files fit the other data set, the --data_name to use.
"""

from __future__ import annotations

import fnmatch
import os
from typing import Optional, Sequence

import tensorflow as tf

from tf_cnn_benchmarks.inputs.input_options import SUBSETS
from tf_cnn_benchmarks.inputs.input_options import DataError
from tf_cnn_benchmarks.inputs.input_options import InputOptions

CIFAR_FILES = {
  'train': tuple('data_batch_%d' % k for k in range(1, 6)),
  'validation': ('test_batch',),
}
IMAGENET_PATTERN = '%s-*-of-*'


def check_data_dir(options: InputOptions, subset: str) -> list[str]:
  """Checks --data_dir holds `subset` of the dataset; returns its files.

  Only names and kinds of files are checked here (cheap); the content is read
  by the pipeline.

  Args:
    options: the input options.
    subset: 'train' or 'validation'.

  Returns:
    The files of the subset, sorted: ImageNet shards matching
    '<subset>-*-of-*', or the CIFAR-10 batch files.

  Raises:
    DataError: the directory is unusable for this subset.
  """
  if subset not in SUBSETS:
    raise ValueError(
      'subset=%r: must be one of %s' % (subset, ', '.join(SUBSETS))
    )
  names = _listed_names(options, subset)
  if options.data_name == 'imagenet':
    return _imagenet_files(options.data_dir, names, subset)
  return _cifar_files(options.data_dir, names, subset)


def _listed_names(options: InputOptions, subset: str) -> list[str]:
  """The sorted names in --data_dir (DataError: unset, absent or empty)."""
  data_dir = options.data_dir
  if not data_dir:
    raise DataError('--data_dir: not set (real data needs a dataset directory)')
  flag = '--data_dir=%s' % data_dir
  if not tf.io.gfile.exists(data_dir):
    raise DataError('%s: no such directory' % flag)
  if not tf.io.gfile.isdir(data_dir):
    raise DataError('%s: not a directory' % flag)
  names = sorted(tf.io.gfile.listdir(data_dir))
  # gfile lists sub-directories with a trailing '/' on some file systems.
  names = [n.rstrip('/') for n in names]
  if not names:
    raise DataError(
      '%s: the directory is empty (expected %s)'
      % (flag, _expected(options.data_name, subset))
    )
  return names


def _imagenet_files(data_dir: str, names: list[str], subset: str) -> list[str]:
  """The subset's ImageNet shards, each checked for a cut record header."""
  pattern = IMAGENET_PATTERN % subset
  files = [
    os.path.join(data_dir, n) for n in names if fnmatch.fnmatchcase(n, pattern)
  ]
  files = [f for f in files if not tf.io.gfile.isdir(f)]
  if not files:
    raise DataError(
      '--data_dir=%s: no files matching %s (ImageNet TFRecords)%s'
      % (data_dir, pattern, _other_dataset_hint(names, 'imagenet'))
    )
  for path in files:
    cut = tfrecord_cut(path)
    if cut is not None:
      raise DataError(
        '%s: truncated record at byte %d (header cut off)' % (path, cut)
      )
  return files


def _cifar_files(data_dir: str, names: list[str], subset: str) -> list[str]:
  """The subset's CIFAR-10 batch files, all present and not directories."""
  flag = '--data_dir=%s' % data_dir
  wanted = CIFAR_FILES[subset]
  missing = [n for n in wanted if n not in names]
  if missing:
    raise DataError(
      '%s: missing %s (CIFAR-10 python batches)%s'
      % (flag, ', '.join(missing), _other_dataset_hint(names, 'cifar10'))
    )
  files = [os.path.join(data_dir, n) for n in wanted]
  for path in files:
    if tf.io.gfile.isdir(path):
      raise DataError(
        '%s: %s is a directory, not a CIFAR-10 batch file' % (flag, path)
      )
  return files


def tfrecord_cut(path: str) -> Optional[int]:
  """Where a TFRecord file is cut inside a record header, or None.

  TensorFlow's reader takes a file cut inside a record's 12-byte header for
  a shorter file and drops the records after the cut without a word; a cut
  inside the data it reports itself (input_failures names it). Walking the
  headers (12 bytes read per record, no checksums) finds the first kind
  before the run starts.
  """
  opener = tf.io.gfile.GFile if '://' in path else open
  with opener(path, 'rb') as f:
    f.seek(0, os.SEEK_END)
    size = f.tell()
    pos = 0
    while pos < size:
      f.seek(pos)
      header = f.read(12)
      if len(header) < 12:
        return pos
      pos += 12 + int.from_bytes(header[:8], 'little') + 4
  return None


def _expected(data_name: str, subset: str) -> str:
  if data_name == 'imagenet':
    return 'ImageNet TFRecords %s' % (IMAGENET_PATTERN % subset)
  return 'CIFAR-10 python batches %s' % ', '.join(CIFAR_FILES[subset])


def _other_dataset_hint(names: Sequence[str], data_name: str) -> str:
  """'; it holds ... use --data_name=...' when the files fit the other set."""
  if data_name == 'imagenet':
    cifar_names = CIFAR_FILES['train'] + CIFAR_FILES['validation']
    if any(n in names for n in cifar_names):
      return '; it holds CIFAR-10 batches: use --data_name=cifar10'
  elif any(
    fnmatch.fnmatchcase(n, IMAGENET_PATTERN % s) for n in names for s in SUBSETS
  ):
    return '; it holds ImageNet TFRecords: use --data_name=imagenet'
  return ''
