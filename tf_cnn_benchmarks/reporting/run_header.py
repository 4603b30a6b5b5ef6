"""The classic header block a run prints before its steps."""

from __future__ import annotations

import sys
from typing import Callable

import tensorflow as tf

from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.platform import cpu_features
from tf_cnn_benchmarks.platform import gpu_runtime
from tf_cnn_benchmarks.platform import runtime_knobs
from tf_cnn_benchmarks.reporting import run_facts
from variable_mgr import collective_catalog
from variable_mgr.compression import catalog as compression_catalog

_MODES = {
  params_lib.Mode.TRAIN: 'training',
  params_lib.Mode.FORWARD_ONLY: 'forward only',
  params_lib.Mode.EVAL: 'evaluation',
}


def print_header(
  facts: run_facts.RunFacts,
  session_config,
  print_line: Callable[[str], None],
) -> None:
  """Prints the header block: its rows, the note and cluster rows, a rule.

  The note (16-bit compute without native CPU kernels) also goes to stderr
  as a warning.
  """
  rows = header_rows(facts, session_config)
  note = slow_16bit_note(facts.params.device, facts.precision)
  if note:
    rows.append(('Note', note))
    print('warning: %s' % note, file=sys.stderr, flush=True)
  if facts.cluster_describe:
    rows.append(('Cluster', facts.cluster_describe))
  for key, value in rows:
    print_line('%-12s %s' % (key + ':' if key else '', value))
  print_line('=' * 10)


def slow_16bit_note(device: str, precision: str) -> str | None:
  """The header's warning for 16-bit compute without native CPU kernels."""
  if device != 'cpu':
    return None
  return cpu_features.slow_16bit_note(precision, cpu_features.read_cpuinfo())


def header_rows(facts: run_facts.RunFacts, session_config) -> list[tuple]:
  """(key, value) rows of the header (the note and cluster rows excepted).

  Args:
    facts: the run's configuration.
    session_config: the run's tf.compat.v1.ConfigProto (its non-default GPU
      fields are rows).

  Returns:
    The rows, in the classic order; a key '' continues the row above.
  """
  p = facts.params
  auto = (
    ''
    if not facts.device_was_auto
    else ' (auto: %s)'
    % ('GPU visible' if p.device == 'gpu' else 'no GPU visible')
  )
  mode = _MODES[facts.mode]
  if facts.evaluates_during_training:
    mode = 'training + evaluation'  # the classic value
  rows = [
    ('TensorFlow', tf.__version__),
    ('Model', p.model),
    ('Dataset', '%s (%s)' % (p.data_name, p.data_dir or 'synthetic')),
    ('Mode', mode),
    ('Batch size', '%d global' % facts.global_batch_size),
    ('', '%d per device' % p.batch_size),
    ('Num batches', str(p.num_batches)),
    *([('Num epochs', '%.2f' % p.num_epochs)] if p.num_epochs else []),
    ('Num warmup', str(p.num_warmup_batches)),
    ('Devices', str(list(facts.devices))),
    ('Device kind', p.device + auto),
    ('Data format', p.data_format),
    ('Precision', facts.precision),
    ('Loss scale', facts.loss_scale),
    ('Optimizer', p.optimizer),
    ('Variables', facts.manager.describe()),
    ('AllReduce', str(facts.manager.all_reduce_description())),
    (
      'Compression',
      compression_catalog.describe(p.gradient_compression, p.powersgd_rank),
    ),
    ('Accumulation', _accumulation(p.gradient_accumulation_steps)),
    ('Collectives', collective_catalog.describe(p)),
    *gpu_runtime.header_rows(session_config, gpu_runtime.environment(p)),
  ]
  if p.train_dir:
    rows.append(('Train dir', p.train_dir))
  rows.extend(
    runtime_knobs.header_rows(p, in_cluster=facts.cluster is not None)
  )
  return rows


def _accumulation(steps: int) -> str:
  """The header's Accumulation row (--gradient_accumulation_steps)."""
  if steps == 1:
    return 'none (every step updates)'
  return '%d micro-steps per update (a step is one update)' % steps
