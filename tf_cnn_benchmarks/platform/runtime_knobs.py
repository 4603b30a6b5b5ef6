"""Input, runtime and profiling knobs of the classic harness (issue 14, 6-7).

The flags are fields of `params.Params`, declared with the others in
config/runtime_fields.py (KnobSettings). What they do:

  Session config (`configure_session`, every session of the run; it also
  turns on the scoped allocator that --allreduce_merge_scope's collectives
  need, variable_mgr/collective_options.py):
    --enable_optimizations=false: graph optimisations off, as classic
      (OptimizerOptions L0 and grappler's meta optimizer disabled).
    --rewriter_config=TEXT: a RewriterConfig text proto that replaces the
      grappler settings (classic: it wins over --enable_optimizations).
    --use_numa_affinity: ConfigProto.experimental.use_numa_affinity, the
      classic switch: TensorFlow gives logical CPU device i (tower i) the
      memory allocator of NUMA node i mod the node count. On a machine with
      one NUMA node, or in a cluster task (its server, not the session,
      creates the devices), it changes nothing, and the header says so.
  Input (data_sources.py): --datasets_sloppy_parallel_interleave,
    --datasets_parallel_interleave_prefetch.
  Profiling (profiling.py): --tfprof_file, --partitioned_graph_file_prefix,
    --use_chrome_trace_format.
  Records (reporting/outputs.py): --benchmark_log_dir gets the results
    line(s) (file `benchmark_run.log`, one JSON line per run), and
    --benchmark_test_id is a free-form label written into every results line.
"""

from __future__ import annotations

import glob
import os
import sys
from typing import Optional

from google.protobuf import text_format
import tensorflow as tf

from variable_mgr import collective_catalog
from variable_mgr import collective_options

# The file --benchmark_log_dir gets (the classic model-garden logger's name
# for the record of a run).


def check(p, error_cls) -> None:
  """Raises error_cls (one line) for a bad knob value of Params `p`."""
  prefetch = p.datasets_parallel_interleave_prefetch
  if prefetch is not None and prefetch < 1:
    raise error_cls(
      '--datasets_parallel_interleave_prefetch=%d: must be >= 1 (or unset)'
      % prefetch
    )
  if p.rewriter_config is not None:
    try:
      parse_rewriter_config(p.rewriter_config)
    except ValueError as e:
      raise error_cls(str(e)) from None


def parse_rewriter_config(text: str):
  """The RewriterConfig proto `text` describes.

  Raises:
    ValueError: the text is not a RewriterConfig text proto; the message is
      one line naming the flag.
  """
  config = type(tf.compat.v1.ConfigProto().graph_options.rewrite_options)()
  try:
    text_format.Merge(text, config)
  except text_format.ParseError as e:
    raise ValueError(
      '--rewriter_config=%r: not a RewriterConfig text proto (%s)'
      % (text, ' '.join(str(e).split()))
    ) from None
  return config


def configure_session(config, p):
  """Adds the grappler and NUMA knobs of Params `p` to a ConfigProto.

  Returns the same config.
  """
  if p.rewriter_config is not None:
    rewrite_options = config.graph_options.rewrite_options
    rewrite_options.CopyFrom(parse_rewriter_config(p.rewriter_config))
  elif not p.enable_optimizations:
    options = config.graph_options
    options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
    options.rewrite_options.disable_meta_optimizer = True
  if p.use_numa_affinity:
    config.experimental.use_numa_affinity = True
  # After --rewriter_config, as the classic harness did: a merge scope of
  # collectives needs the scoped allocator whatever the other rewrites.
  return collective_options.session_rewrites(
    config, merge=collective_catalog.merges(p)
  )


def numa_node_count(root: str = '/sys/devices/system/node') -> int:
  """NUMA nodes of this machine (1 when the kernel does not say)."""
  return max(1, len(glob.glob(os.path.join(root, 'node[0-9]*'))))


def header_rows(
  p, *, in_cluster: bool = False, num_numa_nodes: Optional[int] = None
) -> list:
  """The classic header's rows for the knobs that are not at their default.

  Where --use_numa_affinity changes nothing (a machine of one NUMA node, or
  a cluster task, whose devices its server creates), also prints one
  warning line on stderr.
  """
  rows = []
  if p.use_numa_affinity:
    nodes = numa_node_count() if num_numa_nodes is None else num_numa_nodes
    why = None
    if in_cluster:
      why = "a cluster task's devices are made by its server"
    elif nodes == 1:
      why = 'this machine has one NUMA node'
    if why is None:
      rows.append(('NUMA bind', 'True (%d NUMA nodes)' % nodes))
    else:
      rows.append(('NUMA bind', 'True (no effect: %s)' % why))
      print(
        'warning: --use_numa_affinity has no effect: %s' % why,
        file=sys.stderr,
        flush=True,
      )
  if p.rewriter_config is not None:
    rows.append(('RewriterConfig', p.rewriter_config))
  elif not p.enable_optimizations:
    rows.append(('Graph opts', 'off (--noenable_optimizations)'))
  return rows
