"""Steps observed after warm-up: tfprof profile, partitioned graphs, trace.

After the warm-up and before the timed steps, a run with --tfprof_file,
--partitioned_graph_file_prefix or --trace_file runs a few extra, untimed
training steps with tracing options (the timed steps stay clean):

  --tfprof_file=F: the first NUM_STEPS_TO_PROFILE (10, at most --num_batches)
    steps run with full tracing and are added to a tfprof profiler
    (tf.compat.v1.profiler.Profiler, the graph-mode profiler API); the
    ProfileProto goes to F (read it with the tfprof tools) and the
    NUM_OPS_TO_PRINT (20) op types that take the most time are printed.
  --partitioned_graph_file_prefix=P: the first observed step asks for the
    partitioned, optimised graphs (RunOptions.output_partition_graphs); each
    device's graph is written to P<device>[.ext], the device with '/' and
    ':' made '_' (classic names), text if the file name ends in 'txt'.
  --trace_file=F: the first observed step is traced; F gets a Chrome trace,
    or with --nouse_chrome_trace_format the raw StepStats text proto.

At most 10 extra steps run, and the same number on every task of a cluster
(workers in lock step must run the same steps); only the chief task (worker
0, or the controller) traces them and writes the files, the others run
plain steps.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Callable, Optional

import tensorflow as tf

from tf_cnn_benchmarks.observability import summaries as observability

tf1 = tf.compat.v1

NUM_STEPS_TO_PROFILE = 10
NUM_OPS_TO_PRINT = 20
NAME_WIDTH = 40  # longer op names are cut in the printed table


@dataclasses.dataclass(frozen=True)
class OpTime:
  """One op type of the profile, averaged over the profiled steps."""

  op_type: str
  num_nodes: int  # graph nodes of this type that ran
  micros: int  # execution time per step, all nodes of the type
  requested_bytes: int  # memory requested per step


@dataclasses.dataclass(frozen=True)
class TopOps:
  """The op types that took most time, and the time of every op."""

  ops: tuple  # OpTime, most time first, at most NUM_OPS_TO_PRINT
  total_micros: int  # per step, every op type (shown or not)


def num_observed_steps(p) -> int:
  """Extra untimed steps Params `p` asks for after warm-up (0: none)."""
  timed = p.num_batches if isinstance(p.num_batches, int) else None  # auto
  profiled = min(NUM_STEPS_TO_PROFILE, timed or NUM_STEPS_TO_PROFILE)
  profiled = profiled if p.tfprof_file else 0
  traced = 1 if (p.trace_file or p.partitioned_graph_file_prefix) else 0
  return max(profiled, traced)


def run_observed_steps(
  p,
  graph: tf.Graph,
  run_step: Callable,
  print_line: Callable[[str], None],
  *,
  writes_files: bool,
) -> Optional[TopOps]:
  """Runs the observed steps and writes what they observed.

  Args:
    p: the run's Params.
    graph: the graph the steps run in (for the profiler).
    run_step: run_step(options, run_metadata) runs one training step with
      these RunOptions (None: plain) and fills run_metadata.
    print_line: prints one console line.
    writes_files: whether this process traces and writes the files (the
      chief); the others run the same number of plain steps.

  Returns:
    The profile's top op types, or None without --tfprof_file on this
    process.
  """
  steps = num_observed_steps(p)
  profiler = None
  if p.tfprof_file and writes_files:
    profiler = _Profiler(graph)
  try:
    for index in range(steps):
      options = _options(p, index, writes_files, profiler is not None)
      metadata = tf1.RunMetadata() if options is not None else None
      run_step(options, metadata)
      if profiler is not None and index < NUM_STEPS_TO_PROFILE:
        profiler.add_step(index, metadata)
      if index == 0 and writes_files:
        _write_first_step_files(p, metadata, print_line)
    if profiler is None:
      return None
    with _writing(p.tfprof_file, whole=True):
      top = profiler.write(p.tfprof_file)
  finally:
    if profiler is not None:
      profiler.close()
  print_line('Wrote tfprof profile of %d steps to %s' % (steps, p.tfprof_file))
  for line in format_top_ops(top, steps):
    print_line(line)
  return top


def _options(p, index: int, writes_files: bool, profiling: bool):
  """The RunOptions of observed step `index` (None: a plain step)."""
  if not writes_files:
    return None
  first = index == 0
  options = tf1.RunOptions()
  if profiling or (first and p.trace_file):
    options.trace_level = tf1.RunOptions.FULL_TRACE
  if first and p.partitioned_graph_file_prefix:
    options.output_partition_graphs = True
  if options.trace_level == tf1.RunOptions.NO_TRACE and not (
    options.output_partition_graphs
  ):
    return None
  return options


@contextlib.contextmanager
def _writing(path: str, whole: bool = False):
  """A failed write of `path` (a full disk) becomes OSError naming the file.

  The step loop turns it into one line (outputs.write_failure); TensorFlow's
  own file errors become OSError too. whole: `path` is one file, removed
  when its write fails (a torn trace is no trace).
  """
  try:
    yield
  except (OSError, tf.errors.OpError) as e:
    if whole and os.path.isfile(path):
      os.remove(path)
    if isinstance(e, OSError):
      raise OSError(e.errno, e.strerror or str(e), e.filename or path) from None
    reason = e.message.splitlines()[0].rsplit('; ', 1)[-1]
    raise OSError(None, reason, path) from None


def _write_first_step_files(p, metadata, print_line) -> None:
  if p.trace_file:
    with _writing(p.trace_file, whole=True):
      observability.write_step_trace(
        p.trace_file, metadata, chrome=p.use_chrome_trace_format
      )
    print_line(
      'Wrote %s of one step to %s'
      % (
        'trace' if p.use_chrome_trace_format else 'raw StepStats',
        p.trace_file,
      )
    )
  if p.partitioned_graph_file_prefix:
    with _writing(p.partitioned_graph_file_prefix):
      paths = write_partition_graphs(p.partitioned_graph_file_prefix, metadata)
    for path in paths:
      print_line('Wrote partitioned graph to %s' % path)


# ---- partitioned graphs ---------------------------------------------------


def partition_device(graph_def) -> str:
  """The device a partition graph runs on (the device of its nodes)."""
  for node in graph_def.node:
    if node.device:
      return node.device
  return 'unknown_device'


def partition_graph_path(prefix: str, device: str) -> str:
  """PREFIX<device>[.ext]: the classic file name of one device's partition."""
  directory, filename = os.path.split(prefix)
  base, dot, ext = filename.rpartition('.')
  if not dot:
    base, ext = filename, ''
  else:
    ext = '.' + ext
  name = device.replace('/', '_').replace(':', '_')
  return os.path.join(directory, '%s%s%s' % (base, name, ext))


