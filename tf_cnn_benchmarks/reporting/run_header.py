"""The rows of the classic header block a run prints before its steps."""

from __future__ import annotations

import typing

import tensorflow as tf

from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.config import schedules
from tf_cnn_benchmarks.platform import gpu_runtime
from tf_cnn_benchmarks.platform import runtime_knobs

if typing.TYPE_CHECKING:  # benchmark_cnn imports this module
  from tf_cnn_benchmarks import benchmark_cnn

_MODES = {
  params_lib.Mode.TRAIN: 'training',
  params_lib.Mode.FORWARD_ONLY: 'forward only',
  params_lib.Mode.EVAL: 'evaluation',
}


def header_rows(
  bench: benchmark_cnn.BenchmarkCNN, session_config
) -> list[tuple]:
  """(key, value) rows of the header (the note and cluster rows excepted).

  Args:
    bench: the run.
    session_config: the run's tf.compat.v1.ConfigProto (its non-default GPU
      fields are rows).

  Returns:
    The rows, in the classic order; a key '' continues the row above.
  """
  p = bench.params
  auto = (
    ''
    if not bench.plan.device_was_auto
    else ' (auto: %s)'
    % ('GPU visible' if p.device == 'gpu' else 'no GPU visible')
  )
  mode = _MODES[bench.plan.mode]
  if schedules.eval_enabled(p) and bench.training:
    mode = 'training + evaluation'  # the classic value
  rows = [
    ('TensorFlow', tf.__version__),
    ('Model', p.model),
    ('Dataset', '%s (%s)' % (p.data_name, p.data_dir or 'synthetic')),
    ('Mode', mode),
    ('Batch size', '%d global' % bench.global_batch_size),
    ('', '%d per device' % p.batch_size),
    ('Num batches', str(p.num_batches)),
    *([('Num epochs', '%.2f' % p.num_epochs)] if p.num_epochs else []),
    ('Num warmup', str(p.num_warmup_batches)),
    ('Devices', str(list(bench.devices))),
    ('Device kind', p.device + auto),
    ('Data format', p.data_format),
    ('Precision', bench.compute_dtype.name),
    (
      'Loss scale',
      bench.loss_scale_config.describe() if bench.loss_scale_config else 'none',
    ),
    ('Optimizer', p.optimizer),
    ('Variables', bench.manager.describe()),
    ('AllReduce', str(bench.manager.all_reduce_description())),
    *gpu_runtime.header_rows(session_config, gpu_runtime.environment(p)),
  ]
  if p.train_dir:
    rows.append(('Train dir', p.train_dir))
  rows.extend(
    runtime_knobs.header_rows(p, in_cluster=bench.cluster is not None)
  )
  return rows
