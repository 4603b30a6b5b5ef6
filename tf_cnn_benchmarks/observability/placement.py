"""The placement report of a built graph (--placement_file, --build_only).

Read from the graph the run would execute, never from what the flags say:
  * every op with its type, device and dtypes;
  * where each variable and its replicas live ('v0/x', 'v1/x', 'v/x' are
    copies of the relative name 'x');
  * where each gradient is reduced: the ops between the towers' gradients
    and each optimizer's apply op (the all-reduce's name scope, its summing
    ops and their devices, the apply devices);
  * the tensors that cross devices in one step (and in the post-init ops),
    by device pair, in bytes from static shapes; TensorFlow sends a tensor
    once to each device that consumes it, so an edge is (tensor, device);
  * the ops per device, and the kernel check (gpu_kernels.py).

No TensorFlow device is needed: a graph built with /gpu:N strings on a CPU
machine reports what a GPU machine would run.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
import sys

import tensorflow as tf

from tf_cnn_benchmarks.platform import gpu_kernels
from variable_mgr import allreduce
from variable_mgr import naming

# Op types that hold a variable's storage.
VARIABLE_OPS = frozenset(['VariableV2', 'VarHandleOp', 'Variable'])
# Ops a variable's ref or handle passes through unchanged (a cond's Switch).
_PASS_THROUGH = frozenset(['Identity', 'Switch', 'Enter', 'RefIdentity'])
# Ops that sum (or exchange) gradients: the reduction's "where".
REDUCE_OPS = frozenset(
  [
    'AddN',
    'Add',
    'AddV2',
    'NcclAllReduce',
    'CollectiveReduceV2',
    'CollectiveReduce',
    'AccumulatorApplyGradient',
    'ResourceAccumulatorApplyGradient',
    'AccumulatorTakeGradient',
    'ResourceAccumulatorTakeGradient',
  ]
)
# Name scopes of the all-reduce algorithms ('allreduce_nccl', made unique
# as 'allreduce_nccl_1', ...; variable_mgr/allreduce.py) and of the cluster
# collectives ('collective_allreduce'; variable_mgr/collectives.py).
_ALGORITHM_SCOPE = re.compile(
  r'(?:^|/)(?:allreduce_(%s)|(collective)_allreduce)(?:_\d+)?/'
  % '|'.join(sorted(allreduce.algorithm_names(), key=len, reverse=True))
)
UNPLACED = '(unplaced)'


def canonical(device: str) -> str:
  """'/job:worker/replica:0/task:1/device:GPU:0' style; UNPLACED for ''."""
  if not device:
    return UNPLACED
  return tf.DeviceSpec.from_string(device).to_string()


def tensor_bytes(t: tf.Tensor) -> int | None:
  """Bytes of a tensor from its static shape (None: shape not static)."""
  dtype = t.dtype.base_dtype
  if dtype in (tf.resource, tf.variant, tf.string):
    return None
  if not t.shape.is_fully_defined():
    return None
  return t.shape.num_elements() * dtype.size


def closure(fetches) -> list:
  """Every op the fetches depend on (data and control inputs), fetches too."""
  seen, stack = {}, []
  for f in fetches:
    if f is None:
      continue
    op = f if isinstance(f, tf.Operation) else f.op
    stack.append(op)
  while stack:
    op = stack.pop()
    if op.name in seen:
      continue
    seen[op.name] = op
    stack.extend(t.op for t in op.inputs)
    stack.extend(op.control_inputs)
  return list(seen.values())


def _input_is_ref(op: tf.Operation, index: int) -> bool:
  """Whether input `index` of `op` is declared a ref (TF colocates it)."""
  k = 0
  for arg in op.op_def.input_arg:
    if arg.number_attr:
      count = op.get_attr(arg.number_attr)
    elif arg.type_list_attr:
      count = len(op.get_attr(arg.type_list_attr))
    else:
      count = 1
    if index < k + count:
      return arg.is_ref
    k += count
  return False


def transfers(ops) -> list:
  """Tensors crossing devices among `ops`, by (source, destination) pair.

  Resource handles and ref inputs are not transfers: TF colocates their
  consumer with the variable. A tensor is sent once per consuming device.
  """
  sent = set()
  pairs = collections.defaultdict(lambda: [0, 0, 0])  # edges, bytes, unknown
  for op in ops:
    dst = canonical(op.device)
    for i, t in enumerate(op.inputs):
      src = canonical(t.op.device)
      if src == dst or UNPLACED in (src, dst) or (t.name, dst) in sent:
        continue
      if t.dtype.base_dtype == tf.resource:
        continue
      if t.dtype != t.dtype.base_dtype and _input_is_ref(op, i):  # a ref
        continue
      sent.add((t.name, dst))
      num = tensor_bytes(t)
      entry = pairs[(src, dst)]
      entry[0] += 1
      if num is None:
        entry[2] += 1
      else:
        entry[1] += num
  return [
    {'src': s, 'dst': d, 'edges': e, 'bytes': b, 'unknown_size_edges': u}
    for (s, d), (e, b, u) in sorted(pairs.items())
  ]


def _variable_of(t: tf.Tensor) -> tf.Operation | None:
  """The variable op behind a var / ref / handle input (through Identity)."""
  op = t.op
  while op.type in _PASS_THROUGH and op.inputs:
    op = op.inputs[0].op
  return op if op.type in VARIABLE_OPS else None


def variable_bytes(op: tf.Operation) -> int | None:
  """Bytes of one copy of a variable op (None: shape not static)."""
  shape = tf.TensorShape(op.get_attr('shape'))
  if not shape.is_fully_defined():
    return None
  return shape.num_elements() * tf.as_dtype(op.get_attr('dtype')).size


def variables(ops) -> list:
  """Every variable, its copies grouped by relative name (naming.py)."""
  groups = collections.defaultdict(list)
  for op in ops:
    if op.type in VARIABLE_OPS:
      groups[naming.strip_replica_prefix(op.name)].append(op)
  out = []
  for relative, copies in sorted(groups.items()):
    out.append(
      {
        'name': relative,
        'dtype': tf.as_dtype(copies[0].get_attr('dtype')).name,
        'bytes': variable_bytes(copies[0]),
        'copies': [
          {'name': v.name, 'device': canonical(v.device)} for v in copies
        ],
      }
    )
  return out


def _is_apply(op: tf.Operation) -> bool:
  """Whether `op` is an optimizer's update of a variable (Apply*)."""
  return op.type.startswith(('Apply', 'ResourceApply'))


