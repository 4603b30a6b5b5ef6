"""All-reduce algorithms and `all_reduce`, which runs a parsed spec.

Every algorithm is built in graph mode from public TensorFlow ops with
explicit `tf.device` placement, so the graph itself says which device adds
which piece and where the data travels. Each one has the signature

    fn(tensors, devices, num_shards) -> list of tensors

and returns the element-wise SUM of `tensors` (tensor i lives on devices[i]);
output i is placed on devices[i] and has the dtype and shape of the inputs.
Input shapes must be fully defined (gradients of the benchmark models are).

The spec grammar and the algorithm registry live in allreduce_spec.py; an
algorithm registers itself there with @register_algorithm.

dtypes: float32, float16, bfloat16 and int32 work with every algorithm that
runs on CPU (CollectiveReduceV2 on CPU included). Exceptions: `nccl` needs
GPUs and has no bfloat16 kernel, so bfloat16 is summed in float32 and cast
back; int32 on GPU devices works, but TF runs int32 adds in host memory.
"""

import contextlib
import contextvars
from typing import Dict, List, Sequence

import tensorflow as tf

from variable_mgr import collective_keys as collective_keys_lib
from variable_mgr import collective_options
from variable_mgr import sizes

# The vocabulary, re-exported: callers name it as allreduce.X.
from variable_mgr.allreduce_spec import ALGORITHMS  # noqa: F401
from variable_mgr.allreduce_spec import AlgSpec  # noqa: F401
from variable_mgr.allreduce_spec import AllReduceSpec  # noqa: F401
from variable_mgr.allreduce_spec import AllReduceSpecError  # noqa: F401
from variable_mgr.allreduce_spec import SpecRange  # noqa: F401
from variable_mgr.allreduce_spec import algorithm_names
from variable_mgr.allreduce_spec import algorithm_traits
from variable_mgr.allreduce_spec import parse_all_reduce_spec  # noqa: F401
from variable_mgr.allreduce_spec import register_algorithm

tf1 = tf.compat.v1


class AllReduceUnavailableError(ValueError):
  """An all-reduce algorithm that cannot run on the given devices."""


# --------------------------------------------------------------------------
# Shared helpers


def _canonical(device):
  return tf.DeviceSpec.from_string(device).to_string()


def _worker_of(device):
  """The `/job:X/replica:R/task:K` part of a device ('' when it has none)."""
  spec = tf.DeviceSpec.from_string(device)
  if spec.job is None:
    return ''
  # An unspecified replica or task means 0, as TF's placer reads it.
  return tf.DeviceSpec(
    job=spec.job, replica=spec.replica or 0, task=spec.task or 0
  ).to_string()


def _cpu_of(device):
  """The CPU:0 of the worker that owns `device`."""
  spec = tf.DeviceSpec.from_string(device)
  return spec.replace(device_type='CPU', device_index=0).to_string()


def _is_gpu(device):
  return (tf.DeviceSpec.from_string(device).device_type or '').upper() == 'GPU'


def _check_inputs(tensors, devices):
  """Validates one all-reduce's inputs; returns them as tensors."""
  if not devices:
    raise ValueError('all-reduce needs at least one device')
  if len(tensors) != len(devices):
    raise ValueError(
      f'all-reduce got {len(tensors)} tensors for {len(devices)} devices'
    )
  converted = []
  for t, d in zip(tensors, devices):
    with tf.device(d):
      converted.append(tf.convert_to_tensor(t))
  first = converted[0]
  if not first.shape.is_fully_defined():
    raise ValueError(
      f'all-reduce needs fully defined shapes, got {first.shape}'
    )
  for t in converted[1:]:
    if t.dtype != first.dtype or t.shape != first.shape:
      raise ValueError(
        f'all-reduce inputs differ: {first.dtype.name}'
        f'{first.shape} vs {t.dtype.name}{t.shape}'
      )
  return converted


def _num_elements(tensor):
  return tensor.shape.num_elements()


def _split_flat(tensor, lengths, device):
  """Flattens `tensor` on `device` and cuts it into pieces of `lengths`."""
  with tf.device(device):
    flat = tf.reshape(tensor, [-1])
    return tf.split(flat, lengths) if len(lengths) > 1 else [flat]


def _join_flat(pieces, shape, device):
  """Concatenates flat pieces on `device` and restores `shape`."""
  with tf.device(device):
    flat = tf.concat(pieces, 0) if len(pieces) > 1 else pieces[0]
    return tf.reshape(flat, shape)


