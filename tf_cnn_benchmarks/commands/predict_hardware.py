"""predict_scaling's hardware target: its flags and its predictions.

The flags describe a GPU cluster as its owner knows it (docs/predicting.md,
"Describe the cluster"); the predictions are hardware_model's closed forms.
Given none of them and a CPU profile, predict_scaling keeps the test-bed
model (the simulation with the loopback test-bed's calibration).
"""

from __future__ import annotations

import dataclasses

from tf_cnn_benchmarks.scaling.model import cost_model
from tf_cnn_benchmarks.scaling.model import hardware as hw_lib
from tf_cnn_benchmarks.scaling.model import hardware_model

# Flags only a hardware target has (any of them given: the hardware model).
HARDWARE_FLAGS = (
  'intra_link',
  'network',
  'ps_placement',
  'local_parameter_device',
  'gradient_precision',
  'nccl_algorithm',
  'gpus_per_host_link',
  'peer_gpus',
  'horovod_fusion_mb',
  'horovod_cycle_ms',
  'horovod_hierarchical',
)
# The network when a hardware target is asked for without --link_mbits.
DEFAULT_LINK_MBITS = 25000.0
# Relative width of the band beyond the compute's own spread: the
# cost model's assumed model error (cost_model_calibration: model_error).
MODEL_ERROR = 0.10


def add_flags(p) -> None:
  """The hardware flags on predict_scaling's parser."""
  p.add_argument(
    '--intra_link',
    help='GPU link inside a host: %s, or GB/s per direction'
    % '|'.join(hw_lib.INTRA_LINKS),
  )
  p.add_argument('--network', help='transport between hosts: tcp or rdma')
  p.add_argument(
    '--ps_placement', help='ps tasks on own_hosts or on worker_hosts'
  )
  p.add_argument(
    '--local_parameter_device', help="where a host's variables live: cpu|gpu"
  )
  p.add_argument(
    '--gradient_precision', help='gradients on the wire: fp32|fp16|bf16'
  )
  p.add_argument('--nccl_algorithm', help='NCCL all-reduce: ring or tree')
  p.add_argument(
    '--gpus_per_host_link',
    type=int,
    help='GPUs sharing one PCIe link to host memory (DGX-1: 2)',
  )
  p.add_argument(
    '--peer_gpus',
    type=int,
    help="how many of a host's first GPUs all have peer access (1: none, "
    'as on many GeForce boards and VMs; default: all); a ring over more '
    'goes through host memory',
  )
  p.add_argument(
    '--horovod_fusion_mb',
    type=float,
    help='Horovod fusion buffer, MB (default 64; 0: no fusion)',
  )
  p.add_argument(
    '--horovod_cycle_ms', type=float, help='Horovod cycle time (default 5)'
  )
  p.add_argument(
    '--horovod_hierarchical',
    action='store_const',
    const=True,
    help="Horovod's hierarchical all-reduce",
  )


def wanted(args, profile) -> bool:
  """The hardware model: a hardware flag given, horovod asked for, or a
  GPU profile (the test-bed has CPU towers only)."""
  if any(getattr(args, name) is not None for name in HARDWARE_FLAGS):
    return True
  if 'horovod' in args.variable_update.split(','):
    return True
  return profile.host.device.lower() in ('gpu', 'cuda', 'rocm')


def _fields(args) -> dict:
  fields = {}
  if args.intra_link is not None:
    fields.update(hw_lib.parse_intra_link(args.intra_link))
  simple = (
    'network',
    'ps_placement',
    'local_parameter_device',
    'gradient_precision',
    'nccl_algorithm',
    'gpus_per_host_link',
    'peer_gpus',
    'horovod_cycle_ms',
    'horovod_hierarchical',
  )
  for name in simple:
    if getattr(args, name) is not None:
      fields[name] = getattr(args, name)
  if args.horovod_fusion_mb is not None:
    fields['horovod_fusion_bytes'] = int(args.horovod_fusion_mb * (1 << 20))
  if args.cores_per_host is not None:
    fields['host_cores'] = args.cores_per_host
  return fields


