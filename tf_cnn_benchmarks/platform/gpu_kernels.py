"""Does this TensorFlow build have a GPU kernel for every op placed on a GPU?

A graph built for GPUs on a CPU-only machine (--build_only) never meets
TensorFlow's placer, so an op with no GPU kernel for its dtypes would only
fail on the GPU machine. This module answers the placer's question from the
kernel registry of the installed wheel: for an op of type T with attributes
A on device kind GPU, is there a kernel registered for GPU (or for
DEVICE_DEFAULT, which TensorFlow's FindKernelRegistration falls back to for
any non-symbolic device) whose type constraints A satisfies?

The Linux `tensorflow` wheel is built with CUDA: it registers its GPU kernels
whether or not a GPU or a CUDA driver is present (tf.sysconfig's build info
says `is_cuda_build`; MatMul has float32/float16/bfloat16 GPU kernels), so
the check proves the kernels exist in the build that would run the graph. A
build without GPU kernels proves nothing: `registry_has_gpu_kernels()` says
so, and the check then reports every op as unchecked rather than missing.

What it cannot prove: that a kernel runs (CUDA/cuDNN at run time), nor the
choices of TensorFlow's placer for ops the graph leaves unplaced.
"""

from __future__ import annotations

import dataclasses
import functools

import tensorflow as tf

# A private import (one of the project's two, each with its reason here):
# TF 2.21 has no public API for its kernel registry (tf.raw_ops lists ops,
# not kernels; tf.sysconfig only says whether the build has CUDA).
# kernels.get_all_registered_kernels() wraps the C API's
# TF_GetAllRegisteredKernels and returns the KernelList proto.
from tensorflow.python.framework import kernels as _kernels  # pylint: disable=g-direct-tensorflow-import

GPU = 'GPU'
CPU = 'CPU'
# Kernels registered for DEVICE_DEFAULT serve any device kind that has none
# of its own (NoOp, VarHandleOp, ReadVariableOp, the collectives, ...).
DEFAULT = 'DEFAULT'


@dataclasses.dataclass(frozen=True)
class _Kernel:
  """One registered kernel: its type constraints and host-memory args."""

  constraints: tuple  # ((attr name, frozenset of DType enums), ...)
  host_memory_args: tuple
  label: str


@functools.lru_cache(maxsize=1)
def _raw_registry() -> dict:
  """{(op type, device kind): [KernelDef, ...]} of this build (read once)."""
  table = {}
  for k in _kernels.get_all_registered_kernels().kernel:
    table.setdefault((k.op, k.device_type), []).append(k)
  return table


@functools.lru_cache(maxsize=None)
def _kernels_of(op_type: str, kind: str) -> tuple:
  """The registered kernels of one op type on one device kind."""
  return tuple(
    _Kernel(
      tuple(
        (c.name, frozenset(c.allowed_values.list.type)) for c in k.constraint
      ),
      tuple(k.host_memory_arg),
      k.label,
    )
    for k in _raw_registry().get((op_type, kind), [])
  )


def registry_has_gpu_kernels() -> bool:
  """Whether this build registers GPU kernels (MatMul float32 on GPU)."""
  float32 = tf.float32.as_datatype_enum
  return any(
    float32 in dict(k.constraints).get('T', ())
    for k in _kernels_of('MatMul', GPU)
  )


def is_cuda_build() -> bool:
  """tf.sysconfig's word on whether this wheel was built with CUDA."""
  return bool(tf.sysconfig.get_build_info().get('is_cuda_build'))


@dataclasses.dataclass(frozen=True)
class Node:
  """One node of a graph or of a function in its library (a NodeDef).

  Function bodies count: a cond (the loss-scale skip) or a while loop (the
  synthetic input's map_fn) keeps its ops there, and TF lowers them into
  the graph it places.
  """

  name: str  # 'FUNCTION/NODE' inside a function
  type: str
  device: str
  attrs: object  # the NodeDef's attr map
  op_defs: dict  # op type -> OpDef, for attrs left at their default


def graph_nodes(graph: tf.Graph) -> list:
  """Every node of `graph` and of the functions of its library."""
  op_defs = {}
  for op in graph.get_operations():
    if op.type not in op_defs:
      op_defs[op.type] = op.op_def
  graph_def = graph.as_graph_def()
  nodes = [
    Node(n.name, n.op, n.device, n.attr, op_defs) for n in graph_def.node
  ]
  for f in graph_def.library.function:
    nodes.extend(
      Node(
        '%s/%s' % (f.signature.name, n.name), n.op, n.device, n.attr, op_defs
      )
      for n in f.node_def
    )
  return nodes


def _types_of(value):
  """The DType enums an AttrValue holds (None: not a type or type list)."""
  if value.HasField('type'):
    return [value.type]
  if value.HasField('list') and value.list.type:
    return list(value.list.type)
  return None


def _attr_types(node: Node, name: str):
  """The DType enums of a type (or list-of-type) attr; None: not one."""
  if name in node.attrs:
    return _types_of(node.attrs[name])
  op_def = node.op_defs.get(node.type)
  for attr in op_def.attr if op_def is not None else ():
    if attr.name == name and attr.HasField('default_value'):
      return _types_of(attr.default_value)  # an attr left at its default
  return None


