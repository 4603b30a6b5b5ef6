"""Transport profile: start the tasks, collect hop times, fit each transport.

Three processes on 127.0.0.1 (transport_task.py): ps 0 and worker 1 serve,
worker 0 measures. Each transport's hop times are fitted as
time(bytes) = latency_us + bytes / bytes_per_us on the sizes from
FIT_FROM_BYTES up (weighing each size by its relative error, so one slow
big message does not decide the line alone); the smaller sizes, where one
latency fits badly, are kept as a table the cost model interpolates.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import subprocess

from tf_cnn_benchmarks.platform import checkout
from tf_cnn_benchmarks.platform import json_input
from tf_cnn_benchmarks.scaling.model import profile_format as fmt
from tf_cnn_benchmarks.scaling.profile import busy_cores
from tf_cnn_benchmarks.scaling.profile import profile_stats as stats
from tf_cnn_benchmarks.scaling.profile import transfer_cpu
from tf_cnn_benchmarks.scaling.profile import transport_bench

# Below this size the table is used; the line is fitted from here up.
FIT_FROM_BYTES = 64 << 10
# A transport without a measurable size term (logical CPUs of one process
# hand tensors over without a copy): bytes/us recorded as this.
NO_SIZE_TERM_BYTES_PER_US = 1e9

DESCRIPTIONS = {
  'grpc': 'TF gRPC send/recv between two tasks (separate processes) on '
  '127.0.0.1: a tensor passed ps<->worker by identity ops, per hop',
  'collective': 'CollectiveReduceV2 (the harness collective algorithm) '
  'over two worker tasks on 127.0.0.1, per all-reduce of the size',
  'local_copy': 'a tensor passed between two logical CPU devices of one '
  'process, per hop',
}
# Not a message size fit: one figure, the latency of a step a controller
# drives (transport_bench.measure_controller_step).
CONTROLLER_STEP = fmt.CONTROLLER_STEP
CONTROLLER_STEP_DESCRIPTION = (
  'a step driven over gRPC on two other tasks (ps 0, worker 1) by worker '
  "0's session, less a step of worker 0 alone (the mean of the runs): what "
  "starting another task's part of a step adds to it (a one-graph "
  "manager's controller; a worker with variables on a ps task), no size term"
)
# The same step with every core of the host kept busy (busy_cores.py): what
# it adds when the tasks share their cores with the other tasks' compute.
CONTROLLER_STEP_BUSY = fmt.CONTROLLER_STEP_BUSY
CONTROLLER_STEP_BUSY_DESCRIPTION = (
  CONTROLLER_STEP_DESCRIPTION + ', with every core of the host kept busy by '
  'one spinning process each (colocated tasks computing)'
)
CONTROLLER_STEPS = {
  CONTROLLER_STEP: CONTROLLER_STEP_DESCRIPTION,
  CONTROLLER_STEP_BUSY: CONTROLLER_STEP_BUSY_DESCRIPTION,
}


class TransportProfileError(RuntimeError):
  """The transport tasks failed; the message is one line."""


@dataclasses.dataclass(frozen=True)
class TransportProfile:
  """The fitted transports and the ps-side apply samples."""

  transports: dict  # name -> fmt.Transport
  ps_apply_samples: tuple  # (bytes, ms) per variable


def free_ports(count: int) -> list:
  """`count` TCP ports free on 127.0.0.1 right now."""
  sockets = []
  try:
    for _ in range(count):
      s = socket.socket()
      s.bind(('127.0.0.1', 0))
      sockets.append(s)
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def fit_transport(
  rows, measured: str, fit_from=FIT_FROM_BYTES, messages_per_hop=1
):
  """The fmt.Transport of [bytes, median, p10, p90] rows (sorted by bytes).

  The line is fitted on sizes >= fit_from (all sizes when fewer than two
  are); the table holds the medians of the sizes up to fit_from.
  messages_per_hop: the messages one measured hop is (fmt.MESSAGES_PER_HOP).
  """
  rows = sorted(rows)
  big = [r for r in rows if r[0] >= fit_from]
  if len(big) < 2:
    big, fit_from = rows, rows[0][0]
  latency, slope = stats.fit_line(
    [r[0] for r in big], [r[1] for r in big], relative=True
  )
  return fmt.Transport(
    latency_us=latency,
    bytes_per_us=1.0 / slope if slope > 0 else NO_SIZE_TERM_BYTES_PER_US,
    table=tuple((int(r[0]), float(r[1])) for r in rows if r[0] <= fit_from),
    fit_from_bytes=int(fit_from),
    measured=measured,
    samples=tuple(
      (int(r[0]), float(r[1]), float(r[2]), float(r[3])) for r in rows
    ),
    messages_per_hop=messages_per_hop,
  )


def controller_transport(rows, name=CONTROLLER_STEP) -> fmt.Transport:
  """A controller step ([[0, median, p10, p90, mean]]) as a Transport of
  no size term; `name` one of CONTROLLER_STEPS.

  Its latency is the mean (the median in rows without one): each step pays
  it, so a throughput pays the average, and busy cores make the figure
  bimodal (about 1 ms, or 4 when a RunGraph waited for a core).
  """
  _, median, p10, p90 = rows[0][:4]
  mean = rows[0][4] if len(rows[0]) > 4 else median
  return fmt.Transport(
    latency_us=float(mean),
    bytes_per_us=NO_SIZE_TERM_BYTES_PER_US,
    table=(),
    fit_from_bytes=0,
    measured=CONTROLLER_STEPS[name],
    samples=((0, float(median), float(p10), float(p90)),),
  )


def _spawn(args, **kwargs):
  env = checkout.child_env()
  command = checkout.module_argv(
    'tf_cnn_benchmarks.scaling.profile.transport_task'
  )
  return subprocess.Popen(
    command + args,
    env=env,
    cwd=checkout.ROOT,
    text=True,
    # Elsewhere than Linux the serving tasks notice their parent's end.
    preexec_fn=busy_cores.die_with_parent,
    **kwargs,
  )


def local_spec() -> dict:
  """A cluster spec of ps 0 and workers 0 and 1 on free 127.0.0.1 ports."""
  host = '127.0.0.1:%d'
  ports = free_ports(3)
  return {'ps': [host % ports[0]], 'worker': [host % p for p in ports[1:]]}


@contextlib.contextmanager
def serving_tasks(spec: dict):
  """ps 0 and worker 1 of `spec` serving, each in its own process, during
  the block (worker 0 is the caller's); yields their pids."""
  spec_text = json.dumps(spec)
  servers = [
    _spawn(
      ['serve', spec_text, job, str(task)],
      stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL,
    )
    for job, task in (('ps', 0), ('worker', 1))
  ]
  try:
    yield [proc.pid for proc in servers]
  finally:
    for proc in servers:
      proc.kill()
      proc.wait()


def _run_tasks(spec: dict, request: dict, timeout: float) -> dict:
  """Starts the serving tasks, runs the measuring one; its JSON result."""
  spec_text = json.dumps(spec)
  with serving_tasks(spec):
    measurer = _spawn(
      ['measure', spec_text, json.dumps(request)],
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
    )
    try:
      out, err = measurer.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
      measurer.kill()
      measurer.communicate()
      raise TransportProfileError(
        'transport profile: no result within %d s' % timeout
      ) from None
  lines = out.strip().splitlines()
  if measurer.returncode != 0 or not lines:
    raise TransportProfileError(
      'transport profile: the measuring task failed (status %s): %s'
      % (measurer.returncode, _error_line(err))
    )
  try:
    return json_input.loads(lines[-1], "the measuring task's result")
  except json_input.JsonInputError as e:
    raise TransportProfileError('transport profile: %s' % e) from None


def _error_line(stderr: str) -> str:
  """The exception line of a child's traceback (else its last line)."""
  lines = [line.strip() for line in (stderr or '').splitlines() if line]
  errors = [
    line
    for line in lines
    if line.split(':')[0].endswith(('Error', 'Exception', 'Interrupt'))
  ]
  return (errors or lines or ['no output'])[-1][:300]


def _with_cpu(transports: dict, timeout: float) -> dict:
  """gRPC and collective with the CPU their messages take from busy cores
  (transfer_cpu.py), measured by a run of tasks of its own."""
  request = {
    'transfer_cpu': True,
    'sizes': list(transfer_cpu.PROFILE_SIZES),
    'seconds': transfer_cpu.PROFILE_SECONDS,
    'copies': [1, fmt.CONCURRENT_MESSAGES],
    'groups': [2, 3],
  }
  rows = transfer_cpu.rows_from_json(
    _run_tasks(local_spec(), request, timeout)['transfer_cpu']
  )
  crowded = transfer_cpu.fit_concurrent(rows)
  grouped = transfer_cpu.fit_group(rows)
  out = {}
  for name, (message, byte) in transfer_cpu.fit(rows).items():
    op = None
    if name in grouped:  # a ring step's message and the op's own part
      message, op = grouped[name]
    out[name] = dataclasses.replace(
      transports[name],
      cpu_us_per_message=message,
      cpu_us_per_byte=byte,
      cpu_us_per_message_concurrent=crowded.get(name),
      cpu_us_per_op=op,
    )
  return out


def measure_transports(
  sizes=transport_bench.DEFAULT_SIZES,
  apply_shapes=(),
  optimizer_config=None,
  timeout: float = 900.0,
  cpu: bool = True,
) -> TransportProfile:
  """Measures and fits every transport (and the ps apply of `apply_shapes`).

  Args:
    sizes: message sizes in bytes.
    apply_shapes: variable shapes whose optimizer apply is timed on the ps
      task (empty: not measured).
    optimizer_config: a training.optimizers.OptimizerConfig (with
      apply_shapes).
    timeout: seconds the measuring task may take.
    cpu: also measure what a message takes from busy cores (about 40 s).
  """
  spec = local_spec()
  request = {'sizes': [int(s) for s in sizes]}
  if apply_shapes:
    request['apply_shapes'] = [list(s) for s in apply_shapes]
    request['optimizer'] = dataclasses.asdict(optimizer_config)
  result = _run_tasks(spec, request, timeout)
  transports = {
    name: fit_transport(
      result[name], measured, messages_per_hop=fmt.MESSAGES_PER_HOP[name]
    )
    for name, measured in DESCRIPTIONS.items()
  }
  if cpu:
    transports.update(_with_cpu(transports, timeout))
  for name in CONTROLLER_STEPS:
    if result.get(name):
      transports[name] = controller_transport(result[name], name)
  return TransportProfile(
    transports, tuple(tuple(row) for row in result.get('ps_apply', ()))
  )