def _sum_on(tensors, device):
  """Sums `tensors` with one op placed on `device`."""
  with tf.device(device):
    return tf.add_n(tensors) if len(tensors) > 1 else tf.identity(tensors[0])


def _broadcast(tensor, devices):
  """Copies `tensor` to every device (one identity per device)."""
  outputs = []
  for d in devices:
    with tf.device(d):
      outputs.append(tf.identity(tensor))
  return outputs


def _per_shard(core, tensors, devices, num_shards):
  """Runs `core` independently on `num_shards` flat pieces of the tensors.

  Used where #N only means "cut the tensor in N independent reductions", which
  lets the pieces overlap in time.
  """
  if num_shards <= 1:
    return core(tensors, devices)
  shape = tensors[0].shape
  lengths = sizes.even_sizes(_num_elements(tensors[0]), num_shards)
  pieces = [_split_flat(t, lengths, d) for t, d in zip(tensors, devices)]
  reduced = [core([p[s] for p in pieces], devices) for s in range(num_shards)]
  return [
    _join_flat([r[i] for r in reduced], shape, d) for i, d in enumerate(devices)
  ]


def _shuffle(tensors, devices, gather_devices, num_pieces):
  """Cuts each tensor into pieces; piece s is summed on gather device s % g.

  Every device then concatenates all the summed pieces.
  """
  shape = tensors[0].shape
  lengths = sizes.even_sizes(_num_elements(tensors[0]), num_pieces)
  pieces = [_split_flat(t, lengths, d) for t, d in zip(tensors, devices)]
  sums = [
    _sum_on([p[s] for p in pieces], gather_devices[s % len(gather_devices)])
    for s in range(num_pieces)
  ]
  return [_join_flat(sums, shape, d) for d in devices]


# --------------------------------------------------------------------------
# Algorithms


@register_algorithm('copy')
def copy_all_reduce(tensors, devices, num_shards=1):
  """Sums on devices[0] and copies the sum back to every device.

  #N cuts the tensor in N pieces, each summed separately on devices[0].
  """
  tensors = _check_inputs(tensors, devices)
  with tf1.name_scope('allreduce_copy'):
    return _per_shard(
      lambda ts, ds: _broadcast(_sum_on(ts, ds[0]), ds),
      tensors,
      devices,
      num_shards,
    )


@register_algorithm('pscpu')
def pscpu_all_reduce(tensors, devices, num_shards=1):
  """Sums on the CPU of devices[0]'s worker; #N = N independent shards."""
  tensors = _check_inputs(tensors, devices)
  cpu = _cpu_of(devices[0])
  with tf1.name_scope('allreduce_pscpu'):
    if num_shards <= 1:
      return _broadcast(_sum_on(tensors, cpu), devices)
    return _shuffle(tensors, devices, [cpu], num_shards)


@register_algorithm('psgpu')
def psgpu_all_reduce(tensors, devices, num_shards=1):
  """Spreads the sum over the devices: shard s is summed on devices[s % n].

  #N = shuffle-group size: each device sums N shards (n*N shards in all).
  """
  tensors = _check_inputs(tensors, devices)
  n = len(devices)
  if n == 1:
    return _broadcast(tensors[0], devices)
  with tf1.name_scope('allreduce_psgpu'):
    return _shuffle(tensors, devices, list(devices), n * max(1, num_shards))


