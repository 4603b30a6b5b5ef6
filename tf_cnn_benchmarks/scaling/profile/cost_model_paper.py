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

from tf_cnn_benchmarks.scaling.model import profile_format as fmt


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
  be memory bound (0.01 ms per variable + 0.003 ms per MB).
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
