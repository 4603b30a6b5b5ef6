"""Input failures while running: one line naming the bad file (and record).

Call describe_input_failure when sess.run raises a tf.errors.OpError in a run
that reads --data_dir. What it recognises:
  - a record whose image/encoded is missing or not a JPEG, or whose label is
    missing or outside the label range: a tf.debugging.Assert in the map
    fails with the file name and record index in its message; named at once.
  - a corrupt or truncated TFRecord (DataLossError "corrupted/truncated
    record at N"): the files' record headers are walked in Python up to byte
    N, checking the masked CRC-32C of the length (and of the data for the
    record at N) and the lengths against the file size; the file whose
    record at N is bad is named.
  - an image that does not decode (InvalidArgumentError, e.g. a truncated
    JPEG) or a record that does not parse: each file's records are checked
    in a separate graph (parse, checks, full decode; failures skipped with
    ignore_errors) to find the first bad record, then that record alone is
    run again for its error message.
  The searches stop after time_budget_s (they name what they checked then).
  Any other error of the input ops gets a generic line; errors of other ops
  give None.
"""

from __future__ import annotations

import functools
import re
import struct
import time
import typing
from typing import Optional

import tensorflow as tf

from tf_cnn_benchmarks.config import datasets
from tf_cnn_benchmarks.inputs import data_dir_checks
from tf_cnn_benchmarks.inputs import imagenet_records
from tf_cnn_benchmarks.inputs import input_options

tf1 = tf.compat.v1

# The assert data of imagenet_records' record checks, as the message shows it.
_BAD_RECORD_RE = re.compile(
  r'\[%s\] \[(.*?)\] \[record\] \[(\d+)\] \[([^\]]*)\]'
  % imagenet_records.BAD_RECORD_TAG
)
# An input node's name: [outer scopes/]real_input[_N]/<subset>/tower_<t>/...
_INPUT_NODE_RE = re.compile(
  r'(?<!\w)%s(?:_\d+)?/(%s)/'
  % (input_options.INPUT_SCOPE, '|'.join(input_options.SUBSETS))
)
# "Error in user-defined function passed to MapDataset:52 transformation
# with iterator: Iterator::Root::ParallelMapV2: " before the actual error.
_TF_DATA_PREFIX_RE = re.compile(
  r'^Error in user-defined function passed to \S+ transformation with '
  r'iterator: \S+: '
)
_TFRECORD_ERROR_RE = re.compile(r'(corrupted|truncated) record at (\d+)')
_DEFAULT_TIME_BUDGET_S = 30.0


def describe_input_failure(
  options: input_options.InputOptions,
  subset: str,
  error: Exception,
  *,
  time_budget_s: float = _DEFAULT_TIME_BUDGET_S,
) -> Optional[str]:
  """One line naming the bad file when `error` came from the input pipeline.

  Call it when sess.run raises a tf.errors.OpError, except the
  OutOfRangeError that ends an evaluation pass (the normal end of a pass).
  See the module doc for what is detected and how; the search for a corrupt
  file or an undecodable record may take up to about time_budget_s.

  Args:
    options: the input options the pipeline was built with.
    subset: the subset the failing pipeline read.
    error: the exception sess.run raised.
    time_budget_s: bound of the search for the bad file.

  Returns:
    The line, or None when the error did not come from the input pipeline
    (or came from the pipeline of the other subset).
  """
  message = getattr(error, 'message', None) or str(error)
  failed_subset = _input_subset(error, message)
  if failed_subset is None or failed_subset not in ('', subset):
    return None
  flag = '--data_dir=%s' % options.data_dir
  match = _BAD_RECORD_RE.search(message)
  if match:
    path, index, what = match.groups()
    return 'bad input data in %s: record %s: %s' % (path, index, what)
  core = _core_message(message)
  if isinstance(error, tf.errors.OutOfRangeError):
    return (
      '%s: the %s input ran out of examples (a stream got fewer '
      'examples than one batch?): %s' % (flag, subset, core)
    )
  try:
    files = data_dir_checks.check_data_dir(options, subset)
  except input_options.DataError as e:
    return str(e)
  if options.data_name == 'imagenet' and isinstance(
    error, (tf.errors.DataLossError, tf.errors.InvalidArgumentError)
  ):
    line = _search_bad_file(options, subset, error, core, files, time_budget_s)
    if line:
      return line
  return '%s: input failed: %s' % (flag, core)