# Functional control flow: the loss-scale skip applies the gradients inside
# a cond, whose ops live in a function of the graph's library.
_CONDITIONALS = frozenset(['If', 'StatelessIf', 'Case', 'StatelessCase'])


def _forward_path(grad: tf.Tensor) -> tuple:
  """(ops, apply devices) from a tower's gradient to its updates.

  Follows non-scalar data edges (scalars are norms and verdicts: following
  them would reach every other gradient) until an optimizer's apply op, or
  a conditional whose branch applies (its device: the feeding op's).
  """
  seen, path, applied = set(), [], set()
  stack = [(c, grad.op) for c in grad.consumers()]
  while stack:
    op, producer = stack.pop()
    if _is_apply(op) or op.type in _CONDITIONALS:
      applied.add(canonical(op.device if _is_apply(op) else producer.device))
      continue
    if op.name in seen:
      continue
    seen.add(op.name)
    path.append(op)
    for t in op.outputs:
      if t.shape.rank != 0 and t.dtype.base_dtype != tf.resource:
        stack.extend((c, op) for c in t.consumers())
  return path, applied


def _algorithm(path: list) -> str:
  """The reduction's name: the all-reduce scope, else what the ops do."""
  scopes = sorted(
    {
      m.group(1) or m.group(2)
      for op in path
      for m in [_ALGORITHM_SCOPE.search(op.name)]
      if m
    }
  )
  if scopes:
    return '+'.join(scopes)
  types = {op.type for op in path}
  if types & {'AccumulatorApplyGradient', 'ResourceAccumulatorApplyGradient'}:
    return 'mean+sync_accumulators'
  if types & {'CollectiveReduceV2', 'CollectiveReduce'}:
    return 'collective'
  if types & {'AddN', 'AddV2', 'Add'}:
    return 'mean'
  return 'none'


