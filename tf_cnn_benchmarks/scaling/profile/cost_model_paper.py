"""Profiles on paper: a measured profile moved to a published step time.

For predicting hardware we do not have (docs/predicting.md, "On paper,
past this machine"): the compute of a measured profile is scaled to a
published single-device step (every ready time by the same factor, so the
order and spacing of the gradients stay the measured ones) and the host,
apply costs and transports are replaced by stated assumptions. Without a
measured profile of the model, `model_profile` builds the model's gradient
list (the harness's own models) with ready times spread evenly over the
backward pass in reverse variable order, and says so in `notes`.
"""

from __future__ import annotations

import dataclasses
import json
import math

from tf_cnn_benchmarks.platform import json_input
from tf_cnn_benchmarks.scaling.model import profile_format as fmt

# Forward : backward = 1 : 2. The backward pass computes the gradients of
# a layer's inputs and of its weights, each about the forward's FLOPs
# (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", 2.1: 2N
# forward, 4N backward FLOPs per token).
FORWARD_SHARE = 1.0 / 3.0
# p10 / p90 of a paper profile's step: assumed +-3% (no spread published).
PAPER_SPREAD = 0.03
# Ops whose second input is a weight, and how their FLOPs scale.
_WEIGHT_OPS = ('Conv2D', 'MatMul', 'DepthwiseConv2dNative')
_PASS_THROUGH = ('Identity', 'ReadVariableOp', 'Cast', 'Enter')


def _transport(latency_us, bytes_per_us, measured):
  return fmt.Transport(latency_us, bytes_per_us, (), 0, measured)


def gpu_assumptions(*, intra_gb_s, inter_gbit_s, nccl_latency_us=20.0):
  """Transports of an assumed GPU host (stated in each 'measured' field).

  intra_gb_s: GPU <-> GPU / host copies (GB/s: PCIe 3 x16 ~10, NVLink ~20).
  inter_gbit_s: the network; collectives (NCCL over RDMA) run at line rate,
    gRPC (TCP) at a third of it, each with its assumed latency.
  """
  line = inter_gbit_s * 1e3 / 8.0  # bytes/us
  return {
    'collective': _transport(
      nccl_latency_us, line, 'assumed: NCCL over RDMA at line rate'
    ),
    'grpc': _transport(100.0, line / 3.0, 'assumed: gRPC over TCP'),
    'local_copy': _transport(
      10.0, intra_gb_s * 1e3, 'assumed: device link %g GB/s' % intra_gb_s
    ),
  }


def scaled_profile(
  base, step_ms, *, batch_size, device_name, transports, cores=32, notes=''
):
  """`base` with its compute scaled to a published `step_ms` on a GPU.

  Every ready time, forward and backward scale by step_ms / base step, the
  p10/p90 keep their relative spread; the optimizer apply is assumed to
  be memory bound (0.01 ms per variable + 0.003 ms per MB); the base's
  compressor figures (of its own device) are dropped: the predictors price
  the compressors by assumption.
  """
  c = base.compute
  k = step_ms / c.step_ms
  compute = fmt.Compute(
    step_ms=step_ms,
    step_ms_p10=c.step_ms_p10 * k,
    step_ms_p90=c.step_ms_p90 * k,
    forward_ms=c.forward_ms * k,
    backward_ms=c.backward_ms * k,
    cores_busy=1.0,
  )
  grads = tuple(
    dataclasses.replace(g, ready_ms=g.ready_ms * k) for g in base.gradients
  )
  gpu_apply = fmt.ApplyCost(0.01, 0.003)
  return dataclasses.replace(
    base,
    host=fmt.Host('assumed', cores, base.host.tf_version, 'gpu', device_name),
    run=dataclasses.replace(base.run, batch_size=batch_size),
    compute=compute,
    gradients=grads,
    apply=fmt.Apply(gpu_apply, gpu_apply),
    transports=transports,
    notes=notes or base.notes,
    compressors=None,
  )


def model_gradients(model: str, data_name: str) -> list:
  """[(name, shape, bytes)] of the model's trainable variables, in order."""
  # TensorFlow only to build a model: scaled_profile and the assumptions
  # work on a measured profile without it.
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf

  import models

  with tf.Graph().as_default():
    built = models.create_model(model, data_name)
    size = built.image_size
    classes = 1000 if data_name == 'imagenet' else 10
    built.build(tf.zeros([1, size, size, 3]), classes, is_training=True)
    return [
      (v.op.name, v.shape.as_list(), v.shape.num_elements() * v.dtype.size)
      for v in tf.compat.v1.trainable_variables()
    ]


def model_profile(model, data_name, batch_size, *, forward_share=1 / 3):
  """A unit profile (1 ms step) of `model` on an unnamed device.

  Ready times: spread evenly over the backward pass (the last forward_share
  of the step is forward) in reverse variable order: an assumption, stated
  in the profile's notes. Scale it with scaled_profile.
  """
  grads = model_gradients(model, data_name)
  n, fwd = len(grads), forward_share
  gradients = tuple(
    fmt.Gradient(
      name, tuple(shape), 'float32', nbytes, fwd + (1 - fwd) * (n - i) / n
    )
    for i, (name, shape, nbytes) in enumerate(grads)
  )
  zero = fmt.ApplyCost(0.0, 0.0)
  return fmt.Profile(
    created='synthetic',
    host=fmt.Host('none', 1, 'n/a', 'gpu', 'none'),
    run=fmt.RunInfo(model, data_name, batch_size, 'NCHW', False, 'sgd', 1),
    compute=fmt.Compute(1.0, 0.97, 1.03, fwd, 1 - fwd, 1.0),
    gradients=gradients,
    apply=fmt.Apply(zero, zero),
    chunks={},
    transports=gpu_assumptions(intra_gb_s=10, inter_gbit_s=25),
    notes='synthetic: gradient list of the harness model; ready times '
    'spread evenly over the backward pass in reverse variable order; '
    'p10/p90 assumed +-3%',
  )