def targets(args, worker_counts) -> list:
  """A HardwareTarget per worker count (HardwareError: a bad flag)."""
  fields = _fields(args)
  link = args.link_mbits if args.link_mbits is not None else DEFAULT_LINK_MBITS
  return [
    hw_lib.make_hardware(
      num_workers=n,
      gpus_per_host=args.devices_per_worker,
      num_ps=args.num_ps,
      link_mbits=link,
      link_latency_us=args.link_latency_us,
      **fields,
    )
    for n in worker_counts
  ]


@dataclasses.dataclass(frozen=True)
class HardwarePrediction:
  """One strategy on one hardware target (the table's fields)."""

  strategy: object
  target: hw_lib.HardwareTarget
  images_per_sec: float
  low: float
  high: float
  step_ms: float
  exposed_ms: float

  def as_json(self) -> dict:
    """The JSON line: the strategy, the target's fields, the prediction."""
    s = self.strategy
    line = {
      'model': 'hardware',
      'variable_update': s.variable_update,
      'all_reduce_spec': s.all_reduce_spec,
      'gradient_repacking': s.gradient_repacking,
      'cross_replica_sync': s.sync,
      'gradient_compression': s.gradient_compression,
      'devices_per_worker': self.target.gpus_per_host,
    }
    line.update(dataclasses.asdict(self.target))
    line.update(
      predicted_images_per_sec=round(self.images_per_sec, 3),
      band_low=round(self.low, 3),
      band_high=round(self.high, 3),
      predicted_step_ms=round(self.step_ms, 4),
      exposed_communication_ms=round(self.exposed_ms, 4),
    )
    return line


def _scaled(profile, k):
  """`profile` with its compute (and ready times) k times as long."""
  c = profile.compute
  compute = dataclasses.replace(
    c,
    step_ms=c.step_ms * k,
    forward_ms=c.forward_ms * k,
    backward_ms=c.backward_ms * k,
  )
  grads = tuple(
    dataclasses.replace(g, ready_ms=g.ready_ms * k) for g in profile.gradients
  )
  return dataclasses.replace(profile, compute=compute, gradients=grads)


def predict(profile, hw, strategy) -> HardwarePrediction:
  """The prediction and its band (the compute's p10/p90, widened by the
  assumed model error)."""
  images = hw.num_devices * profile.run.batch_size
  s = hardware_model.step(profile, hw, strategy)
  c = profile.compute
  slow = hardware_model.step(
    _scaled(profile, c.step_ms_p90 / c.step_ms), hw, strategy
  )
  fast = hardware_model.step(
    _scaled(profile, c.step_ms_p10 / c.step_ms), hw, strategy
  )
  rate = images / s.step_ms * 1e3
  low = images / slow.step_ms * 1e3 * (1 - MODEL_ERROR)
  high = images / fast.step_ms * 1e3 * (1 + MODEL_ERROR)
  return HardwarePrediction(
    strategy, hw, rate, min(low, rate), max(high, rate), s.step_ms, s.exposed_ms
  )


def check(strategy, hw, profile) -> None:
  """Raises StrategyError unless `strategy` runs on `hw`."""
  if strategy.variable_update == 'horovod':
    if strategy.all_reduce_spec:
      raise cost_model.StrategyError('horovod takes no --all_reduce_spec')
    return
  cost_model.check_strategy(strategy, hw, profile)
  if (
    strategy.gradient_compression != 'none' and hw.gradient_precision != 'fp32'
  ):
    raise cost_model.StrategyError(
      '--gradient_compression=%s with --gradient_precision=%s: both set the '
      'bytes on the wire; use one'
      % (strategy.gradient_compression, hw.gradient_precision)
    )
  if not strategy.sync:
    raise cost_model.StrategyError(
      'the hardware model predicts synchronous steps only'
    )
