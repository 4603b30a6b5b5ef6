"""The profile of one host: its typed form and its JSON file.

A profile is what the scaling prediction needs from one host's short run
(lab/notes/predicting_profile.md): the step's compute times, every gradient's
size and ready time, the optimizer-apply cost, the all-reduce chunk lists
and the transport fits. It is one JSON object with `profile_version: 1`;
units are fixed (ms for compute, us and bytes/us for transports). Keys the
reader does not know are ignored, so later versions can add keys.

This module imports no TensorFlow: the cost model and scripts read profiles
cheaply.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import math
import os

from tf_cnn_benchmarks.platform import json_input

PROFILE_VERSION = 1
# The version of the optional `compressors` object (CompressorCosts): a
# reader refuses another, a profile without the object still loads.
COMPRESSORS_VERSION = 1

# Keys of `transports` that hold one figure (no size term): the step a
# one-graph manager's controller drives on two other tasks, beyond a local
# one; on an idle host, and with every core of the host kept busy.
CONTROLLER_STEP = 'controller_step'
CONTROLLER_STEP_BUSY = 'controller_step_busy'

# Messages in sequence in one measured hop of each transport: an all-reduce
# over two tasks is a reduce-scatter step then an all-gather step, each task
# sending half the tensor in each; the cost model times a ring step as one
# message.
MESSAGES_PER_HOP = {'grpc': 1, 'collective': 2, 'local_copy': 1}
# Chains of messages in flight at once when a transport's
# cpu_us_per_message_concurrent is measured (transfer_cpu.py).
CONCURRENT_MESSAGES = 16


class ProfileError(ValueError):
  """A profile file that cannot be read or holds a bad value.

  The message is one line naming the file and the key.
  """


@dataclasses.dataclass(frozen=True)
class Host:
  """The host the profile was measured on."""

  cpu_model: str
  cpu_cores: int
  tf_version: str
  device: str
  device_name: str
  num_devices_profiled: int = 1


@dataclasses.dataclass(frozen=True)
class RunInfo:
  """The model and settings of the profiled run."""

  model: str
  data_name: str
  batch_size: int
  data_format: str
  use_fp16: bool
  optimizer: str
  num_steps: int


@dataclasses.dataclass(frozen=True)
class Compute:
  """One tower's step on one device, no communication (ms)."""

  step_ms: float
  step_ms_p10: float
  step_ms_p90: float
  forward_ms: float
  backward_ms: float
  cores_busy: float
  # ((k, speedup), ...): k towers at once on this CPU host against one
  # alone, in images/sec (profile_concurrent.py); () when not measured.
  concurrent_speedup: tuple = ()

  def speedup(self, k: int):
    """concurrent_speedup at k towers (linear between the measured k, the
    last one's beyond them); None when not measured or k <= 1."""
    table = self.concurrent_speedup
    if k <= 1 or not table:
      return None
    prev_k, prev_s = 1, 1.0
    for tk, ts in table:
      if k <= tk:
        return prev_s + (ts - prev_s) * (k - prev_k) / (tk - prev_k)
      prev_k, prev_s = tk, ts
    return prev_s


@dataclasses.dataclass(frozen=True)
class Gradient:
  """One trainable variable's gradient, in model variable order."""

  name: str
  shape: tuple
  dtype: str
  bytes: int
  ready_ms: float


@dataclasses.dataclass(frozen=True)
class ApplyCost:
  """Optimizer apply time of one variable: fixed_ms + ms_per_mb * MB."""

  fixed_ms: float
  ms_per_mb: float

  def ms(self, nbytes):
    """The apply time (ms) of a variable of `nbytes` bytes."""
    return self.fixed_ms + self.ms_per_mb * nbytes / 1e6


@dataclasses.dataclass(frozen=True)
class Apply:
  """Optimizer apply cost on a worker and on a ps task."""

  worker: ApplyCost
  ps: ApplyCost
  measured: str = ''  # how each figure was measured


@dataclasses.dataclass(frozen=True)
class CompressorCost:
  """One compressor's compress + decompress compute of one replica's step
  (ms, the profiled model's gradients, no network): the median of the
  timed runs less the identity's, and the p10/p90 of those runs."""

  ms: float
  ms_p10: float
  ms_p90: float