def _source_variable(tensor):
  """The variable op a weight input reads (through reads and casts)."""
  op = tensor.op
  while op.type in _PASS_THROUGH and op.inputs:
    op = op.inputs[0].op
  return op.name


def _weight_flops(graph):
  """{variable op name: forward FLOPs per image} of the weights that a
  Conv2D or MatMul multiplies: 2 x weights x output positions."""
  flops = {}
  for op in graph.get_operations():
    if op.type not in _WEIGHT_OPS or len(op.inputs) < 2:
      continue
    weight, out = op.inputs[1], op.outputs[0].shape.as_list()
    elements = weight.shape.num_elements() or 0
    positions = 1
    if op.type != 'MatMul' and len(out) == 4:
      channels_first = op.get_attr('data_format') == b'NCHW'
      positions = out[2] * out[3] if channels_first else out[1] * out[2]
    name = _source_variable(weight)
    flops[name] = flops.get(name, 0) + 2 * elements * positions
  return flops


def gradient_list(model: str, data_name: str) -> list:
  """[{name, shape, bytes, flops}] of the model's trainable variables in
  variable order (flops: forward FLOPs per image of a weight's matmul or
  convolution, 0 for biases and batch norm). Builds the model: TensorFlow.
  """
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf

  import models

  with tf.Graph().as_default() as graph:
    built = models.create_model(model, data_name)
    size = built.image_size
    classes = 1000 if data_name == 'imagenet' else 10
    built.build(tf.zeros([1, size, size, 3]), classes, is_training=True)
    flops = _weight_flops(graph)
    return [
      {
        'name': v.op.name,
        'shape': v.shape.as_list(),
        'bytes': v.shape.num_elements() * v.dtype.size,
        'flops': flops.get(v.op.name, 0),
      }
      for v in tf.compat.v1.trainable_variables()
    ]


def save_gradient_list(grads, model, data_name, path) -> None:
  """Writes a gradient list (JSON) so paper profiles need no TensorFlow."""
  with open(path, 'w', encoding='utf-8') as f:
    json.dump(
      {'model': model, 'data_name': data_name, 'gradients': grads},
      f,
      indent=0,
    )
    f.write('\n')


def load_gradient_list(path) -> list:
  """The gradient list a save_gradient_list wrote (ValueError: bad file)."""
  data = json_input.load_file(path)
  grads = data.get('gradients') if isinstance(data, dict) else None
  if not isinstance(grads, list) or not grads:
    raise ValueError('%s: want {"gradients": [...]}' % path)
  return grads


def ready_fractions(grads, forward_share=FORWARD_SHARE) -> list:
  """When each gradient is ready, as a share of the step: after the
  forward pass, the backward runs in reverse variable order and takes the
  same share of its time as its weights' FLOPs (evenly by count when the
  list has no FLOPs)."""
  weights = [g.get('flops', 0) for g in grads]
  if sum(weights) <= 0:
    weights = [1] * len(grads)
  total, done, out = float(sum(weights)), 0.0, [0.0] * len(grads)
  for i in reversed(range(len(grads))):
    done += weights[i]
    out[i] = forward_share + (1 - forward_share) * done / total
  return out


def paper_profile(
  grads,
  *,
  model,
  data_name,
  batch_size,
  images_per_sec,
  device_name,
  use_fp16=False,
  cores=32,
):
  """A profile of one GPU from a published images/sec (no TensorFlow).

  step = batch / images_per_sec; ready times by ready_fractions; apply on
  the GPU assumed memory bound; transports: gpu_assumptions (the test-bed
  model's inputs; the hardware model takes its links from the target).
  """
  if not (math.isfinite(images_per_sec) and images_per_sec > 0):
    raise ValueError('images_per_sec=%s: want a number > 0' % images_per_sec)
  step = batch_size * 1000.0 / images_per_sec
  fractions = ready_fractions(grads)
  gradients = tuple(
    fmt.Gradient(g['name'], tuple(g['shape']), 'float32', g['bytes'], f * step)
    for g, f in zip(grads, fractions)
  )
  gpu_apply = fmt.ApplyCost(0.01, 0.003)
  notes = (
    'paper profile: step %.3f ms = batch %d / %g images/sec on %s (a '
    'published figure, not measured here); forward:backward = 1:2; each '
    'gradient ready after the backward pass reached it, in reverse variable '
    "order, the pass's time shared by the weights' forward FLOPs; p10/p90 "
    'assumed +-%d%%; apply assumed 0.01 ms per variable + 0.003 ms per MB; '
    "transports: assumed (gpu_assumptions); the compressors' compute: "
    'not measured (the predictors assume streaming passes at the apply rate)'
    % (step, batch_size, images_per_sec, device_name, PAPER_SPREAD * 100)
  )
  return fmt.Profile(
    created='paper',
    host=fmt.Host('assumed', cores, 'n/a', 'gpu', device_name),
    run=fmt.RunInfo(
      model, data_name, batch_size, 'NCHW', bool(use_fp16), 'sgd', 1
    ),
    compute=fmt.Compute(
      step,
      step * (1 - PAPER_SPREAD),
      step * (1 + PAPER_SPREAD),
      step * FORWARD_SHARE,
      step * (1 - FORWARD_SHARE),
      1.0,
    ),
    gradients=gradients,
    apply=fmt.Apply(gpu_apply, gpu_apply, 'assumed: memory bound on a GPU'),
    chunks={},
    transports=gpu_assumptions(intra_gb_s=10, inter_gbit_s=25),
    notes=notes,
  )