def _search_bad_file(options, subset, error, core, files, time_budget_s):
  """The line naming the corrupt ImageNet file or bad record, or saying how
  far the search got; None when every file was checked and none is bad."""
  deadline = time.monotonic() + time_budget_s
  if isinstance(error, tf.errors.DataLossError):
    found, checked = _find_corrupt_tfrecord(files, core, deadline)
  else:
    found, checked = _find_bad_record(
      files, datasets.get(options.data_name).num_classes, deadline
    )
  if found:
    return 'bad input data in %s' % found
  if checked < len(files):
    return (
      '--data_dir=%s: input failed (%s); the bad file is not among the %d '
      'of %d %s files checked in %gs'
      % (options.data_dir, core, checked, len(files), subset, time_budget_s)
    )
  return None


def _input_subset(error: Exception, message: str) -> Optional[str]:
  """The subset whose pipeline failed; '' if an input error of unknown
  subset; None if not an input error."""
  op = getattr(error, 'op', None)
  # The failing node is also named in the message ("[[real_input/train/
  # tower_0/IteratorGetNext]]"), even when error.op is not set.
  for text in (getattr(op, 'name', '') or '', message):
    match = _INPUT_NODE_RE.search(text)
    if match:
      return match.group(1)
  return '' if imagenet_records.BAD_RECORD_TAG in message else None


def _core_message(message: str) -> str:
  """The line of a TensorFlow error message that says what went wrong."""
  for line in message.splitlines():
    text = line.strip()
    if (
      not text
      or line[:1].isspace()
      or text.startswith('[[')
      or text.startswith('Graph execution error')
      or text.startswith('Detected at node')
      or text.startswith('Node:')
    ):
      continue
    return _TF_DATA_PREFIX_RE.sub('', text)[:300]
  return message.strip().splitlines()[0][:300] if message.strip() else ''


# CRC-32C (Castagnoli), as TFRecord framing uses it.
@functools.lru_cache(maxsize=None)
def _crc32c_table() -> tuple:
  table = []
  for n in range(256):
    crc = n
    for _ in range(8):
      crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    table.append(crc)
  return tuple(table)


def _masked_crc32c(data: bytes) -> int:
  """The CRC a TFRecord stores: CRC-32C, rotated and offset ("masked")."""
  table = _crc32c_table()
  crc = 0xFFFFFFFF
  for byte in data:
    crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
  crc ^= 0xFFFFFFFF
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord_problem(path: str, up_to: Optional[int] = None) -> Optional[str]:
  """What is wrong in a TFRecord file's framing up to byte `up_to`, if any.

  Walks the record headers from the start: each length's checksum, each
  record's end against the file size. The data checksum is checked only for
  the record that starts exactly at `up_to` (pure Python, so not for all).

  Args:
    path: the file.
    up_to: the offset TensorFlow reported (the record's start, or its
      data's start for a data checksum); None walks the whole file (headers
      only).

  Returns:
    A phrase like 'truncated record at byte 1234', or None.
  """
  with tf.io.gfile.GFile(path, 'rb') as f:
    size = f.size()
    pos = 0
    while pos < size and (up_to is None or pos <= up_to):
      f.seek(pos)
      header = f.read(12)
      if len(header) < 12:
        return 'truncated record at byte %d (header cut off)' % pos
      length, length_crc = struct.unpack('<QI', header)
      if _masked_crc32c(header[:8]) != length_crc:
        return 'corrupted record at byte %d (length checksum mismatch)' % pos
      end = pos + 12 + length + 4
      if end > size:
        return (
          'truncated record at byte %d (%d data bytes, the file ends '
          'at %d)' % (pos, length, size)
        )
      # TensorFlow reports a header problem at the record's start and a
      # data problem at the start of its data, 12 bytes on.
      if up_to in (pos, pos + 12):
        data = f.read(length)
        (data_crc,) = struct.unpack('<I', f.read(4))
        if _masked_crc32c(data) != data_crc:
          return 'corrupted record at byte %d (data checksum mismatch)' % pos
        return None
      pos = end
  return None