def write_partition_graphs(prefix: str, run_metadata) -> list:
  """Writes each partition graph of a step; returns the paths in order.

  Two partitions on one device (possible in a cluster) get '_1', '_2', ...
  after the device name.
  """
  as_text = os.path.basename(prefix).endswith('txt')
  paths = []
  for graph_def in run_metadata.partition_graphs:
    path = partition_graph_path(prefix, partition_device(graph_def))
    stem, ext = os.path.splitext(path)
    duplicate = 1
    while path in paths:
      path = '%s_%d%s' % (stem, duplicate, ext)
      duplicate += 1
    observability.write_graph_def(path, graph_def, as_text)
    paths.append(path)
  return paths


# ---- tfprof ---------------------------------------------------------------


class _Profiler:
  """tf.compat.v1.profiler.Profiler, released when done.

  TensorFlow keeps one profiler per process (a second one while the first
  is alive crashes the process), so close() frees it at once.
  """

  def __init__(self, graph: tf.Graph):
    self._profiler = tf1.profiler.Profiler(graph)

  def add_step(self, step: int, run_metadata) -> None:
    self._profiler.add_step(step, run_metadata)

  def write(self, path: str) -> TopOps:
    """Writes the ProfileProto to `path`; returns its top op types."""
    observability.makedirs_for(path)
    with open(path, 'wb') as f:
      f.write(self._profiler.serialize_to_string())
    options = tf1.profiler.ProfileOptionBuilder.time_and_memory()
    options['order_by'] = 'micros'
    # The op view nests each op type under the previous one: as classic,
    # show only the top ones (a hundred levels would exceed protobuf's
    # nesting limit), but count every op in the root's total.
    options['max_depth'] = NUM_OPS_TO_PRINT
    options['account_displayed_op_only'] = False
    options['output'] = 'none'  # printed by format_top_ops
    root = self._profiler.profile_operations(options)
    return TopOps(
      ops=tuple(op_times(root)[:NUM_OPS_TO_PRINT]),
      total_micros=root.total_exec_micros,
    )

  def close(self) -> None:
    self._profiler = None  # its __del__ releases TensorFlow's profiler


