"""Keeps TensorFlow's C++ chatter (and libjpeg's) off stderr.

TensorFlow's C++ logging writes lines ("Could not find cuda drivers",
"failed call to cuInit", ...) straight to file descriptor 2 before its log
level is configurable, so a bad flag would not get the one clean line on
stderr that users (and scripts) rely on. We capture fd 2 while TensorFlow
loads and probes its devices, and replay the capture only if that fails;
the capture is kept (bounded), so that when no GPU is visible the lines in
which TensorFlow said why can be printed after all (gpu_reason_lines).
"""

from __future__ import annotations

import contextlib
import gc
import importlib.abc
import os
import re
import subprocess
import sys
import tempfile

# What captured_stderr_fd keeps of a capture for later (kept=): its first
# and last this many bytes. TensorFlow's start-up writes ~2 KB; the bound
# keeps a chatty library from holding memory.
KEPT_CAPTURE_BYTES = 32 * 1024


@contextlib.contextmanager
def captured_stderr_fd(kept: list | None = None):
  """Redirects fd 2 to a temporary file; replays it if the body raises.

  kept: a list the captured text (at most the first and the last
  KEPT_CAPTURE_BYTES) is appended to when the body ends.
  """
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as capture:
    os.dup2(capture.fileno(), 2)
    try:
      yield
    except KeyboardInterrupt:
      # Ctrl-C while TensorFlow loads: `interrupted` is the one line, not
      # TensorFlow's start-up log before it.
      raise
    except BaseException:
      sys.stderr.flush()
      os.dup2(saved, 2)
      capture.seek(0)
      os.write(2, capture.read())
      raise
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      if kept is not None:
        kept.append(_bounded_text(capture))


def _bounded_text(capture) -> str:
  """The first and last KEPT_CAPTURE_BYTES of a file, as text."""
  size = capture.seek(0, os.SEEK_END)
  capture.seek(0)
  if size <= 2 * KEPT_CAPTURE_BYTES:
    data = capture.read()
  else:
    head = capture.read(KEPT_CAPTURE_BYTES)
    capture.seek(size - KEPT_CAPTURE_BYTES)
    data = head + b'\n[...]\n' + capture.read()
  return data.decode('utf-8', 'replace')


# What TensorFlow wrote to fd 2 while it loaded and probed its devices
# (load_tensorflow), kept so that a missing GPU can be explained with
# TensorFlow's own words (gpu_reason_lines).
_startup_log: list = []


# TensorFlow's import loads Keras 3, which imports these when they are
# installed, for features the benchmark never uses (Keras' image gallery
# plots, pandas inputs): 0.55 + 0.31 CPU seconds on a 2-core EPYC, a tenth
# of a tiny run's start-up. Hidden while TensorFlow loads; imported as
# usual afterwards (the plots and tables import them when they need them).
KERAS_EXTRAS = ('matplotlib', 'pandas')


class _Hidden(importlib.abc.MetaPathFinder):
  """An import finder that refuses a set of top-level packages."""

  def __init__(self, names):
    self.names = frozenset(names)

  def find_spec(self, fullname, path=None, target=None):
    del path, target
    if fullname.partition('.')[0] in self.names:
      raise ModuleNotFoundError(
        '%s is hidden while TensorFlow loads' % fullname, name=fullname
      )
    return None


@contextlib.contextmanager
def _hidden(names):
  """Within: importing `names` (not yet imported) raises ImportError."""
  if not names:
    yield
    return
  finder = _Hidden(names)
  sys.meta_path.insert(0, finder)
  try:
    yield
  finally:
    sys.meta_path.remove(finder)