def decodes_jpeg(options) -> bool:
  """Whether a run with these InputOptions (or None) decodes JPEG images.

  Those runs print libjpeg's lines for a corrupt image unless the driver
  drops them (see quiet.libjpeg_lines_dropped).
  """
  return options is not None and options.data_name == 'imagenet'


def _find_corrupt_tfrecord(files, core: str, deadline: float):
  """(phrase naming the corrupt file or None, files checked)."""
  match = _TFRECORD_ERROR_RE.search(core)
  up_to = int(match.group(2)) if match else None
  for checked, path in enumerate(files):
    if time.monotonic() > deadline:
      return None, checked
    problem = tfrecord_problem(path, up_to)
    if problem:
      return '%s: %s' % (path, problem), checked + 1
  return None, len(files)


class _RecordCheck(typing.NamedTuple):
  """The graph that checks one file's records (fed `path` and `skip`)."""

  graph: tf.Graph
  path: tf.Tensor  # placeholder: the file
  skip: tf.Tensor  # placeholder: records before the one `rerun` checks
  total: tf.Tensor  # records in the file
  first_gap: tf.Tensor  # (index after the last good record, first bad or -1)
  rerun: tf.Tensor  # checks record `skip` alone (fails with its error)


def _record_check(num_classes: int) -> _RecordCheck:
  """Builds the record-checking graph (parse, checks, full decode)."""
  graph = tf.Graph()
  with graph.as_default(), tf.device('/device:CPU:0'):
    path = tf1.placeholder(tf.string, [])
    skip = tf1.placeholder(tf.int64, [])

    def check(index, serialized):
      encoded, label, _ = imagenet_records.checked_imagenet_record(
        path, index, serialized, num_classes
      )
      image = tf.io.decode_jpeg(encoded, channels=3)
      # Outputs, not control dependencies: a tf.data function prunes the
      # stateless ops (the decode) whose outputs it does not return.
      return index, label, tf.reduce_max(image)

    records = tf.data.TFRecordDataset(path).enumerate()
    total = records.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)
    good = (
      records.map(
        check, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
      )
      .ignore_errors()
      .map(lambda index, *_: index)
    )
    # Good indices arrive in order: the first gap is the first bad record.
    first_gap = good.reduce(
      (tf.constant(0, tf.int64), tf.constant(-1, tf.int64)),
      lambda state, index: (
        index + 1,
        tf.where(
          tf.logical_and(state[1] < 0, tf.not_equal(index, state[0])),
          state[0],
          state[1],
        ),
      ),
    )
    rerun = (
      records.skip(skip)
      .take(1)
      .map(check)
      .reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)
    )
  return _RecordCheck(graph, path, skip, total, first_gap, rerun)


def _find_bad_record(files, num_classes: int, deadline: float):
  """(phrase naming the first record that fails to parse or decode, or None,
  files checked)."""
  g = _record_check(num_classes)
  config = tf1.ConfigProto(device_count={'GPU': 0})
  with tf1.Session(graph=g.graph, config=config) as sess:
    for checked, name in enumerate(files):
      if time.monotonic() > deadline:
        return None, checked
      try:
        count, (next_index, gap) = sess.run(
          [g.total, g.first_gap], {g.path: name}
        )
      except tf.errors.DataLossError as e:
        return '%s: %s' % (name, _core_message(e.message)), checked + 1
      bad = gap if gap >= 0 else (next_index if next_index < count else -1)
      if bad < 0:
        continue
      try:
        sess.run(g.rerun, {g.path: name, g.skip: bad})
        reason = 'fails to decode'
      except tf.errors.OpError as e:
        match = _BAD_RECORD_RE.search(e.message)
        reason = match.group(3) if match else _core_message(e.message)
      return '%s: record %d: %s' % (name, bad, reason), checked + 1
  return None, len(files)