def reductions(tower_grads) -> list:
  """Per relative variable name: where its gradients are reduced, applied.

  tower_grads: every tower's (gradient, variable) pairs.
  """
  by_name = {}
  for grads in tower_grads:
    for grad, var in grads:
      if grad is None:
        continue
      entry = by_name.setdefault(
        naming.strip_replica_prefix(var.op.name),
        {'paths': {}, 'apply_devices': set()},
      )
      path, applied = _forward_path(grad)
      entry['paths'].update((op.name, op) for op in path)
      entry['apply_devices'] |= applied
  out = []
  for name, entry in sorted(by_name.items()):
    path = list(entry['paths'].values())
    reduce_ops = [op for op in path if op.type in REDUCE_OPS]
    out.append(
      {
        'variable': name,
        'algorithm': _algorithm(path),
        'reduce_ops': dict(
          sorted(collections.Counter(op.type for op in reduce_ops).items())
        ),
        'reduce_devices': sorted({canonical(op.device) for op in reduce_ops}),
        'apply_devices': sorted(entry['apply_devices']),
      }
    )
  return out


def post_init_copies(post_init_ops) -> list:
  """What each post-init op writes, and from where (the v0 -> vN copies)."""
  out = []
  for op in post_init_ops:
    op = op if isinstance(op, tf.Operation) else op.op
    if op.type not in ('Assign', 'AssignVariableOp'):
      continue
    target = _variable_of(op.inputs[0])
    source = _source_of(op.inputs[1])
    out.append(
      {
        'target': target.name if target is not None else op.inputs[0].op.name,
        'target_device': canonical(op.device),
        'source': source.name,
        'source_type': source.type,
        'source_device': canonical(source.device),
      }
    )
  return out


def _source_of(t: tf.Tensor) -> tf.Operation:
  """The variable a value was read from, else the op that made it."""
  op = t.op
  while op.type in _PASS_THROUGH | {'ReadVariableOp'} and op.inputs:
    op = op.inputs[0].op
  return op


def tower_inputs(inputs) -> list:
  """Where each tower's images and labels come from."""
  out = []
  for i, (images, labels) in enumerate(inputs):
    out.append(
      {
        'tower': i,
        'images': {
          'op': images.op.name,
          'type': images.op.type,
          'device': canonical(images.op.device),
        },
        'labels': {
          'op': labels.op.name,
          'type': labels.op.type,
          'device': canonical(labels.op.device),
        },
      }
    )
  return out


def op_record(op: tf.Operation, in_step: bool) -> dict:
  """One op of the report: name, type, device, dtypes of its outputs, and
  whether a step runs it."""
  return {
    'name': op.name,
    'type': op.type,
    'device': canonical(op.device),
    'dtypes': [t.dtype.base_dtype.name for t in op.outputs],
    'in_step': in_step,
  }


class MissingKernelError(RuntimeError):
  """A GPU-placed op has no GPU kernel (the message is one line)."""


