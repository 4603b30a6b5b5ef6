"""The Params value: one frozen dataclass composed of the field groups.

`Params` is the one value a run depends on; its fields are declared with
fields.field in the config modules its bases name. This module sits below
resolution: resolve.py imports it, and params.py (the run plan: Params made
from flags or keywords, then resolved) imports both, so params and resolve
form no import circle.

`define_flags` generates the absl flags from the fields. This module imports
no TensorFlow (--help prints before TensorFlow loads).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from absl import flags

from tf_cnn_benchmarks.config import fields
from tf_cnn_benchmarks.config import output_fields
from tf_cnn_benchmarks.config import run_fields
from tf_cnn_benchmarks.config import runtime_fields
from tf_cnn_benchmarks.config import training_fields


class ParamsError(ValueError):
  """A bad flag value or combination; the message is one line naming it."""


# The bases are listed last group first: a dataclass orders its fields from
# the last base to the first, and the field order is the order of the flags
# in a results line's params.
@dataclasses.dataclass(frozen=True)
class Params(
  output_fields.OutputFields,
  training_fields.TrainingFields,
  run_fields.RunFields,
  runtime_fields.RuntimeSettings,
  runtime_fields.KnobSettings,
  runtime_fields.InputSettings,
):
  """Everything a benchmark run depends on. Field name == flag name.

  Every field is declared with fields.field (help, topic, classic status,
  whether it shapes the graph), in these config modules:

    run_fields.RunFields: what to run, where, variable managers, cluster.
    training_fields.TrainingFields: precision, all-reduce, optimisation.
    output_fields.OutputFields: real data, checkpoints, evaluation,
      observability, output.
    runtime_fields: the ImageNet preprocessing flags (InputSettings), the
      runtime and profiling knobs (KnobSettings), the GPU / MKL runtime
      settings (RuntimeSettings).
  """

  def _replace(self, **changes: Any) -> 'Params':
    """A copy with some fields changed (the classic namedtuple API)."""
    return dataclasses.replace(self, **changes)

  @property
  def compute_dtype(self):
    """The tf.DType the towers compute in (float16, bfloat16 or float32)."""
    # TensorFlow late: __main__ defines its flags from this module, --help
    # answers without TensorFlow.
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    if self.use_fp16:
      return tf.float16
    if self.use_bf16:
      return tf.bfloat16
    return tf.float32


FIELDS = {f.name: f for f in dataclasses.fields(Params)}

_HINTS = typing.get_type_hints(Params)


def _base_type(name: str) -> type:
  hint = _HINTS[name]
  args = [a for a in typing.get_args(hint) if a is not type(None)]
  return args[0] if args else hint


class IntOrAutoParser(flags.ArgumentParser):
  """The flag of an int field declared with auto=True: N or 'auto'."""

  def parse(self, argument):
    """'auto' (any case) -> fields.AUTO; else a whole number."""
    if isinstance(argument, int) and not isinstance(argument, bool):
      return argument
    text = str(argument).strip()
    if text.lower() == fields.AUTO:
      return fields.AUTO
    try:
      return flags.IntegerParser().parse(text)
    except ValueError:
      raise ValueError('must be a whole number or auto') from None

  def flag_type(self) -> str:
    """'int', as the classic flag's (classic callers map the type names of
    scripts/tf_cnn_benchmarks/flags.py's param_specs to absl definers);
    the help text names auto."""
    return 'int'


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines one absl flag per Params field (idempotent per FlagValues)."""
  definers = {
    bool: flags.DEFINE_bool,
    int: flags.DEFINE_integer,
    float: flags.DEFINE_float,
    str: flags.DEFINE_string,
    tuple: flags.DEFINE_list,  # comma-separated, as the classic list flags
  }
  for name, field in FIELDS.items():
    if name in flag_values:
      continue
    help_text = field.metadata['help']
    if field.metadata['choices']:
      help_text += ' One of: %s.' % ', '.join(field.metadata['choices'])
    default = field.default
    if field.metadata.get('auto'):
      flags.DEFINE(
        IntOrAutoParser(), name, default, help_text, flag_values=flag_values
      )
      continue
    definers[_base_type(name)](
      name,
      list(default) if isinstance(default, tuple) else default,
      help_text,
      flag_values=flag_values,
    )
