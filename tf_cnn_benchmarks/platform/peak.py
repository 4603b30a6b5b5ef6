"""A device's peak dense-matmul TFLOP/s, for MFU: measured once, then cached.

`--peak_tflops_per_device=auto` (the default) times square matmuls of a few
sizes in the run's compute dtype on the tower device kind (best of several
repetitions, under ~3 s in all) and caches the figure per machine: the key is
the CPU (or GPU) model, the CPU's ISA flags that change the peak (AVX2,
AVX-512, AMX), the core count, the TensorFlow version, the dtype and the
device kind. The cache is read bounded (a regular file of at most 64 KiB)
and only plausible figures in it are used; anything else is measured again.
The cache is a small JSON file in the user's cache directory
($TF_CNN_BENCHMARKS_CACHE_DIR, else $XDG_CACHE_HOME/tf_cnn_benchmarks, else
~/.cache/tf_cnn_benchmarks). A number gives the peak by hand; `none` turns
MFU off.

On a CPU every logical tower device (and every worker process on the same
host) shares the same cores, so the per-device peak is the host's peak
divided by the devices sharing it: MFU is then the fraction of the host's
measured matmul peak that the run reaches.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import stat
import tempfile
import time
from typing import Callable, Optional

from tf_cnn_benchmarks.platform import cpu_features
from tf_cnn_benchmarks.platform import json_input

AUTO, NONE = 'auto', 'none'
ORIGINS = ('measured', 'cached', 'given')
_CACHE_FILE = 'peak_tflops.json'
# Square sizes timed; the largest usually gives the peak on a CPU.
PROBE_SIZES = (512, 1024, 2048)
PROBE_BUDGET_S = 2.5
# A cache holds a few short entries; a larger file is not ours.
MAX_CACHE_BYTES = 64 * 1024
# TFLOP/s of one device a cached figure may claim: anything outside is a
# damaged or hand-edited cache (1e-12 gave an MFU of 1e8).
PLAUSIBLE_TFLOPS = (1e-4, 1e4)


@dataclasses.dataclass(frozen=True)
class Peak:
  """Peak TFLOP/s of one tower device, and where the figure comes from."""

  tflops_per_device: float
  origin: str  # one of ORIGINS


def parse_flag(text: str):
  """'auto', 'none' or a positive finite float; raises ValueError otherwise."""
  value = str(text).strip().lower()
  if value in (AUTO, NONE):
    return value
  try:
    number = float(value)
  except ValueError:
    number = math.nan
  if not (math.isfinite(number) and number > 0):
    raise ValueError(
      '--peak_tflops_per_device=%s: must be auto, none or a number of '
      'TFLOP/s > 0' % text
    )
  return number


def cache_dir(env=None) -> str:
  """The directory of the cache file."""
  env = os.environ if env is None else env
  if env.get('TF_CNN_BENCHMARKS_CACHE_DIR'):
    return env['TF_CNN_BENCHMARKS_CACHE_DIR']
  base = env.get('XDG_CACHE_HOME') or os.path.join(
    os.path.expanduser('~'), '.cache'
  )
  return os.path.join(base, 'tf_cnn_benchmarks')


def machine_key(
  device_kind: str, dtype_name: str, cpuinfo_text: Optional[str] = None
) -> str:
  """Cache key: device model (a CPU's with its peak ISA flags), core count,
  TensorFlow version, dtype. cpuinfo_text: /proc/cpuinfo's (None: read)."""
  # TensorFlow late: config/limits.py imports this module for --help.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  if device_kind == 'gpu':
    gpus = tf.config.list_physical_devices('GPU')
    details = tf.config.experimental.get_device_details(gpus[0]) if gpus else {}
    model = details.get('device_name', 'gpu')
  else:
    if cpuinfo_text is None:
      cpuinfo_text = cpu_features.read_cpuinfo() or ''
    model = '%s|isa=%s' % (
      cpu_features.cpu_model(cpuinfo_text),
      ','.join(cpu_features.peak_flags(cpuinfo_text)) or 'none',
    )
  return '%s|%s|cores=%d|tf=%s|%s' % (
    device_kind,
    model,
    os.cpu_count() or 1,
    tf.__version__,
    dtype_name,
  )


def measure(
  device_kind: str,
  dtype_name: str,
  sizes=PROBE_SIZES,
  budget_s: float = PROBE_BUDGET_S,
) -> float:
  """Best TFLOP/s of an n x n matmul on /<device_kind>:0 over `sizes`.

  Each size is timed for at most its share of `budget_s` (at least 3
  repetitions after a warm-up run); the inputs live in variables, so only
  the matmul is timed.
  """
  # TensorFlow late: config/limits.py imports this module for --help.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  tf1 = tf.compat.v1
  dtype = tf.as_dtype(dtype_name)
  best = 0.0
  graph = tf.Graph()
  with graph.as_default(), tf.device('/%s:0' % device_kind):
    products = []
    for n in sizes:
      a, b = (
        tf1.Variable(
          tf.cast(tf.random.stateless_uniform([n, n], [k, n]), dtype)
        )
        for k in (1, 2)
      )
      # Only one element comes back: the transfer is not timed.
      product = tf.matmul(a, b)
      products.append((n, product[0, 0]))
    init = tf1.global_variables_initializer()
  with tf1.Session(graph=graph) as sess:
    sess.run(init)
    for n, op in products:
      best = max(best, _best_rate(sess, op, n, budget_s / len(sizes)))
  return best


def _best_rate(sess, op, n: int, budget_s: float) -> float:
  """TFLOP/s of the fastest of several runs of an n x n x n matmul."""
  sess.run(op)  # warm-up: kernel selection, caches
  deadline = time.perf_counter() + budget_s
  fastest, runs = math.inf, 0
  while runs < 3 or time.perf_counter() < deadline:
    start = time.perf_counter()
    sess.run(op)
    fastest = min(fastest, time.perf_counter() - start)
    runs += 1
    if runs >= 50:
      break
  return 2.0 * n**3 / fastest / 1e12


def host_peak(
  device_kind: str,
  dtype_name: str,
  directory: Optional[str] = None,
  measure_fn: Optional[Callable[[str, str], float]] = measure,
  write_cache: bool = True,
) -> tuple:
  """(TFLOP/s of one device of this kind, 'cached' or 'measured').

  With measure_fn None, a figure that is not cached is (None, None).
  write_cache=False: a measured figure is not kept (a probe that may have
  shared the cores with other tasks must not stand for this machine).
  """
  directory = cache_dir() if directory is None else directory
  path = os.path.join(directory, _CACHE_FILE)
  key = machine_key(device_kind, dtype_name)
  cache = _read_cache(path)
  if key in cache:
    return cache[key], 'cached'
  if measure_fn is None:
    return None, None
  value = measure_fn(device_kind, dtype_name)
  if write_cache:
    cache[key] = value
    _write_cache(path, cache)
  return value, 'measured'


def plausible(value) -> bool:
  """Whether `value` is a per-device TFLOP/s figure a probe could give."""
  return (
    isinstance(value, (int, float))
    and not isinstance(value, bool)
    and PLAUSIBLE_TFLOPS[0] <= value <= PLAUSIBLE_TFLOPS[1]
  )


def _read_cache(path: str) -> dict:
  """The cache's plausible {key: TFLOP/s} entries ({} when none).

  Only a regular file of at most MAX_CACHE_BYTES is read (a device file or
  a FIFO at the path must not be read without end, or block); a file that
  is not the JSON object this module writes counts as no cache.
  """
  try:
    # O_NONBLOCK: opening a FIFO does not wait for a writer.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
  except OSError:
    return {}  # no cache yet: measure
  try:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_CACHE_BYTES:
      return {}
    data = os.read(fd, MAX_CACHE_BYTES + 1)
  except OSError:
    return {}
  finally:
    os.close(fd)
  if len(data) > MAX_CACHE_BYTES:
    return {}  # grew while we read it
  try:
    cache = json_input.loads(data, path, max_bytes=MAX_CACHE_BYTES)
  except json_input.JsonInputError:  # damaged, or nested without end
    return {}
  if not isinstance(cache, dict):
    return {}
  return {
    key: float(value)
    for key, value in cache.items()
    if isinstance(key, str) and plausible(value)
  }


def _write_cache(path: str, cache: dict) -> None:
  """Atomic replace; a cache that cannot be written only costs a probe."""
  try:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix='.tmp')
    with os.fdopen(fd, 'w') as f:
      json.dump(cache, f, indent=1, sort_keys=True)
    os.replace(tmp, path)
  except OSError:
    pass