@dataclasses.dataclass(frozen=True)
class PlacementReport:
  """Everything the placement report says about one built graph."""

  run: dict  # manager, all-reduce, tower devices, soft placement
  ops: list
  variables: list
  reductions: list
  step_transfers: list  # crossing devices once per step
  post_init_transfers: list
  post_init_copies: list
  inputs: list
  ops_per_device: dict
  kernel_check: gpu_kernels.KernelCheck

  def to_dict(self) -> dict:
    """The JSON document of --placement_file."""
    return {
      'run': self.run,
      'summary': {
        'ops_per_device': self.ops_per_device,
        'variables': self.variables,
        'reductions': self.reductions,
        'step_transfers': self.step_transfers,
        'post_init_transfers': self.post_init_transfers,
        'post_init_copies': self.post_init_copies,
        'inputs': self.inputs,
        'kernel_check': self.kernel_check.to_dict(),
      },
      'ops': self.ops,
    }

  def write(self, path: str) -> None:
    """Writes the JSON document (whole: a temporary file renamed into place).

    Raises:
      OSError: naming `path`, when the write fails (a full disk); the
        temporary file is removed.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = '%s.tmp.%d' % (path, os.getpid())
    try:
      with open(tmp, 'w') as f:
        json.dump(self.to_dict(), f, indent=1)
        f.write('\n')
      os.replace(tmp, path)
    except OSError as e:
      if os.path.exists(tmp):
        os.remove(tmp)
      raise OSError(e.errno, e.strerror or str(e), path) from None


def build_report(
  graph: tf.Graph,
  *,
  step_fetches,
  post_init_ops,
  tower_grads,
  tower_inputs_,
  run_info: dict,
  allow_soft_placement: bool,
) -> PlacementReport:
  """The report of `graph`; step_fetches: what one step runs."""
  all_ops = graph.get_operations()
  step_ops = closure(step_fetches)
  step_names = {op.name for op in step_ops}
  init_ops = closure(post_init_ops)
  var_list = variables(all_ops)
  return PlacementReport(
    run=dict(run_info, allow_soft_placement=allow_soft_placement),
    ops=[op_record(op, op.name in step_names) for op in all_ops],
    variables=var_list,
    reductions=reductions(tower_grads),
    step_transfers=transfers(step_ops),
    post_init_transfers=transfers(init_ops),
    post_init_copies=post_init_copies(post_init_ops),
    inputs=tower_inputs(tower_inputs_),
    ops_per_device=_ops_per_device(all_ops, step_ops, var_list),
    kernel_check=gpu_kernels.check_graph(
      graph, allow_soft_placement=allow_soft_placement
    ),
  )


def _ops_per_device(all_ops, step_ops, var_list) -> dict:
  table = collections.defaultdict(
    lambda: {'ops': 0, 'step_ops': 0, 'variables': 0, 'variable_bytes': 0}
  )
  for op in all_ops:
    table[canonical(op.device)]['ops'] += 1
  for op in step_ops:
    table[canonical(op.device)]['step_ops'] += 1
  for v in var_list:
    for copy in v['copies']:
      row = table[copy['device']]
      row['variables'] += 1
      row['variable_bytes'] += v['bytes'] or 0
  return dict(sorted(table.items()))


def compact_devices(devices) -> str:
  """'/device:GPU:0..7' for a run of devices that differ in index only."""
  groups = collections.defaultdict(list)
  others = []
  for d in devices:
    spec = tf.DeviceSpec.from_string(d) if d != UNPLACED else None
    if spec is None or spec.device_index is None:
      others.append(d)
      continue
    groups[spec.replace(device_index=0).to_string()[:-1]].append(
      spec.device_index
    )
  parts = []
  for prefix, indices in sorted(groups.items()):
    indices = sorted(set(indices))
    runs, start = [], indices[0]
    for a, b in zip(indices, indices[1:] + [None]):
      if b != a + 1:
        runs.append('%d' % a if start == a else '%d..%d' % (start, a))
        start = b
    parts.append(prefix + ','.join(runs))
  return ', '.join(parts + sorted(others)) or '-'


def summary_lines(report: PlacementReport) -> list:
  """The console's placement table."""
  lines = ['Placement: %d ops' % len(report.ops)]
  lines.append(
    '%-44s %8s %9s %6s %10s' % ('device', 'ops', 'step ops', 'vars', 'var MB')
  )
  for device, row in report.ops_per_device.items():
    lines.append(
      '%-44s %8d %9d %6d %10.2f'
      % (
        device,
        row['ops'],
        row['step_ops'],
        row['variables'],
        row['variable_bytes'] / 1e6,
      )
    )
  lines.extend(_reduction_lines(report.reductions))
  lines.append('Cross-device tensors per step (source -> destination):')
  for t in report.step_transfers or [
    {'src': '-', 'dst': '-', 'edges': 0, 'bytes': 0}
  ]:
    lines.append(
      '  %s -> %s: %d tensor(s), %.3f MB'
      % (t['src'], t['dst'], t['edges'], t['bytes'] / 1e6)
    )
  copies = collections.Counter(
    (c['source_device'], c['target_device']) for c in report.post_init_copies
  )
  if copies:
    lines.append(
      'Post-init copies: %s'
      % '; '.join(
        '%d %s -> %s' % (n, s, d) for (s, d), n in sorted(copies.items())
      )
    )
  for i in report.inputs:
    lines.append(
      'Input of tower %d: images on %s, labels on %s'
      % (i['tower'], i['images']['device'], i['labels']['device'])
    )
  lines.append(_kernel_line(report.kernel_check))
  return lines