def load_tensorflow():
  """Imports TensorFlow (graph mode, quiet Python logger) and probes devices.

  What TensorFlow printed meanwhile is kept: startup_log().
  """
  kept = []
  first_load = 'tensorflow' not in sys.modules
  with captured_stderr_fd(kept), _hidden(KERAS_EXTRAS if first_load else ()):
    # The point of this module: TensorFlow loads here, late and quiet.
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    tf.get_logger().setLevel('ERROR')
    tf.compat.v1.disable_eager_execution()
    tf.config.list_physical_devices('GPU')
  _startup_log[:] = kept
  # TensorFlow's (and Keras') modules are objects that live
  # as long as the process: out of the collector's sight, each full
  # collection while a graph is built stops scanning them (0.3-0.4 CPU
  # seconds of a 2-tower resnet50 run's 21 on a 2-core EPYC). Only when
  # this call loaded TensorFlow: a caller's own objects (an earlier run's
  # garbage) must stay collectable.
  if first_load:
    gc.freeze()
  return tf


def startup_log() -> str:
  """TensorFlow's start-up lines from load_tensorflow ('' before it ran)."""
  return ''.join(_startup_log)


# TensorFlow 2.21's own lines that say why it uses no GPU (as its libraries
# spell them; `strings libtensorflow_framework.so.2`): a CUDA library it
# could not load (the and-cuda extra missing, or the driver's libcuda), the
# driver (cuInit, the kernel module, versions), a GPU too old for the build,
# CUDA_VISIBLE_DEVICES hiding the GPUs. Matched anywhere in a line.
_GPU_REASONS = (
  'Could not find cuda drivers on your machine',
  "Could not load dynamic library '",
  'Cannot dlopen some GPU libraries',
  'Cannot dlopen all CUDA libraries',
  'Error loading CUDA libraries',
  'failed call to cuInit',
  'kernel driver does not appear to be running',
  'kernel reported version is',
  'libcuda reported version is',
  'driver version is insufficient',
  'no CUDA-capable device is detected',
  'Ignoring visible gpu device',
  'TensorFlow was not built with CUDA kernel binaries compatible',
  'Skipping registering GPU devices',
  'CUDA_VISIBLE_DEVICES is set to',
)
_GPU_REASON_RE = re.compile('|'.join(re.escape(r) for r in _GPU_REASONS))
_TF_LOG_PREFIX_RE = re.compile(r'^[IWEF]\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] ')


def gpu_reason_lines(log_text: str) -> list:
  """The lines of a captured TensorFlow start-up log that say why it sees
  no GPU, in order, each message once (TensorFlow repeats some as each of
  its libraries loads), as TensorFlow printed them."""
  lines, seen = [], set()
  for line in log_text.splitlines():
    line = line.rstrip()
    if not _GPU_REASON_RE.search(line):
      continue
    message = _TF_LOG_PREFIX_RE.sub('', line)
    if message not in seen:
      seen.add(message)
      lines.append(line)
  return lines