def resolve(
  flag_value,
  device_kind: str,
  dtype_name: str,
  devices_sharing: int = 1,
  directory: Optional[str] = None,
  measure_fn: Optional[Callable[[str, str], float]] = measure,
  write_cache: bool = True,
) -> Optional[Peak]:
  """The run's per-device peak from --peak_tflops_per_device, or None.

  Args:
    flag_value: 'auto', 'none' or a number (as parse_flag returns).
    device_kind: 'cpu' or 'gpu'.
    dtype_name: the compute dtype's name.
    devices_sharing: tower devices that share one measured device (on a
      CPU: the logical devices of this process times the workers on this
      host); the measured figure is divided by it.
    directory: the cache directory (default: cache_dir()).
    measure_fn: the probe (tests pass a fake); None: use only a cached
      figure (None when there is none).
    write_cache: whether a measured figure is cached (see host_peak).
  """
  value = parse_flag(flag_value)
  if value == NONE:
    return None
  if value != AUTO:
    return Peak(float(value), 'given')
  tflops, origin = host_peak(
    device_kind, dtype_name, directory, measure_fn, write_cache
  )
  if tflops is None:
    return None
  return Peak(tflops / max(1, devices_sharing), origin)


def over_peak_warning(mfu: Optional[float], result_peak: Optional[Peak]):
  """One line when MFU is over 100% (the peak is then too low), else None."""
  if mfu is None or result_peak is None or mfu <= 1.0:
    return None
  where = {
    'given': 'check --peak_tflops_per_device',
    'cached': 'dropped from %s: the next run measures it again'
    % os.path.join(cache_dir(), _CACHE_FILE),
    'measured': 'the probe may have shared the cores',
  }.get(result_peak.origin, '')
  return (
    'warning: MFU %.2f%% is over 100%%: the %s peak of %.3g TFLOP/s per '
    'device is probably too low (%s)'
    % (100 * mfu, result_peak.origin, result_peak.tflops_per_device, where)
  )


def forget_cached(
  device_kind: str, dtype_name: str, directory: Optional[str] = None
) -> None:
  """Drops this machine's cached figure, so the next run measures again.

  For a cached peak a run has just beaten (MFU over 100%): such a figure
  was measured while something else used the cores, and kept, it would
  skew every later run's MFU.
  """
  directory = cache_dir() if directory is None else directory
  path = os.path.join(directory, _CACHE_FILE)
  cache = _read_cache(path)
  if cache.pop(machine_key(device_kind, dtype_name), None) is not None:
    _write_cache(path, cache)