@dataclasses.dataclass(frozen=True)
class CompressorCosts:
  """The compressors' compute measured on the profile's device
  (profile/profile_compression.py): name -> CompressorCost per step, 'none'
  left out (nothing to do). rank: the PowerSGD rank measured;
  baseline_ms: the identity's run the figures are net of."""

  per_step: dict
  rank: int
  baseline_ms: float = 0.0
  runs: int = 0
  measured: str = ''
  version: int = COMPRESSORS_VERSION


@dataclasses.dataclass(frozen=True)
class Transport:
  """One transport: time(bytes) = latency_us + bytes / bytes_per_us.

  Below `fit_from_bytes` the measured `table` ([bytes, us] rows, sorted by
  bytes) is interpolated instead, where one latency fits badly.
  """

  latency_us: float
  bytes_per_us: float
  table: tuple = ()
  fit_from_bytes: int = 0
  measured: str = ''
  # [bytes, median us, p10 us, p90 us] per measured size (the spread).
  samples: tuple = ()
  # Messages one after another in one measured hop, each of bytes / this:
  # an all-reduce over two tasks is a reduce-scatter step then an
  # all-gather step (2); a pass between two tasks is one message (1).
  messages_per_hop: int = 1
  # What one message takes from busy cores, both ends together
  # (transfer_cpu.py, with every core spinning): core-us per message and
  # per byte of the message. None: not measured (the cost model then uses
  # its interference_cores and latency_cpu_fraction).
  cpu_us_per_message: float | None = None
  cpu_us_per_byte: float | None = None
  # The same with CONCURRENT_MESSAGES chains of messages in flight at once
  # (per message): messages in flight together share part of the cost.
  # None: not measured (each message then pays cpu_us_per_message).
  cpu_us_per_message_concurrent: float | None = None
  # What each task of an operation pays once for it, beside its messages
  # (a collective's kernel: core-us per task per all-reduce, whatever the
  # group's size), fitted with cpu_us_per_message from all-reduces over 2
  # and 3 tasks (transfer_cpu.fit_group). None: not measured (the op's own
  # cost is then inside cpu_us_per_message).
  cpu_us_per_op: float | None = None

  def cpu_shared_fraction(self) -> float:
    """The share of a message's CPU that messages in flight together
    pay once between them: with a fixed part F shared and the rest paid by
    each, one alone costs F + M and each of k at once F / k + M, so
    F = (alone - at k) * k / (k - 1). 0 when not measured.

    Of the transport as measured (before per_message): one message alone
    of the measured hop is cpu_us_per_message and its share of the op's
    cpu_us_per_op (a two-task hop: messages_per_hop steps, each task
    sending one message a step)."""
    alone, crowded = self.cpu_us_per_message, self.cpu_us_per_message_concurrent
    if not alone or crowded is None:
      return 0.0
    alone += (self.cpu_us_per_op or 0.0) / self.messages_per_hop
    k = CONCURRENT_MESSAGES
    fixed = (alone - crowded) * k / (k - 1)
    return min(max(fixed / alone, 0.0), 1.0)

  def per_message(self) -> 'Transport':
    """This transport with one message per hop: each row and the latency
    divided by messages_per_hop, at the size of one of its messages (the
    rate is unchanged: the hop's bytes took the hop's time)."""
    m = self.messages_per_hop
    if m == 1:
      return self
    return dataclasses.replace(
      self,
      latency_us=self.latency_us / m,
      table=tuple((b / m, t / m) for b, t in self.table),
      fit_from_bytes=self.fit_from_bytes / m,
      samples=tuple(tuple(x / m for x in row) for row in self.samples),
      messages_per_hop=1,
    )

  def time_us(self, nbytes):
    """The modelled time (us) of one message of `nbytes` bytes."""
    if self.table and nbytes < self.fit_from_bytes:
      sizes = [row[0] for row in self.table]
      i = bisect.bisect_left(sizes, nbytes)
      if i == 0:
        return float(self.table[0][1])
      if i < len(sizes):
        (b0, t0), (b1, t1) = self.table[i - 1], self.table[i]
        return t0 + (t1 - t0) * (nbytes - b0) / float(b1 - b0)
    return self.latency_us + nbytes / self.bytes_per_us