# The messages libjpeg (inside TensorFlow's JPEG decoder) prints straight to
# fd 2 when an image is corrupt: its errors (JERR_*) and warnings (JWRN_*),
# printf formats as libjpeg-turbo's jerror.h spells them. TensorFlow's own
# error for the same image reaches us as an OpError (see input_failures),
# so these lines say nothing more; no log level silences them.
_LIBJPEG_MESSAGES = (
  'ALIGN_TYPE is wrong, please fix',
  'Application transferred too few scanlines',
  'Application transferred too many scanlines',
  'Arithmetic table 0x%x was not defined',
  'Backing store not supported',
  'Bogus DAC index %d',
  'Bogus DAC value 0x%x',
  'Bogus DHT index %d',
  'Bogus DQT index %d',
  'Bogus Huffman table definition',
  'Bogus JPEG colorspace',
  'Bogus buffer control mode',
  'Bogus input colorspace',
  'Bogus marker length',
  'Bogus message code %d',
  'Bogus parameter',
  'Bogus sampling factors',
  'Bogus virtual array access',
  'Buffer passed to JPEG library is too small',
  'CCIR601 sampling not implemented yet',
  'Cannot quantize more than %d color components',
  'Cannot quantize to fewer than %d colors',
  'Cannot quantize to more than %d colors',
  'Cannot transcode due to multiple use of quantization table %d',
  'Component index %d: mismatching sampling ratio %d:%d, %d:%d, %c',
  'Corrupt JPEG data: %d extraneous bytes before marker 0x%x',
  'Corrupt JPEG data: bad Huffman code',
  'Corrupt JPEG data: bad arithmetic code',
  'Corrupt JPEG data: found marker 0x%x instead of RST%d',
  'Corrupt JPEG data: premature end of data segment',
  'DCT coefficient out of range',
  "Didn't expect more than one scan",
  'Empty JPEG image (DNL not supported)',
  'Empty input file',
  'Failed to create temporary file %s',
  'Fractional sampling not implemented yet',
  'Huffman code size table overflow',
  'Huffman table 0x%x was not defined',
  'IDCT output block size %d not supported',
  'Image too wide for this implementation',
  'Improper call to JPEG library in state %d',
  'Inconsistent progression sequence for component %d coefficient %d',
  'Input file read error',
  'Insufficient memory (case %d)',
  'Invalid JPEG file structure: SOS before SOF',
  'Invalid JPEG file structure: missing SOS marker',
  'Invalid JPEG file structure: two SOF markers',
  'Invalid JPEG file structure: two SOI markers',
  'Invalid SOS parameters for sequential JPEG',
  'Invalid color quantization mode change',
  'Invalid component ID %d in SOS',
  'Invalid crop request',
  'Invalid memory pool code %d',
  'Invalid progressive parameters Ss=%d Se=%d Ah=%d Al=%d',
  'Invalid progressive parameters at scan script entry %d',
  'Invalid scan script at entry %d',
  'JPEG datastream contains no image',
  'JPEG parameter struct mismatch: library thinks size is %d, caller '
  'expects %d',
  'Maximum supported image dimension is %d pixels',
  'Missing Huffman code table entry',
  'Not a JPEG file: starts with 0x%x 0x%x',
  'Not implemented yet',
  'Premature end of JPEG file',
  'Premature end of input file',
  'Quantization table 0x%x was not defined',
  'Requested feature was omitted at compile time',
  'Sampling factors too large for interleaved scan',
  'Scan script does not transmit all data',
  'Sorry, arithmetic coding is not implemented',
  'Suspension not allowed here',
  'Too many color components: %d, max %d',
  'Unknown Adobe color transform code %d',
  'Unsupported JPEG data precision %d',
  'Unsupported JPEG process: SOF type 0x%x',
  'Unsupported color conversion request',
  'Unsupported marker type 0x%x',
  'Virtual array controller messed up',
  'Warning: unknown JFIF revision number %d.%d',
  'Wrong JPEG library version: library is %d, caller expects %d',
)

_FORMAT_FIELDS = {'%d': r'-?\d+', '%x': r'[0-9a-fA-F]+', '%s': r'.*', '%c': '.'}


def libjpeg_lines_pattern() -> str:
  """A regex matching a whole line libjpeg prints (see _LIBJPEG_MESSAGES)."""
  alternatives = []
  for message in _LIBJPEG_MESSAGES:
    parts = re.split(r'(%[dxsc])', message)
    alternatives.append(
      ''.join(_FORMAT_FIELDS.get(p) or re.escape(p) for p in parts)
    )
  return '(?:%s)\r?' % '|'.join(alternatives)


# TensorFlow's C++ error lines when a peer dies mid-collective: every
# pending ring aborts with one header line ("E0000 <time> <thread>
# ring_alg.cc:291] Aborting RingReduce with UNAVAILABLE: ...") and its
# status's continuation lines (the gRPC detail, "The error could be from a
# previous operation..."), ~30 lines before the task's own one line naming
# the lost peer (cluster/verdicts.py). They are ERROR level, so the default
# TF_CPP_MIN_LOG_LEVEL=2 keeps them.
_TF_LOG_HEADER = r'[EWF]\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] '
_COLLECTIVE_ABORT = (
  r'Aborting Ring\w+ with .*',
  r'BaseCollectiveExecutor::StartAbort .*',
  r'.*Collective ops is aborted by: .*',
)
# Continuation lines of such a header's status: dropped only right after a
# dropped line (a kept line ends the run of them).
_COLLECTIVE_ABORT_FOLLOWERS = (
  r'Additional GRPC error information from remote target .*',
  r':UNKNOWN:Error received from peer .*',
  r'The error could be from a previous operation\. Restart your program '
  r'to reset\..*',
)