def _reduction_lines(reductions_) -> list:
  groups = collections.Counter(
    (
      r['algorithm'],
      compact_devices(r['reduce_devices']),
      compact_devices(r['apply_devices']),
      ', '.join('%s x%d' % kv for kv in r['reduce_ops'].items()),
    )
    for r in reductions_
  )
  lines = ['Gradient reductions (%d variables):' % len(reductions_)]
  for (alg, where, applied, ops), n in sorted(groups.items()):
    lines.append(
      '  %d variable(s): %s; reduced on %s (%s); applied on %s'
      % (n, alg, where, ops or 'no reduce op', applied)
    )
  return lines


def _kernel_line(check: gpu_kernels.KernelCheck) -> str:
  if not check.registry_has_gpu_kernels:
    return (
      'GPU kernel check: this TensorFlow build registers no GPU kernels; '
      '%d GPU op(s) not checked' % check.checked
    )
  if not check.missing:
    return 'GPU kernel check: %d GPU op(s), every one has a GPU kernel' % (
      check.checked
    )
  return (
    'GPU kernel check: %d GPU op(s), %d without a GPU kernel (%d soft-'
    'placed on CPU, %d would fail)'
    % (
      check.checked,
      len(check.missing),
      len(check.soft_placed),
      len(check.failing),
    )
  )


def report_run(built, session_config, run, print_line, *, build_only=False):
  """Reports a run's built graph: the console table and --placement_file.

  built: the run's BuiltGraph; run: what the report says of the run (its
  params, manager, devices, precision, cluster_describe: a reporting
  RunFacts); print_line: the run's console; session_config: the
  ConfigProto the run's session uses (its allow_soft_placement decides
  whether an op without a GPU kernel moves to the CPU or fails). With
  build_only such a failure raises MissingKernelError (after the file is
  written); a real run warns and lets TensorFlow's placer decide.
  """
  p = run.params
  report = build_report(
    built.graph,
    step_fetches=[built.step_op, built.loss, built.worker_loss],
    post_init_ops=built.post_init_ops,
    tower_grads=built.tower_grads,
    tower_inputs_=built.tower_inputs,
    run_info={
      'model': p.model,
      'variable_update': p.variable_update,
      'manager': run.manager.describe(),
      'all_reduce': run.manager.all_reduce_description(),
      'device': p.device,
      'num_gpus': p.num_gpus,
      'tower_devices': [canonical(d) for d in run.devices],
      'precision': run.precision,
      'cluster': run.cluster_describe,
      'build_only': bool(build_only),
      'tensorflow': tf.__version__,
      'cuda_build': gpu_kernels.is_cuda_build(),
    },
    allow_soft_placement=session_config.allow_soft_placement,
  )
  for line in summary_lines(report):
    print_line(line)
  if p.placement_file:
    report.write(p.placement_file)
    print_line('Wrote placement report to %s' % p.placement_file)
  error = report.kernel_check.first_error()
  if error and build_only:
    raise MissingKernelError(error)
  if error:
    print('warning: %s' % error, file=sys.stderr, flush=True)
  return report