@dataclasses.dataclass(frozen=True)
class Profile:
  """A whole profile (one JSON file)."""

  created: str
  host: Host
  run: RunInfo
  compute: Compute
  gradients: tuple
  apply: Apply
  chunks: dict
  transports: dict
  notes: str = ''
  # 'spec=...' key of `chunks` -> the algorithm of each chunk ('xring#2').
  chunk_algorithms: dict = dataclasses.field(default_factory=dict)
  # None: not measured (an older profile, a paper one, --compressors=none);
  # the predictors then price the compressors' compute by assumption.
  compressors: CompressorCosts | None = None
  profile_version: int = PROFILE_VERSION

  @property
  def total_gradient_bytes(self):
    """The bytes of all gradients together."""
    return sum(g.bytes for g in self.gradients)


class _Reader:
  """Typed reads from the decoded JSON; each failure is one line."""

  def __init__(self, source):
    self.source = source

  def fail(self, key, what, value):
    shown = json.dumps(value) if _jsonable(value) else repr(value)
    if len(shown) > 60:
      shown = shown[:57] + '...'
    raise ProfileError(
      '%s: key %r: expected %s, got %s' % (self.source, key, what, shown)
    )

  def get(self, obj, key, path):
    full = '%s.%s' % (path, key) if path else key
    if not isinstance(obj, dict):
      self.fail(path or '(top)', 'a JSON object', obj)
    if key not in obj:
      raise ProfileError('%s: key %r is missing' % (self.source, full))
    return obj[key], full

  def obj(self, obj, key, path=''):
    value, full = self.get(obj, key, path)
    if not isinstance(value, dict):
      self.fail(full, 'a JSON object', value)
    return value, full

  def num(self, obj, key, path='', minimum=0.0, positive=False):
    value, full = self.get(obj, key, path)
    if not _is_number(value) or value < minimum or (positive and value <= 0):
      self.fail(
        full, 'a number %s %s' % ('>' if positive else '>=', minimum), value
      )
    return float(value)

  def int_(self, obj, key, path='', minimum=0):
    value, full = self.get(obj, key, path)
    if (
      isinstance(value, bool) or not isinstance(value, int) or (value < minimum)
    ):
      self.fail(full, 'an integer >= %d' % minimum, value)
    return value

  def str_(self, obj, key, path='', default=None):
    if default is not None and isinstance(obj, dict) and key not in obj:
      return default
    value, full = self.get(obj, key, path)
    if not isinstance(value, str):
      self.fail(full, 'a string', value)
    return value

  def bool_(self, obj, key, path=''):
    value, full = self.get(obj, key, path)
    if not isinstance(value, bool):
      self.fail(full, 'true or false', value)
    return value


def _jsonable(value):
  try:
    json.dumps(value)
  except (TypeError, ValueError):
    return False
  return True


def _is_number(value):
  return (
    isinstance(value, (int, float))
    and not isinstance(value, bool)
    and math.isfinite(value)
  )


def _read_host(r, top):
  d, p = r.obj(top, 'host')
  return Host(
    cpu_model=r.str_(d, 'cpu_model', p),
    cpu_cores=r.int_(d, 'cpu_cores', p, minimum=1),
    tf_version=r.str_(d, 'tf_version', p),
    device=r.str_(d, 'device', p),
    device_name=r.str_(d, 'device_name', p, default=''),
    num_devices_profiled=r.int_(d, 'num_devices_profiled', p, minimum=1)
    if 'num_devices_profiled' in d
    else 1,
  )


def _read_run(r, top):
  d, p = r.obj(top, 'run')
  return RunInfo(
    model=r.str_(d, 'model', p),
    data_name=r.str_(d, 'data_name', p),
    batch_size=r.int_(d, 'batch_size', p, minimum=1),
    data_format=r.str_(d, 'data_format', p),
    use_fp16=r.bool_(d, 'use_fp16', p),
    optimizer=r.str_(d, 'optimizer', p),
    num_steps=r.int_(d, 'num_steps', p, minimum=1),
  )


def _read_compute(r, top):
  d, p = r.obj(top, 'compute')
  compute = Compute(
    **{
      k: r.num(d, k, p)
      for k in (
        'step_ms',
        'step_ms_p10',
        'step_ms_p90',
        'forward_ms',
        'backward_ms',
        'cores_busy',
      )
    }
  )
  if not compute.step_ms_p10 <= compute.step_ms <= compute.step_ms_p90:
    r.fail(
      p + '.step_ms', 'step_ms_p10 <= step_ms <= step_ms_p90', compute.step_ms
    )
  return dataclasses.replace(
    compute, concurrent_speedup=_read_speedups(r, d, p)
  )