def collective_abort_pattern() -> str:
  """A regex matching a whole TensorFlow log line of a collective abort."""
  return '%s(?:%s)\r?' % (_TF_LOG_HEADER, '|'.join(_COLLECTIVE_ABORT))


def collective_abort_followers_pattern() -> str:
  """A regex matching a continuation line of a collective abort's status."""
  return '(?:%s)\r?' % '|'.join(_COLLECTIVE_ABORT_FOLLOWERS)


def shows_everything(environ=None) -> bool:
  """Whether the user asked for TensorFlow's info or warning lines
  (TF_CPP_MIN_LOG_LEVEL=0 or 1): then no line is dropped, libjpeg's and
  the collective aborts' included. The driver's default is 2."""
  level = (os.environ if environ is None else environ).get(
    'TF_CPP_MIN_LOG_LEVEL', '0'
  )
  return level.strip() in ('0', '1')


# The filter process: copies stdin (the driver's fd 2) to stdout (the real
# stderr) line by line, dropping the lines argv[1] matches, and those
# argv[2] matches right after a dropped line. It ignores the signals a
# terminal or launcher sends the process group, so it outlives the driver
# and passes on whatever a dying driver wrote last; it ends at end of input
# (when every writer has closed its end).
_FILTER_PROGRAM = r"""
import os, re, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
  signal.signal(s, signal.SIG_IGN)
drop = re.compile(sys.argv[1].encode())
follow = re.compile(sys.argv[2].encode())
out_ok, pending, dropping = True, b'', False
def put(data):
  global out_ok
  while out_ok and data:
    try:
      data = data[os.write(1, data):]
    except OSError:
      out_ok = False  # nowhere to write: keep reading, or writers block
def kept(line):
  global dropping
  dropping = bool(
    drop.fullmatch(line) or (dropping and follow.fullmatch(line))
  )
  return not dropping
while True:
  chunk = os.read(0, 1 << 16)
  if not chunk:
    break
  *lines, pending = (pending + chunk).split(b'\n')
  put(b''.join(l + b'\n' for l in lines if kept(l)))
if pending and kept(pending):
  put(pending)
"""


@contextlib.contextmanager
def noise_lines_dropped(enabled: bool = True):
  """While the body runs, fd 2 drops libjpeg's message lines and
  TensorFlow's collective-abort lines (with their continuation lines).

  Everything else written to fd 2 (Python's sys.stderr, TensorFlow's other
  C++ log lines, a crash's last words) passes through unchanged, line by
  line, to the original stderr, which is back in place when the body ends.
  Nothing is filtered without a filter process (it cannot start), or when
  the user asked for TensorFlow's info lines (shows_everything).
  """
  if not enabled or not sys.executable or shows_everything():
    yield
    return
  sys.stderr.flush()
  real = os.dup(2)
  try:
    child = subprocess.Popen(
      [
        sys.executable,
        '-I',
        '-S',
        '-c',
        _FILTER_PROGRAM,
        '(?:%s)|(?:%s)' % (libjpeg_lines_pattern(), collective_abort_pattern()),
        collective_abort_followers_pattern(),
      ],
      stdin=subprocess.PIPE,
      stdout=real,
      stderr=subprocess.DEVNULL,
    )
  except OSError:
    os.close(real)
    yield
    return
  os.dup2(child.stdin.fileno(), 2)
  try:
    yield
  finally:
    sys.stderr.flush()
    os.dup2(real, 2)
    os.close(real)
    child.stdin.close()
    try:  # everything written so far reaches stderr before we go on
      child.wait(timeout=10)
    except subprocess.TimeoutExpired:
      pass  # a process we started still holds the pipe: it ends with it


# The earlier name: the filter drops libjpeg's lines (and now the
# collective aborts' too).
libjpeg_lines_dropped = noise_lines_dropped
