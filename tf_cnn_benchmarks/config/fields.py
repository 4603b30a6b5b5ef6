"""The one field helper of `params.Params`, and what each field says.

Every Params field is declared with `field(...)`, whose metadata carries all
that is said about the flag:

  help: the --help text.
  topic: the --help group (one of TOPICS).
  choices: the allowed values (checked when resolved), or ().
  classic: True when the classic tf_cnn_benchmarks had the flag; this
    project implements each such field with the classic meaning (the
    classic flags it does not implement are in classic_flags.py).
  graph: True when the value shapes the run every task of a cluster
    builds (its graph, batch counts, schedules), so the tasks must agree on
    it: cluster/fingerprint.py hashes exactly these fields.
  auto: True when an int field also takes the word AUTO (the run decides
    the number as it goes, config/auto_lengths.py); the field's flag parses
    'auto' or a whole number.

The absl flags, --help, the classic flag table and the cluster fingerprint
are all generated from this metadata, so a flag is added in one place (its
field) plus the code where it takes effect.

This module imports no TensorFlow (--help prints before TensorFlow loads).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

# Help topics, in the order --help prints them.
MODEL_DATA = 'model and data'
STRATEGY = 'strategy and all-reduce'
PRECISION = 'precision'
CLUSTER = 'cluster'
CHECKPOINTS = 'checkpoints and evaluation'
OBSERVABILITY = 'observability'
PERFORMANCE = 'performance knobs'
# The word an int field declared with auto=True also takes.
AUTO = 'auto'

TOPICS = (
  MODEL_DATA,
  STRATEGY,
  PRECISION,
  CLUSTER,
  CHECKPOINTS,
  OBSERVABILITY,
  PERFORMANCE,
)


def field(
  default: Any,
  help_text: str,
  choices: tuple = (),
  *,
  topic: str,
  classic: bool,
  graph: bool = False,
  auto: bool = False,
) -> Any:
  """A Params field: its default and everything said about its flag."""
  if topic not in TOPICS:
    raise ValueError('unknown help topic %r' % topic)
  return dataclasses.field(
    default=default,
    metadata={
      'help': help_text,
      'topic': topic,
      'classic': classic,
      'graph': graph,
      'choices': tuple(choices),
      'auto': auto,
    },
  )


def family(topic: str, *, graph: bool = False) -> Callable[..., Any]:
  """A `field` maker for fields that share a help topic and graph setting.

  The fields it makes are classic unless one passes classic=False;
  field(default, help_text, choices) as for `field` otherwise.
  """
  return functools.partial(field, topic=topic, classic=True, graph=graph)


def graph_field_names(params_cls) -> tuple:
  """Names of the fields of a Params class (or value) that shape the graph."""
  return tuple(
    f.name for f in dataclasses.fields(params_cls) if f.metadata.get('graph')
  )