def _read_speedups(r, d, p):
  """compute.concurrent_speedup: [[k, speedup], ...], k >= 2 ascending."""
  rows = d.get('concurrent_speedup', [])
  what = '[[k, speedup], ...] with k >= 2 ascending and speedup > 0'
  if not isinstance(rows, list):
    r.fail(p + '.concurrent_speedup', what, rows)
  out, last = [], 1
  for row in rows:
    ok = isinstance(row, list) and len(row) == 2
    ok = ok and all(_is_number(x) for x in row)
    if not ok or row[0] != int(row[0]) or row[0] <= last or row[1] <= 0:
      r.fail(p + '.concurrent_speedup', what, rows)
    out.append((int(row[0]), float(row[1])))
    last = row[0]
  return tuple(out)


def _read_gradients(r, top):
  items, p = r.get(top, 'gradients', '')
  if not isinstance(items, list) or not items:
    r.fail(p, 'a non-empty list of gradients', items)
  gradients = []
  for i, d in enumerate(items):
    path = 'gradients[%d]' % i
    if not isinstance(d, dict):
      r.fail(path, 'a JSON object', d)
    shape, full = r.get(d, 'shape', path)
    if not isinstance(shape, list) or not all(
      isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    ):
      r.fail(full, 'a list of dimension sizes (integers >= 0)', shape)
    gradients.append(
      Gradient(
        name=r.str_(d, 'name', path),
        shape=tuple(shape),
        dtype=r.str_(d, 'dtype', path),
        bytes=r.int_(d, 'bytes', path),
        ready_ms=r.num(d, 'ready_ms', path),
      )
    )
  return tuple(gradients)


def _read_apply(r, top):
  d, p = r.obj(top, 'apply')
  costs = {}
  for where in ('worker', 'ps'):
    c, cp = r.obj(d, where, p)
    costs[where] = ApplyCost(
      r.num(c, 'fixed_ms', cp), r.num(c, 'ms_per_mb', cp)
    )
  return Apply(**costs, measured=r.str_(d, 'measured', p, default=''))


def _read_chunks(r, top):
  d, p = r.obj(top, 'chunks')
  chunks = {}
  for name, sizes in d.items():
    full = '%s.%s' % (p, name)
    if not isinstance(sizes, list) or not all(
      isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in sizes
    ):
      r.fail(full, 'a list of chunk sizes in bytes (integers > 0)', sizes)
    chunks[name] = tuple(sizes)
  return chunks


def _read_table(r, d, path):
  table, full = r.get(d, 'table', path) if 'table' in d else ([], path)
  if not isinstance(table, list) or not all(
    isinstance(row, list)
    and len(row) == 2
    and all(map(_is_number, row))
    and row[0] >= 0
    and row[1] >= 0
    for row in table
  ):
    r.fail(full, 'a list of [bytes, us] rows', table)
  if [row[0] for row in table] != sorted(row[0] for row in table):
    r.fail(full, 'rows sorted by bytes', table)
  return tuple((int(b), float(t)) for b, t in table)


def _read_transports(r, top):
  d, p = r.obj(top, 'transports')
  transports = {}
  for name in d:
    t, tp = r.obj(d, name, p)
    transports[name] = Transport(
      latency_us=r.num(t, 'latency_us', tp),
      bytes_per_us=r.num(t, 'bytes_per_us', tp, positive=True),
      table=_read_table(r, t, tp),
      fit_from_bytes=r.int_(t, 'fit_from_bytes', tp)
      if 'fit_from_bytes' in t
      else 0,
      measured=r.str_(t, 'measured', tp, default=''),
      samples=_read_samples(r, t, tp),
      messages_per_hop=r.int_(t, 'messages_per_hop', tp, minimum=1)
      if 'messages_per_hop' in t
      else 1,
      cpu_us_per_message=_optional_num(r, t, 'cpu_us_per_message', tp),
      cpu_us_per_byte=_optional_num(r, t, 'cpu_us_per_byte', tp),
      cpu_us_per_message_concurrent=_optional_num(
        r, t, 'cpu_us_per_message_concurrent', tp
      ),
      cpu_us_per_op=_optional_num(r, t, 'cpu_us_per_op', tp),
    )
  return transports


