"""Results files -> the columns compare.py, report.py and plot.py tabulate.

The files are streamed (result_lines.iter_json_lines): each line is parsed
(platform/json_input.py: strict, bounded JSON), checked against the reader
view of results/schema.json (result_schema.py) and against what a table
needs (validate_ok_record), reduced to the few fields a table uses, and
dropped. Only those columns are kept, with repeated text (model names,
hosts, the file name) and repeated `env` blocks shared, so memory grows
with a few hundred bytes per line, not with the lines' size.

A line the schema or the table refuses stops the reading with one
ResultsFileError naming file:line and the key; with skip_bad it is skipped
with a warning (the first few of each file; then a count). It imports no
TensorFlow and no pandas: scripts/_results_io.py makes the DataFrame.
"""

from __future__ import annotations

import json
import math
import sys

from tf_cnn_benchmarks.reporting import result_lines
from tf_cnn_benchmarks.reporting import result_schema

# Keys a successful (status "ok") record must have for compare/plot to use it.
REQUIRED_OK_KEYS = (
  'model',
  'variable_update',
  'precision',
  'num_devices',
  'batch_size_per_device',
  'images_per_sec',
)

# Shown instead of a null all_reduce_spec (and other missing key values), so
# that pandas does not drop the group and the table has no "None"/"nan".
MISSING = '-'

# The columns of a table row (load_columns), in order; 'env' only when asked.
COLUMNS = (
  'file',
  'line',
  'model',
  'data_name',
  'hardware',
  'host',
  'variable_update',
  'all_reduce_spec',
  'gradient_compression',
  'collectives',
  'precision',
  'batch_size_per_device',
  'gradient_accumulation_steps',
  'num_devices',
  'num_workers',
  'images_per_sec',
  'images_per_sec_per_device',
  'mfu',
  'repeat',
  'run_ci95_low',
  'run_ci95_high',
  'run_stderr',
  'run_jitter',
)

# With skip_bad, this many skipped lines of a file are named one by one; the
# rest are counted.
SKIPPED_SHOWN = 10


def _warn(message: str) -> None:
  sys.stderr.write('warning: %s\n' % message)


def _note(message: str) -> None:
  sys.stderr.write('note: %s\n' % message)


def table_problem(record: dict) -> str | None:
  """Why a results line cannot be tabulated, or None: the reader view of
  the schema first (result_schema.line_problem), then validate_ok_record."""
  return result_schema.line_problem(record) or validate_ok_record(record)


def validate_ok_record(record: dict) -> str | None:
  """Return why a status-ok record is unusable for tables, or None if fine.

  Records with another status are not checked here: they are errors that the
  readers count and skip.
  """
  if record.get('status', 'ok') != 'ok':
    return None
  for key in REQUIRED_OK_KEYS:
    if key not in record or record[key] is None:
      return 'missing key %r' % key
  for key in ('num_devices', 'batch_size_per_device'):
    if not _is_int(record[key]):
      return '%s must be an integer, got %r' % (key, record[key])
  if 'num_workers' in record and not _is_int(record['num_workers']):
    return 'num_workers must be an integer, got %r' % record['num_workers']
  if not _is_number(record['images_per_sec']):
    return 'images_per_sec must be a number, got %r' % record['images_per_sec']
  return None


def _is_int(value) -> bool:
  return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Skips:
  """Counts a file's skipped lines; names the first SKIPPED_SHOWN."""

  def __init__(self, warn):
    self.warn = warn
    self.count = 0

  def __call__(self, message: str) -> None:
    self.count += 1
    if self.count <= SKIPPED_SHOWN:
      self.warn(message)

  def summary(self) -> str:
    """'N bad line(s) skipped', saying when not all were named."""
    text = '%d bad line%s skipped' % (self.count, 's' * (self.count != 1))
    if self.count > SKIPPED_SHOWN:
      text += ' (the first %d named above)' % SKIPPED_SHOWN
    return text


class _Shared(dict):
  """Interns equal values: one object for every line's equal text."""

  def get_shared(self, value):
    """The first value equal to `value` (value itself the first time)."""
    return self.setdefault(value, value)


def load_columns(
  paths, skip_bad=False, hint=None, keep_env=False, warn=None, note=None
) -> dict:
  """{column: [value per row]} of the successful runs in the results files.

  Columns are COLUMNS, plus 'env' (each row's env block; equal blocks are
  one object) with keep_env. A line with a status other than "ok" is left
  out with a note; extra multi-worker lines are left out (see
  _counts_for_table).

  Args:
    paths: the results files.
    skip_bad: skip lines the schema or the table refuses, with warnings (a
      file's first SKIPPED_SHOWN one by one, then a count), not raise.
    hint: what to do about a bad line, added to the error in brackets.
    keep_env: also keep the env column (report.py's environment table).
    warn: message -> None; by default a 'warning:' line on stderr.
    note: message -> None for left-out error lines; by default 'note:'.

  Raises:
    ResultsFileError: a file is missing or unreadable, a line is bad
      (without skip_bad; naming file:line and the key), or no successful
      run is left.
  """
  warn, note = warn or _warn, note or _note
  try:
    result_schema.compiled()  # a missing schema: one line, before any work
  except result_schema.SchemaError as e:
    raise result_lines.ResultsFileError(str(e)) from None
  columns = {name: [] for name in COLUMNS + (('env',) if keep_env else ())}
  shared, envs = _Shared(), {}
  for path in paths:
    skips = _Skips(warn)
    for number, record in result_lines.iter_json_lines(
      path, skip_bad, table_problem, hint, skips
    ):
      status = record.get('status', 'ok')
      if status != 'ok':
        note(
          '%s:%d: status %r ignored: %s'
          % (path, number, status, _describe_error(record))
        )
      elif _counts_for_table(record):
        row = _row_from_record(shared.get_shared(path), number, record)
        for name, value in row.items():
          columns[name].append(
            shared.get_shared(value) if isinstance(value, str) else value
          )
        if keep_env:
          columns['env'].append(_shared_env(envs, record))
    if skips.count:
      warn('%s: %s' % (path, skips.summary()))
  if not columns['file']:
    raise result_lines.ResultsFileError(
      'no successful results in %s' % ', '.join(paths)
    )
  return columns