def op_times(root) -> list:
  """The op types of a tfprof 'op' view, most time first (ties: by name).

  Args:
    root: the MultiGraphNodeProto profile_operations returned (its op types
      hang as a chain, each node the child of the previous one).

  Returns:
    One OpTime per op type in the view.
  """
  rows = []
  nodes = list(root.children)
  while nodes:
    node = nodes.pop()
    nodes.extend(node.children)
    rows.append(
      OpTime(
        op_type=node.name,
        num_nodes=len(node.graph_nodes),
        micros=node.exec_micros,
        requested_bytes=node.requested_bytes,
      )
    )
  rows.sort(key=lambda r: (-r.micros, r.op_type))
  return rows


def format_top_ops(top: TopOps, num_steps: int) -> list:
  """Console lines of the top op types (tfprof's column names).

  The percentage is of every op's time. A node tfprof finds no op type for
  (one the runtime added: sends, receives, grappler's rewrites) is listed
  under its node name, cut to NAME_WIDTH.
  """
  total = top.total_micros or 1
  width = min(
    NAME_WIDTH, max([len('node name')] + [len(r.op_type) for r in top.ops])
  )
  lines = [
    'Top %d ops by execution time (average of %d profiled steps):'
    % (len(top.ops), num_steps),
    '%-*s %6s | %15s | %s'
    % (width, 'node name', 'nodes', 'requested bytes', 'total execution time'),
  ]
  for r in top.ops:
    lines.append(
      '%-*s %6d | %15s | %10s (%5.1f%%)'
      % (
        width,
        _cut(r.op_type, width),
        r.num_nodes,
        _bytes(r.requested_bytes),
        _micros(r.micros),
        100.0 * r.micros / total,
      )
    )
  return lines


def _cut(name: str, width: int) -> str:
  return name if len(name) <= width else '..' + name[-(width - 2) :]


def _micros(micros: int) -> str:
  if micros >= 1000000:
    return '%.2fsec' % (micros / 1e6)
  if micros >= 1000:
    return '%.2fms' % (micros / 1e3)
  return '%dus' % micros


def _bytes(count: int) -> str:
  for unit, size in (('GB', 1 << 30), ('MB', 1 << 20), ('KB', 1 << 10)):
    if count >= size:
      return '%.2f%s' % (count / size, unit)
  return '%dB' % count


# ---- TensorBoard's profile -------------------------------------------------


class TensorBoardProfile:
  """--tensorboard_profile_dir: TensorFlow's profiler over the timed steps.

  tf.profiler.experimental (the public profiler API) records the graph-mode
  session's ops too; stop() writes DIR/plugins/profile/<run>/<host>.xplane.pb,
  the file TensorBoard's profile plugin (xprof) opens. Only the chief task
  profiles (the profiler sees this host).
  """

  def __init__(self, logdir: Optional[str], print_line: Callable[[str], None]):
    self.logdir = logdir
    self.print_line = print_line
    self.running = False

  def start(self) -> None:
    """Starts profiling (nothing without a directory)."""
    if self.logdir:
      with _writing(self.logdir):
        tf.profiler.experimental.start(self.logdir)
      self.running = True

  def stop(self) -> None:
    """Stops profiling and writes the profile (once)."""
    if not self.running:
      return
    self.running = False
    with _writing(self.logdir):
      tf.profiler.experimental.stop()
    self.print_line(
      'Wrote TensorBoard profile of the timed steps to %s' % (self.logdir)
    )