def _optional_num(r, d, key, path):
  """A number >= 0 at `key`, or None when the key is absent or null."""
  return None if d.get(key) is None else r.num(d, key, path)


def _read_samples(r, d, path):
  samples, full = r.get(d, 'samples', path) if 'samples' in d else ([], path)
  if not isinstance(samples, list) or not all(
    isinstance(row, list) and len(row) == 4 and all(map(_is_number, row))
    for row in samples
  ):
    r.fail(full, 'a list of [bytes, median us, p10 us, p90 us] rows', samples)
  return tuple(tuple(row) for row in samples)


def _read_chunk_algorithms(r, top, chunks):
  if 'chunk_algorithms' not in top:
    return {}
  d, p = r.obj(top, 'chunk_algorithms')
  out = {}
  for name, algs in d.items():
    full = '%s.%s' % (p, name)
    if not isinstance(algs, list) or not all(isinstance(a, str) for a in algs):
      r.fail(full, 'a list of algorithm names', algs)
    if name in chunks and len(algs) != len(chunks[name]):
      r.fail(full, 'one algorithm per chunk of chunks.%s' % name, algs)
    out[name] = tuple(algs)
  return out


def _read_compressors(r, top):
  """compressors: None when absent or null (not measured)."""
  if top.get('compressors') is None:
    return None
  d, p = r.obj(top, 'compressors')
  version = r.int_(d, 'version', p)
  if version != COMPRESSORS_VERSION:
    r.fail(p + '.version', str(COMPRESSORS_VERSION), version)
  steps, sp = r.obj(d, 'per_step', p)
  per_step = {}
  for name in steps:
    c, cp = r.obj(steps, name, sp)
    cost = CompressorCost(
      *(r.num(c, k, cp) for k in ('ms', 'ms_p10', 'ms_p90'))
    )
    if not cost.ms_p10 <= cost.ms <= cost.ms_p90:
      r.fail(cp + '.ms', 'ms_p10 <= ms <= ms_p90', cost.ms)
    per_step[name] = cost
  return CompressorCosts(
    per_step=per_step,
    rank=r.int_(d, 'rank', p, minimum=1),
    baseline_ms=r.num(d, 'baseline_ms', p) if 'baseline_ms' in d else 0.0,
    runs=r.int_(d, 'runs', p) if 'runs' in d else 0,
    measured=r.str_(d, 'measured', p, default=''),
    version=version,
  )


def profile_from_dict(data, source='<profile>'):
  """The typed Profile of a decoded JSON object; ProfileError if bad.

  Args:
    data: the decoded JSON object.
    source: what to name in error messages (the file's path).

  Returns:
    A Profile. Keys it does not know are ignored.
  """
  r = _Reader(source)
  if not isinstance(data, dict):
    r.fail('(top)', 'a JSON object', data)
  version = r.int_(data, 'profile_version')
  if version != PROFILE_VERSION:
    r.fail('profile_version', str(PROFILE_VERSION), version)
  chunks = _read_chunks(r, data)
  return Profile(
    created=r.str_(data, 'created'),
    host=_read_host(r, data),
    run=_read_run(r, data),
    compute=_read_compute(r, data),
    gradients=_read_gradients(r, data),
    apply=_read_apply(r, data),
    chunks=chunks,
    transports=_read_transports(r, data),
    notes=r.str_(data, 'notes', default=''),
    chunk_algorithms=_read_chunk_algorithms(r, data, chunks),
    compressors=_read_compressors(r, data),
  )


def profile_to_dict(profile):
  """The JSON object of `profile` (lists for tuples, fixed key names)."""
  data = dataclasses.asdict(profile)
  data['gradients'] = [
    dict(g, shape=list(g['shape'])) for g in data['gradients']
  ]
  data['chunks'] = {k: list(v) for k, v in profile.chunks.items()}
  data['compute']['concurrent_speedup'] = [
    list(row) for row in profile.compute.concurrent_speedup
  ]
  data['transports'] = {
    k: dict(
      dataclasses.asdict(t),
      table=[list(row) for row in t.table],
      samples=[list(row) for row in t.samples],
    )
    for k, t in profile.transports.items()
  }
  data['chunk_algorithms'] = {
    k: list(v) for k, v in profile.chunk_algorithms.items()
  }
  if profile.compressors is None:
    del data['compressors']  # an older reader's file stays as it was
  return data