def _matches(kernel: _Kernel, node: Node) -> bool:
  """TF's KernelAttrsMatch: every constrained attr takes an allowed type."""
  attrs = node.attrs
  label = attrs['_kernel'].s.decode() if '_kernel' in attrs else ''
  if kernel.label != label:
    return False
  for name, allowed in kernel.constraints:
    types = _attr_types(node, name)
    if types is None or any(t not in allowed for t in types):
      return False
  return True


def find_kernel(node: Node, device_kind_: str) -> _Kernel | None:
  """The kernel TF would pick for `node` on a device kind (None: none).

  As TF's FindKernelRegistration: a kernel of the device kind itself, else
  one registered for DEVICE_DEFAULT.
  """
  for kind in (device_kind_, DEFAULT):
    for kernel in _kernels_of(node.type, kind):
      if _matches(kernel, node):
        return kernel
  return None


def type_attrs(node: Node) -> dict:
  """{attr: dtype name} of the node's type attributes (what kernels match)."""
  out = {}
  for attr in sorted(node.attrs):
    if attr.startswith('_'):
      continue
    types = _attr_types(node, attr)
    if types:
      names = [tf.dtypes.as_dtype(t).name for t in types]
      out[attr] = names[0] if len(names) == 1 else names
  return out


def device_kind(device: str) -> str:
  """'GPU', 'CPU', ... of a device string ('' when it names no kind)."""
  return (tf.DeviceSpec.from_string(device).device_type or '').upper()


@dataclasses.dataclass(frozen=True)
class KernelCheck:
  """The verdict on every op placed on a GPU.

  checked: ops placed on a GPU (with a device kind GPU in their device).
  missing: [(op name, type, device, type attrs)] of ops with no GPU kernel.
  soft_placed: of those, the ops TF's soft placement would move to the CPU
    (allow_soft_placement on, and a CPU kernel exists); the rest of
    `missing` would make the run fail at placement.
  host_memory: {op type: [arg names]} of GPU kernels that keep some
    arguments in host memory (shapes, sizes, keys: expected, not an error).
  registry_has_gpu_kernels: False means nothing was provable.
  """

  checked: int
  missing: tuple
  soft_placed: tuple
  host_memory: dict
  allow_soft_placement: bool
  registry_has_gpu_kernels: bool

  @property
  def failing(self) -> tuple:
    """Ops that would make a real GPU run fail at placement."""
    soft = {m[0] for m in self.soft_placed}
    return tuple(m for m in self.missing if m[0] not in soft)

  def first_error(self) -> str | None:
    """One line naming the first failing op and its device, or None."""
    if not self.failing:
      return None
    name, op_type, device, attrs = self.failing[0]
    more = len(self.failing) - 1
    return (
      'no GPU kernel in this TensorFlow build for op %s (%s %s) on %s%s'
      % (
        name,
        op_type,
        ', '.join('%s=%s' % kv for kv in sorted(attrs.items())) or 'no types',
        device,
        ' (and %d more op(s); see --placement_file)' % more if more else '',
      )
    )

  def to_dict(self) -> dict:
    return {
      'gpu_ops_checked': self.checked,
      'registry_has_gpu_kernels': self.registry_has_gpu_kernels,
      'allow_soft_placement': self.allow_soft_placement,
      'missing_gpu_kernel': [_missing_dict(m) for m in self.missing],
      'soft_placed_on_cpu': [m[0] for m in self.soft_placed],
      'would_fail': [m[0] for m in self.failing],
      'host_memory_args': self.host_memory,
    }


def _missing_dict(m) -> dict:
  name, op_type, device, attrs = m
  return {'name': name, 'type': op_type, 'device': device, 'dtypes': attrs}


def check_graph(graph: tf.Graph, *, allow_soft_placement: bool) -> KernelCheck:
  """Checks every node of `graph` (functions included) placed on a GPU.

  allow_soft_placement: the session config's; with it TF moves an op
  without a GPU kernel (and its colocation group) to the CPU instead of
  failing, provided a CPU kernel exists.
  """
  provable = registry_has_gpu_kernels()
  checked, missing, soft, host_memory = 0, [], [], {}
  for node in graph_nodes(graph):
    if device_kind(node.device) != GPU:
      continue
    checked += 1
    if not provable:
      continue
    kernel = find_kernel(node, GPU)
    if kernel is not None:
      if kernel.host_memory_args:
        host_memory.setdefault(node.type, sorted(kernel.host_memory_args))
      continue
    device = tf.DeviceSpec.from_string(node.device).to_string()
    entry = (node.name, node.type, device, type_attrs(node))
    missing.append(entry)
    if allow_soft_placement and find_kernel(node, CPU) is not None:
      soft.append(entry)
  return KernelCheck(
    checked,
    tuple(missing),
    tuple(soft),
    dict(sorted(host_memory.items())),
    allow_soft_placement,
    provable,
  )