def _shared_env(envs: dict, record: dict) -> dict:
  """The record's env block; one object for all equal blocks."""
  env = record.get('env') if isinstance(record.get('env'), dict) else {}
  return envs.setdefault(json.dumps(env, sort_keys=True), env)


def _counts_for_table(record: dict) -> bool:
  """True for records a table should count (skips extra multi-worker lines).

  Multi-worker runs may write one line per task. Images/sec is global, so only
  the first worker's line is kept; parameter-server lines are dropped.
  """
  task = record.get('task')
  if not isinstance(task, dict):
    return True
  if task.get('job_name') == 'ps':
    return False
  return task.get('task_index', 0) in (0, None)


def _row_from_record(path: str, number: int, record: dict) -> dict:
  """Flatten one successful record into the columns the tables use."""
  num_devices = record['num_devices']
  num_workers = record.get('num_workers') or 1
  ips = float(record['images_per_sec'])
  per_device = record.get('images_per_sec_per_device')
  if not _is_number(per_device):
    per_device = ips / (num_devices * num_workers)
  mfu = record.get('mfu')
  env = record.get('env') if isinstance(record.get('env'), dict) else {}
  sweep = record.get('sweep') if isinstance(record.get('sweep'), dict) else {}
  row = {
    'file': path,
    'line': number,
    'model': str(record['model']),
    'data_name': str(record.get('data_name') or MISSING),
    'hardware': hardware_name(env),
    'host': str(env.get('hostname') or MISSING),
    'variable_update': str(record['variable_update']),
    'all_reduce_spec': str(record.get('all_reduce_spec') or MISSING),
    'gradient_compression': compression_label(record),
    'collectives': collectives_label(record),
    'precision': str(record['precision']),
    'batch_size_per_device': record['batch_size_per_device'],
    # Lines older than the key: every step was one update.
    'gradient_accumulation_steps': (
      record['gradient_accumulation_steps']
      if _is_int(record.get('gradient_accumulation_steps'))
      else 1
    ),
    'num_devices': num_devices,
    'num_workers': num_workers,
    'images_per_sec': ips,
    'images_per_sec_per_device': float(per_device),
    'mfu': float(mfu) if _is_number(mfu) else math.nan,
    'repeat': sweep.get('repeat') if _is_int(sweep.get('repeat')) else None,
  }
  row.update(_run_spread(record))
  return row


def compression_label(record: dict) -> str:
  """How a line's gradients travelled: `gradient_compression`, with its
  rank for powersgd ('powersgd r4'); 'none' for lines older than the key."""
  name = record.get('gradient_compression') or 'none'
  rank = record.get('powersgd_rank')
  return '%s r%d' % (name, rank) if _is_int(rank) else str(name)


def collectives_label(record: dict) -> str:
  """How a line's gradient collectives travelled, in a few words: the
  implementation and its settings ('nccl, packs 4194304 B, merge 4');
  'none' without collectives and for lines older than the keys."""
  impl = record.get('collective_implementation')
  if not impl:
    return 'none'
  parts = [str(impl)]
  pack = record.get('collective_bytes_per_pack')
  if _is_int(pack) and pack > 0:
    parts.append('packs %d B' % pack)
  merge = record.get('collective_merge_scope')
  if _is_int(merge) and merge > 1:
    parts.append('merge %d' % merge)
  return ', '.join(parts)


def hardware_name(env: dict) -> str:
  """What ran the benchmark, from a record's env block: the GPU model when
  there is one, else the CPU model (with its core count when known)."""
  if env.get('gpu_model'):
    if _is_int(env.get('gpu_count')) and env['gpu_count'] > 1:
      return '%s (%d GPUs)' % (env['gpu_model'], env['gpu_count'])
    return str(env['gpu_model'])
  if not env.get('cpu_model'):
    return MISSING
  if _is_int(env.get('num_cores')):
    return '%s (%d cores)' % (env['cpu_model'], env['num_cores'])
  return str(env['cpu_model'])


def _run_spread(record: dict) -> dict:
  """The line's own images/sec spread (schema 2's images_per_sec_spread):
  columns run_ci95_low/run_ci95_high/run_stderr/run_jitter, NaN when the
  line has none (schema 1, or under 2 timed steps). A null ci95_high next
  to a known ci95_low is an unbounded rate (the step-time interval reached
  0): infinity."""
  spread = record.get('images_per_sec_spread')
  spread = spread if isinstance(spread, dict) else {}
  out = {}
  for key in ('ci95_low', 'ci95_high', 'stderr', 'jitter'):
    value = spread.get(key)
    out['run_' + key] = float(value) if _is_number(value) else math.nan
  if math.isnan(out['run_ci95_high']) and not math.isnan(out['run_ci95_low']):
    out['run_ci95_high'] = math.inf
  return out


def _describe_error(record: dict) -> str:
  """One-line description of an error record for notes on stderr."""
  sweep = record.get('sweep')
  where = sweep.get('point_id') if isinstance(sweep, dict) else None
  message = record.get('error') or 'no error message'
  return '%s: %s' % (where, message) if where else str(message)