def _ring_order(n, ring):
  """Device positions of ring `ring`.

  Odd rings run backwards, so ring pairs use both directions of each link;
  each further pair is rotated by one device, which moves the last add of
  every chunk to a different device.
  """
  shift = (ring // 2) % n
  order = [(p + shift) % n for p in range(n)]
  return order[::-1] if ring % 2 else order


def _ring_reduce(chunks, devices):
  """One ring over `devices`; chunks[p] = n flat chunks held at position p.

  Reduce-scatter: at step k position p passes chunk p-k to p+1, which adds
  it to its own; after n-1 steps p holds the full sum of chunk p+1.
  All-gather: at step k position p passes complete chunk p+1-k to p+1.
  """
  n = len(devices)
  acc = [list(row) for row in chunks]
  for step in range(n - 1):
    for p in range(n):
      c, q = (p - step) % n, (p + 1) % n
      with tf.device(devices[q]):
        acc[q][c] = tf.add(acc[q][c], acc[p][c])
  for step in range(n - 1):
    for p in range(n):
      c, q = (p + 1 - step) % n, (p + 1) % n
      with tf.device(devices[q]):
        acc[q][c] = tf.identity(acc[p][c])
  return acc


@register_algorithm('xring')
def ring_all_reduce(tensors, devices, num_shards=1):
  """Ring all-reduce (reduce-scatter, then all-gather); #N = N rings.

  The flat tensor is cut into N*n chunks; ring r moves chunks r*n..r*n+n-1
  around its own device order (see _ring_order).
  """
  tensors = _check_inputs(tensors, devices)
  n, rings = len(devices), max(1, num_shards)
  if n == 1:
    return _broadcast(tensors[0], devices)
  shape = tensors[0].shape
  with tf1.name_scope('allreduce_xring'):
    lengths = sizes.even_sizes(_num_elements(tensors[0]), rings * n)
    pieces = [_split_flat(t, lengths, d) for t, d in zip(tensors, devices)]
    for r in range(rings):
      order = _ring_order(n, r)
      span = slice(r * n, (r + 1) * n)
      done = _ring_reduce(
        [pieces[i][span] for i in order], [devices[i] for i in order]
      )
      for pos, i in enumerate(order):
        pieces[i][span] = done[pos]
    return [_join_flat(pieces[i], shape, d) for i, d in enumerate(devices)]


def _halving_doubling(chunks, devices):
  """Recursive halving (reduce-scatter) then doubling (all-gather).

  len(devices) = p must be a power of two; chunks[k] = p flat chunks of rank
  k. In the halving step with distance d, ranks k and k^d share a range of
  chunks; the one with bit d clear keeps (and sums) the lower half, the other
  the upper half. Doubling replays the distances backwards, each rank
  fetching its partner's range.
  """
  p = len(devices)
  acc = [dict(enumerate(row)) for row in chunks]
  distance = p // 2
  while distance >= 1:
    new = []
    for k in range(p):
      lo, hi = min(acc[k]), max(acc[k]) + 1
      mid = (lo + hi) // 2
      keep = range(lo, mid) if k & distance == 0 else range(mid, hi)
      partner = acc[k ^ distance]
      with tf.device(devices[k]):
        new.append({c: tf.add(acc[k][c], partner[c]) for c in keep})
    acc, distance = new, distance // 2
  distance = 1
  while distance < p:
    new = []
    for k in range(p):
      merged = dict(acc[k])
      with tf.device(devices[k]):
        for c, t in acc[k ^ distance].items():
          merged[c] = tf.identity(t)
      new.append(merged)
    acc, distance = new, distance * 2
  return [[row[c] for c in range(p)] for row in acc]


def _rechd_core(tensors, devices):
  """Recursive halving-doubling for any n.

  Non-power-of-two n: with p the largest power of two <= n and r = n - p,
  device 2i+1 first adds its tensor into device 2i (i < r), the p remaining
  devices run halving-doubling, and devices 2i+1 get the result back.
  """
  n = len(devices)
  if n == 1:
    return _broadcast(tensors[0], devices)
  shape = tensors[0].shape
  p = 1 << (n.bit_length() - 1)
  extra = n - p
  members = []  # (device index, flat tensor) of the p ranks
  for i in range(extra):
    with tf.device(devices[2 * i]):
      members.append(
        (
          2 * i,
          tf.add(
            tf.reshape(tensors[2 * i], [-1]),
            tf.reshape(tensors[2 * i + 1], [-1]),
          ),
        )
      )
  members += [(j, tensors[j]) for j in range(2 * extra, n)]
  lengths = sizes.even_sizes(_num_elements(tensors[0]), p)
  rank_devices = [devices[j] for j, _ in members]
  chunks = [_split_flat(t, lengths, devices[j]) for j, t in members]
  done = _halving_doubling(chunks, rank_devices)
  outputs = [None] * n
  for (j, _), row in zip(members, done):
    outputs[j] = _join_flat(row, shape, devices[j])
  for i in range(extra):
    # The folded-in partner receives the finished tensor in one copy.
    with tf.device(devices[2 * i + 1]):
      outputs[2 * i + 1] = tf.identity(outputs[2 * i])
  return outputs


@register_algorithm('rechd')
def recursive_hd_all_reduce(tensors, devices, num_shards=1):
  """Recursive halving-doubling; #N = N independent shards."""
  tensors = _check_inputs(tensors, devices)
  with tf1.name_scope('allreduce_rechd'):
    return _per_shard(_rechd_core, tensors, devices, num_shards)


@register_algorithm('shuffle')
def shuffle_all_reduce(tensors, devices, num_shards=1):
  """Shuffle all-reduce with #N gather devices (spread over the list).

  The tensor is cut in N shards; shard g is summed on gather device g, then
  every device gathers all the shards (scatter).
  """
  tensors = _check_inputs(tensors, devices)
  n = len(devices)
  num_gather = min(max(1, num_shards), n)
  # Spread gather devices evenly so that, e.g., 2 of 8 GPUs are 0 and 4.
  gather = [devices[(g * n) // num_gather] for g in range(num_gather)]
  with tf1.name_scope('allreduce_shuffle'):
    return _shuffle(tensors, devices, gather, num_gather)


@register_algorithm('collective', uses_collective_keys=True, lockstep=True)
def collective_all_reduce(
  tensors, devices, num_shards=1, *, collective_keys=None, implementation='auto'
):
  """CollectiveReduceV2 (Add/Id) over the devices of one graph.

  #N sets max_subdivs_per_device (ring communication subdivisions). Keys come
  from `collective_keys` or the per-graph allocator. One device: identity.
  implementation: --collective_implementation, the ops' communication_hint
  (collective_options.hint_for).
  """
  tensors = _check_inputs(tensors, devices)
  n = len(devices)
  if n == 1:
    return _broadcast(tensors[0], devices)
  if len({_canonical(d) for d in devices}) != n:
    raise ValueError(f'collective all-reduce needs distinct devices: {devices}')
  keys = collective_keys or collective_keys_lib.keys_for_graph()
  group_key = keys.get_group_key(devices)
  instance_key = keys.get_instance_key()
  subdivs = num_shards if num_shards > 1 else -1  # -1: runtime default
  hint = collective_options.hint_for(implementation, devices)
  outputs = []
  with tf1.name_scope('allreduce_collective'):
    for t, d in zip(tensors, devices):
      with tf.device(d):
        outputs.append(
          tf.raw_ops.CollectiveReduceV2(
            input=t,
            group_size=n,
            group_key=group_key,
            instance_key=instance_key,
            ordering_token=[],
            merge_op='Add',
            final_op='Id',
            communication_hint=hint,
            max_subdivs_per_device=subdivs,
          )
        )
  return outputs


# Set while building a graph to inspect, never to run (--build_only): GPU
# algorithms then check only that their devices are GPUs.
_ASSUME_GPUS_VISIBLE = contextvars.ContextVar(
  'assume_gpus_visible', default=False
)


@contextlib.contextmanager
def assume_gpus_visible():
  """Builds GPU-only algorithms on a machine without a visible GPU."""
  token = _ASSUME_GPUS_VISIBLE.set(True)
  try:
    yield
  finally:
    _ASSUME_GPUS_VISIBLE.reset(token)


def _require_nccl(devices):
  """Raises AllReduceUnavailableError unless NCCL can run on `devices`."""
  not_gpu = [d for d in devices if not _is_gpu(d)]
  visible = _ASSUME_GPUS_VISIBLE.get() or tf.config.list_physical_devices('GPU')
  if not_gpu or not visible:
    reason = f'non-GPU devices {not_gpu}' if not_gpu else 'no GPU is visible'
    cpu_names = ', '.join(algorithm_names(cpu_only=True))
    raise AllReduceUnavailableError(
      f'nccl all-reduce needs GPU devices and a visible GPU ({reason}); '
      f'use a CPU algorithm instead: {cpu_names}'
    )


def _nccl_core(tensors, devices):
  n = len(devices)
  if n == 1:
    return _broadcast(tensors[0], devices)
  shared_name = tf1.get_default_graph().unique_name('nccl_all_reduce')
  outputs = []
  for t, d in zip(tensors, devices):
    with tf.device(d):
      # NcclAllReduce has no bfloat16 kernel: sum those in float32.
      wide = tf.cast(t, tf.float32) if t.dtype == tf.bfloat16 else t
      summed = tf.raw_ops.NcclAllReduce(
        input=wide, reduction='sum', num_devices=n, shared_name=shared_name
      )
      outputs.append(tf.cast(summed, t.dtype) if wide is not t else summed)
  return outputs


@register_algorithm('nccl', needs_gpu=True, lockstep=True)
def nccl_all_reduce(tensors, devices, num_shards=1):
  """NCCL all-reduce over GPUs of one worker; #N = N independent shards.

  Raises AllReduceUnavailableError at graph build time without GPUs.
  """
  _require_nccl(devices)
  tensors = _check_inputs(tensors, devices)
  with tf1.name_scope('allreduce_nccl'):
    return _per_shard(_nccl_core, tensors, devices, num_shards)


def _hierarchical_copy_core(tensors, devices):
  """Two groups reduce to their heads, the heads swap partial sums."""
  n = len(devices)
  if n == 1:
    return _broadcast(tensors[0], devices)
  half = (n + 1) // 2
  heads = (devices[0], devices[half])
  part_a = _sum_on(tensors[:half], heads[0])
  part_b = _sum_on(tensors[half:], heads[1])
  # Each head adds the other's partial: a+b == b+a exactly in IEEE floats,
  # so both groups end with identical values.
  with tf.device(heads[0]):
    total_a = tf.add(part_a, part_b)
  with tf.device(heads[1]):
    total_b = tf.add(part_b, part_a)
  return _broadcast(total_a, devices[:half]) + _broadcast(
    total_b, devices[half:]
  )


@register_algorithm('hierarchical_copy')
def hierarchical_copy_all_reduce(tensors, devices, num_shards=1):
  """Hierarchical copy over two device groups; #N = N independent shards."""
  tensors = _check_inputs(tensors, devices)
  with tf1.name_scope('allreduce_hierarchical_copy'):
    return _per_shard(_hierarchical_copy_core, tensors, devices, num_shards)


# --------------------------------------------------------------------------
# Entry point


def _run_algorithm(
  name, tensors, devices, num_shards, collective_keys, implementation='auto'
):
  fn = ALGORITHMS[name]
  if algorithm_traits(name).uses_collective_keys:
    return fn(
      tensors,
      devices,
      num_shards,
      collective_keys=collective_keys,
      implementation=implementation,
    )
  return fn(tensors, devices, num_shards)


def group_by_worker(devices: Sequence[str]) -> List[List[int]]:
  """Indices of `devices` grouped by worker, workers in first-seen order.

  A worker is the /job:X/replica:R/task:K prefix; devices without a job form
  one worker.
  """
  groups: Dict[str, List[int]] = {}
  for i, d in enumerate(devices):
    groups.setdefault(_worker_of(d), []).append(i)
  return list(groups.values())


def _two_level(
  alg, tensors, devices, workers, collective_keys, implementation='auto'
):
  """intra within each worker, inter across worker heads, then broadcast."""
  intra_out = [None] * len(devices)
  heads = []
  for members in workers:
    outs = _run_algorithm(
      alg.intra,
      [tensors[i] for i in members],
      [devices[i] for i in members],
      alg.shards,
      collective_keys,
      implementation,
    )
    for i, o in zip(members, outs):
      intra_out[i] = o
    heads.append(outs[0])
  head_devices = [devices[m[0]] for m in workers]
  across = _run_algorithm(
    alg.inter,
    heads,
    head_devices,
    alg.inter_shards,
    collective_keys,
    implementation,
  )
  lockstep = algorithm_traits(alg.intra).lockstep
  outputs = [None] * len(devices)
  for w, members in enumerate(workers):
    for i in members:
      # Lockstep algorithms (nccl, collective) hang unless every device's op
      # runs, so make every output wait for its own intra result.
      deps = [intra_out[i]] if lockstep else []
      with tf.device(devices[i]), tf.control_dependencies(deps):
        outputs[i] = tf.identity(across[w])
  return outputs


def all_reduce(
  tensors: Sequence[tf.Tensor],
  devices: Sequence[str],
  spec,
  *,
  collective_keys=None,
  collective_implementation='auto',
) -> List[tf.Tensor]:
  """Sums `tensors` (tensor i on devices[i]) as `spec` says.

  Args:
    tensors: one tensor per device, same shape and dtype.
    devices: device strings, one per tensor.
    spec: an AllReduceSpec (allreduce_spec.parse_all_reduce_spec).
    collective_keys: a CollectiveKeys allocator for `collective`; default:
      the allocator of the current graph.
    collective_implementation: auto, ring or nccl, the communication_hint
      of `collective`'s ops (collective_options.hint_for).

  Returns:
    The sums, output i placed on devices[i].
  """
  if isinstance(spec, str):
    raise TypeError(
      'all_reduce takes a parsed spec '
      '(allreduce_spec.parse_all_reduce_spec), not %r' % spec
    )
  devices = list(devices)
  tensors = _check_inputs(list(tensors), devices)
  alg = spec.alg_for(_num_elements(tensors[0]))
  workers = group_by_worker(devices)
  if alg.inter is None or len(workers) == 1:
    return _run_algorithm(
      alg.intra,
      tensors,
      devices,
      alg.shards,
      collective_keys,
      collective_implementation,
    )
  return _two_level(
    alg, tensors, devices, workers, collective_keys, collective_implementation
  )