def _dumps(value, indent=0):
  """JSON text of `value`: objects one key a line, flat lists on one line."""
  pad = ' ' * (indent + 1)
  if isinstance(value, dict):
    if not value:
      return '{}'
    items = [
      '%s%s: %s' % (pad, json.dumps(k), _dumps(v, indent + 1))
      for k, v in value.items()
    ]
    return '{\n%s\n%s}' % (',\n'.join(items), ' ' * indent)
  if isinstance(value, list) and any(
    isinstance(v, (dict, list)) for v in value
  ):
    items = ['%s%s' % (pad, _dumps(v, indent + 1)) for v in value]
    return '[\n%s\n%s]' % (',\n'.join(items), ' ' * indent)
  return json.dumps(value, allow_nan=False)


def load_profile(path):
  """The Profile in the JSON file at `path`.

  Raises:
    ProfileError: one line naming the file (and the key) when the file
      cannot be read, is not JSON, or holds a bad value.
  """
  try:
    data = json_input.load_file(path)
  except OSError as e:
    raise ProfileError(
      '%s: cannot read the profile: %s' % (path, e.strerror or e)
    ) from None
  except json_input.JsonInputError as e:
    raise ProfileError(
      '%s: not a JSON profile: %s' % (path, e.problem)
    ) from None
  return profile_from_dict(data, source=path)


# The profiled run's settings a ranking is made for, in the order an error
# names them: the compute times, gradient sizes and images per step of the
# profile are those of its model, data set, batch size, layout and precision.
RUN_FIELDS = ('model', 'data_name', 'batch_size', 'data_format', 'use_fp16')


def run_differences(profiled, run: dict) -> list:
  """[(field, profiled value, run's value)] of RUN_FIELDS that differ.

  profiled: the profile's RunInfo. run: {field: the run's value}; a field
  left out or None is not compared (a caller that does not know it).
  """
  return [
    (f, getattr(profiled, f), run[f])
    for f in RUN_FIELDS
    if run.get(f) is not None and getattr(profiled, f) != run[f]
  ]


def describe_run(model, differences, side) -> str:
  """'--model=M --batch_size=B ...': the model, then each differing field
  (side 1: the profile's values, 2: the run's)."""
  return ' '.join(
    ['--model=%s' % model]
    + ['--%s=%s' % (d[0], d[side]) for d in differences if d[0] != 'model']
  )


def other_run_error(profile, path, run: dict, flag, anyway_flag):
  """The ProfileError of a profile of another run than `run`, or None.

  A profile of another model, data set, batch size, data format or
  precision ranks the strategies for that run, not this one: refused (one
  line naming the file, what differs on both sides and `anyway_flag`, the
  flag that uses it all the same). flag: the flag that gave `path`; run:
  as run_differences takes it.
  """
  differences = run_differences(profile.run, run)
  if not differences:
    return None
  ours = run.get('model') or profile.run.model
  theirs = describe_run(profile.run.model, differences, 1)
  shown = theirs[len('--model=') :]
  return ProfileError(
    '%s=%s: a profile of %s, this run is %s (it would rank the strategies '
    'for %s); give %s to use it anyway'
    % (
      flag,
      path,
      theirs,
      describe_run(ours, differences, 2),
      shown.replace(' ', ' at ', 1),
      anyway_flag,
    )
  )


def save_profile(profile, path):
  """Writes `profile` to `path` as indented JSON (atomically: temp+rename)."""
  _write(profile_to_dict(profile), path)


def add_compressors(path, costs, note: str = '') -> Profile:
  """Puts `costs` (CompressorCosts) into the profile file at `path` and
  appends `note` to its notes; every other key stays as the file has it
  (also keys this reader does not know). Returns the new Profile.

  Raises:
    ProfileError: the file cannot be read or is not a profile (one line).
  """
  profile = load_profile(path)
  data = json_input.load_file(path)
  data['compressors'] = dataclasses.asdict(costs)
  data['notes'] = '; '.join(n for n in (profile.notes, note) if n)
  _write(data, path)
  return profile_from_dict(data, source=path)


def _write(data, path):
  """`data` to `path` as indented JSON (atomically: temp+rename)."""
  profile_from_dict(data, source=path)  # refuse to write what cannot be read
  tmp = '%s.tmp%d' % (path, os.getpid())
  with open(tmp, 'w', encoding='utf-8') as f:
    f.write(_dumps(data) + '\n')
  os.replace(tmp, path)
