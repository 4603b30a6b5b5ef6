"""Reductions that place each gradient by its index: the classic defaults.

replicated without --all_reduce_spec reduced its gradients the classic way
(tensorflow/benchmarks, batch_allreduce.algorithm_from_params):

  CopyToDevices      --local_parameter_device=cpu: every gradient summed on
                     the CPU; gpu: gradient k summed on tower k % n, so the
                     sums are spread over the towers.
  HierarchicalCopy   --hierarchical_copy: the towers form two halves; each
                     half sums on its main device, the first main device adds
                     the two partial sums, and the total goes back through
                     both main devices to every tower. Which pair of main
                     devices gradient k uses is the --network_topology's:
                       dgx1:     (k % n, (k + n/2) % n)
                       gcp_v100: (0, 5), (2, 7), (5, 0), (7, 2) in turn
                                 (8 towers; the links between its two cliques)

Each reduction has `sum_unit(tensors, devices, index)` -> the sum on every
device (output i on devices[i]); batch_allreduce.BatchAllReduce numbers the
units it reduces (after packing) and calls it in place of a spec.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import tensorflow as tf

TOPOLOGIES = ('dgx1', 'gcp_v100')
# gcp_v100: 8 GPUs in two cliques of 4; 0-5 and 2-7 link the cliques.
_GCP_V100_MAIN_PAIRS = ((0, 5), (2, 7), (5, 0), (7, 2))


def check(enabled: bool, topology: str, num_devices: int) -> None:
  """Raises ValueError (one line) unless hierarchical copy can run."""
  if not enabled:
    return
  if topology not in TOPOLOGIES:
    raise ValueError(
      '--network_topology=%s: one of %s' % (topology, ', '.join(TOPOLOGIES))
    )
  if num_devices < 2 or num_devices % 2:
    raise ValueError(
      '--hierarchical_copy: needs an even --num_gpus >= 2 (two equal '
      'halves), got %d' % num_devices
    )
  if topology == 'gcp_v100' and num_devices != 8:
    raise ValueError(
      '--hierarchical_copy with --network_topology=gcp_v100: needs '
      '--num_gpus=8, got %d' % num_devices
    )


def main_devices(topology: str, index: int, n: int) -> Tuple[int, int]:
  """Main devices of gradient `index` over n towers: (first, second).

  Each half of the towers sums on its main device; `first` also adds the two
  partial sums.
  """
  if topology == 'gcp_v100':
    return _GCP_V100_MAIN_PAIRS[index % len(_GCP_V100_MAIN_PAIRS)]
  return index % n, (index + n // 2) % n


def ring_order(
  gpu_indices: str, num_gpus: int, error_cls=ValueError
) -> Optional[Tuple[int, ...]]:
  """--gpu_indices as a tuple of tower indices, or None when unset.

  Raises error_cls unless it lists each of 0..num_gpus-1 once.
  """
  if not gpu_indices:
    return None
  try:
    order = tuple(int(x) for x in gpu_indices.split(','))
  except ValueError:
    order = ()
  if sorted(order) != list(range(num_gpus)):
    raise error_cls(
      '--gpu_indices=%s: must list each of 0..%d once (an order of the '
      '--num_gpus=%d towers)' % (gpu_indices, num_gpus - 1, num_gpus)
    )
  return order


def _sum_on(tensors, device):
  with tf.device(device):
    return (
      tf.add_n(list(tensors)) if len(tensors) > 1 else tf.identity(tensors[0])
    )


def _copies(tensor, devices) -> List[tf.Tensor]:
  out = []
  for d in devices:
    with tf.device(d):
      out.append(tf.identity(tensor))
  return out


def _cpu_of(device: str) -> str:
  """CPU:0 of the task that owns `device`."""
  spec = tf.DeviceSpec.from_string(device)
  return spec.replace(device_type='CPU', device_index=0).to_string()


class CopyToDevices:
  """Each gradient summed on one device, then copied to every tower.

  on_towers: gradient k is summed on tower k % n (local_parameter_device
    gpu); else on the CPU of tower 0's task (cpu).
  """

  def __init__(self, on_towers: bool):
    self.on_towers = on_towers

  def __str__(self):
    return 'copy to %s (classic default)' % (
      'the towers in turn' if self.on_towers else 'the CPU'
    )

  def reduce_device(self, devices: Sequence[str], index: int) -> str:
    """Where unit `index` is summed."""
    if self.on_towers:
      return devices[index % len(devices)]
    return _cpu_of(devices[0])

  def sum_unit(self, tensors, devices, index: int) -> List[tf.Tensor]:
    with tf.compat.v1.name_scope('allreduce_copy_to_device'):
      total = _sum_on(tensors, self.reduce_device(devices, index))
      return _copies(total, devices)


class HierarchicalCopy:
  """The classic hierarchical copy over two halves of the towers."""

  def __init__(self, topology: str):
    if topology not in TOPOLOGIES:
      raise ValueError(
        'unknown network topology %r; one of %s'
        % (topology, ', '.join(TOPOLOGIES))
      )
    self.topology = topology

  def __str__(self):
    return 'hierarchical copy (%s)' % self.topology

  def sum_unit(self, tensors, devices, index: int) -> List[tf.Tensor]:
    n = len(devices)
    check(True, self.topology, n)
    first, second = main_devices(self.topology, index, n)
    half = n // 2
    members = (
      range(half) if first < half else range(half, n),
      range(half, n) if first < half else range(half),
    )
    with tf.compat.v1.name_scope('allreduce_hierarchical_copy'):
      partial = [
        _sum_on([tensors[i] for i in group], devices[main])
        for group, main in zip(members, (first, second))
      ]
      total = _sum_on(partial, devices[first])
      heads = (
        _copies(total, [devices[first]])[0],
        _copies(total, [devices[second]])[0],
      )
      out = [None] * n
      for head, group in zip(heads, members):
        for i in group:
          out[i] = _copies(head, [devices[i]])[0]
    return out
