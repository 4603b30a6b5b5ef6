"""Every flag of the classic tf_cnn_benchmarks: its topic, default and status.

The classic harness (tensorflow/benchmarks, scripts/tf_cnn_benchmarks)
defined 137 flags in benchmark_cnn.py plus `ml_perf_compliance_logging` in
its entry script. A classic command line must never fail on an unknown flag,
so each one is accounted for:

  implemented: a `params.Params` field declared with classic=True (see
    fields.py); its entry here is generated from the field.
  no effect: declared here (it is no Params field), with its classic type
    and default, and accepted with one warning line naming the flag and why
    it cannot exist on TF 2.21 or this build; the run goes on.

The no-effect flags are defined here as absl flags, so every classic
spelling parses (`--flag=value`, `--flag value`, `--noflag`,
`--flag=True/False`). The help (`render_help`) groups every flag by the
topic its field (or entry here) names. This module imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import textwrap
import typing
from typing import Any, Optional

from absl import flags

from tf_cnn_benchmarks.config import fields
from tf_cnn_benchmarks.config import params_value

IMPLEMENTED = 'implemented'
NO_EFFECT = 'no effect'

MODEL_DATA = fields.MODEL_DATA
STRATEGY = fields.STRATEGY
CHECKPOINTS = fields.CHECKPOINTS
OBSERVABILITY = fields.OBSERVABILITY
PERFORMANCE = fields.PERFORMANCE

_STAGING = 'the TF1 StagingArea input producer does not exist on TF 2.21'
_SSD = 'only used by the ssd300 model, which is not available here'


@dataclasses.dataclass(frozen=True)
class ClassicFlag:
  """One classic flag.

  kind: bool, int, float, string, list or enum (the classic absl type).
  default: the classic default (a Params field's: its field default).
  choices: the enum values.
  status: IMPLEMENTED or NO_EFFECT.
  note: the reason (no effect) or what the flag does (defined here).
  """

  name: str
  kind: str
  default: Any
  topic: str
  status: str
  note: str = ''
  choices: tuple = ()


def _f(name, kind, default, topic, status=IMPLEMENTED, note='', choices=()):
  return ClassicFlag(name, kind, default, topic, status, note, tuple(choices))


# Classic flags that are not Params fields: defined here.
_EXTRA_FLAGS = (
  _f('batch_group_size', 'int', 1, PERFORMANCE, NO_EFFECT, _STAGING),
  _f('collect_eval_results_async', 'bool', False, CHECKPOINTS, NO_EFFECT, _SSD),
  _f(
    'use_datasets',
    'bool',
    True,
    PERFORMANCE,
    NO_EFFECT,
    'input is always tf.data; ' + _STAGING,
  ),
  _f(
    'use_tf_layers',
    'bool',
    True,
    MODEL_DATA,
    NO_EFFECT,
    'tf.layers does not exist on TF 2.21; the models build the same '
    'layers from tf ops either way',
  ),
  _f(
    'debugger',
    'string',
    None,
    OBSERVABILITY,
    NO_EFFECT,
    'tfdbg (tf_debug sessions) does not exist on TF 2.21',
  ),
  _f(
    'use_python32_barrier',
    'bool',
    False,
    PERFORMANCE,
    NO_EFFECT,
    'no Python thread barrier is used (one session.run per step); ' + _STAGING,
  ),
  _f(
    'sparse_to_dense_grads',
    'bool',
    False,
    STRATEGY,
    NO_EFFECT,
    'only the NCF model had sparse gradients; ncf is not a CNN',
  ),
  _f(
    'horovod_device',
    'string',
    '',
    STRATEGY,
    NO_EFFECT,
    'Horovod is not part of this build (no --variable_update=horovod)',
  ),
  _f('backbone_model_path', 'string', None, CHECKPOINTS, NO_EFFECT, _SSD),
  _f(
    'trt_mode',
    'enum',
    '',
    PERFORMANCE,
    NO_EFFECT,
    'TensorRT (TF-TRT) is not part of this TF 2.21 build',
    ('', 'FP32', 'FP16', 'INT8'),
  ),
  _f(
    'trt_max_workspace_size_bytes',
    'int',
    4 << 30,
    PERFORMANCE,
    NO_EFFECT,
    'TensorRT (TF-TRT) is not part of this TF 2.21 build',
  ),
)

_KINDS = {bool: 'bool', int: 'int', float: 'float', str: 'string'}


def _from_field(field, hint) -> ClassicFlag:
  """The classic entry of a Params field declared with classic=True."""
  args = [a for a in typing.get_args(hint) if a is not type(None)]
  kind = 'list' if field.default == () else _KINDS[args[0] if args else hint]
  if field.metadata['choices']:
    kind = 'enum'
  return ClassicFlag(
    field.name,
    kind,
    field.default,
    field.metadata['topic'],
    IMPLEMENTED,
    choices=field.metadata['choices'],
  )


def _params_flags() -> tuple:
  hints = typing.get_type_hints(params_value.Params)
  return tuple(
    _from_field(f, hints[f.name])
    for f in params_value.FIELDS.values()
    if f.metadata['classic']
  )


CLASSIC_FLAGS = {f.name: f for f in _params_flags() + _EXTRA_FLAGS}
EXTRA_FLAGS = {f.name: f for f in _EXTRA_FLAGS}

# Flags of the entry point itself (not Params fields).
ENTRY_FLAG_TOPICS = {
  'list_models': MODEL_DATA,
  'list_models_with_stats': MODEL_DATA,
}


def topic_of(name: str) -> Optional[str]:
  """The help topic of a flag, or None for a flag not grouped here."""
  if name in params_value.FIELDS:
    return params_value.FIELDS[name].metadata['topic']
  if name in EXTRA_FLAGS:
    return EXTRA_FLAGS[name].topic
  return ENTRY_FLAG_TOPICS.get(name)


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the classic flags that are not Params fields (idempotent)."""
  for f in _EXTRA_FLAGS:
    if f.name in flag_values:
      continue
    help_text = f.note
    if f.status == NO_EFFECT:
      help_text = 'No effect here: %s.' % f.note
    if f.kind == 'enum':
      flags.DEFINE_enum(
        f.name, f.default, list(f.choices), help_text, flag_values=flag_values
      )
      continue
    definer = {
      'bool': flags.DEFINE_bool,
      'int': flags.DEFINE_integer,
      'float': flags.DEFINE_float,
      'string': flags.DEFINE_string,
      'list': flags.DEFINE_list,
    }[f.kind]
    definer(f.name, f.default, help_text, flag_values=flag_values)


class ClassicFlagError(ValueError):
  """A classic flag this run cannot honour; the message is one line."""


def check_extra_flags(values: dict) -> list[str]:
  """Checks the non-Params classic flags a run was given.

  Args:
    values: flag name -> parsed value, for the names in EXTRA_FLAGS.

  Returns:
    The warning lines to print (one per flag set that has no effect).
  """
  warnings = []
  for name, value in sorted(values.items()):
    f = EXTRA_FLAGS[name]
    if value == f.default or f.status == IMPLEMENTED:
      continue
    warnings.append('warning: --%s has no effect: %s' % (name, f.note))
  return warnings


# absl.app's flags (defined once TensorFlow imports absl.app): this harness
# does not run under absl.app.run, so it honours --only_check_args itself and
# does not offer the debugger and profiler switches.
ABSL_APP_FLAGS_NOT_OFFERED = (
  'run_with_pdb',
  'pdb_post_mortem',
  'pdb',
  'run_with_profiling',
  'profile_file',
  'use_cprofile_for_profiling',
)
HELP_SWITCHES = ('-h', '--help', '-help', '--helpshort', '--helpfull', '-?')


def help_requested(argv: list[str]) -> Optional[str]:
  """'short' or 'full' when argv asks for help, else None."""
  for arg in argv[1:]:
    if arg == '--':
      return None
    if arg in ('--helpfull', '-helpfull'):
      return 'full'
    if arg in HELP_SWITCHES or arg in ('-helpshort',):
      return 'short'
  return None


def render_help(
  flag_values: flags.FlagValues, own: list[str], program: str, full: bool
) -> str:
  """absl-style help: the harness flags grouped by topic.

  Args:
    flag_values: the parsed-or-not FlagValues holding every flag.
    own: names of the harness's flags (Params fields and --list_models).
    program: how the harness was started, for the usage line.
    full: also list the other flags in flag_values (absl's logging and
      app flags, any a loaded library defined), as --helpfull does.
  """
  lines = ['USAGE: %s [flags]' % program, '']
  names = sorted(set(own) | set(EXTRA_FLAGS))
  for topic in fields.TOPICS + (None,):
    group = [n for n in names if topic_of(n) == topic]
    if not group:
      continue
    lines.append('%s:' % (topic or 'other harness flags'))
    lines.extend(_describe(flag_values[n]) for n in group)
    lines.append('')
  if full:
    rest = sorted(
      n
      for n in flag_values
      if n not in names
      and n not in ABSL_APP_FLAGS_NOT_OFFERED
      and len(n) > 1  # absl's one-letter aliases (-v) print with the long name
    )
    lines.append('other absl flags:')
    lines.extend(_describe(flag_values[n]) for n in rest)
    lines.append('')
  lines.append(
    'Help: -h, --help, --helpshort (harness flags), --helpfull (all flags). '
    '--only_check_args: check the flags, then exit.'
  )
  return '\n'.join(lines)


def _describe(flag) -> str:
  """One flag as absl's help prints it (--[no]name for booleans)."""
  name = '--[no]%s' % flag.name if flag.boolean else '--%s' % flag.name
  if flag.short_name:
    name = '-%s,%s' % (flag.short_name, name)
  text = textwrap.fill(
    '  %s: %s' % (name, flag.help or ''), 80, subsequent_indent='    '
  )
  for extra in (
    flag.default_as_str and 'default: %s' % flag.default_as_str,
    flag.parser.syntactic_help,
  ):
    if extra:
      text += '\n' + textwrap.fill(
        '(%s)' % extra, 80, initial_indent='    ', subsequent_indent='    '
      )
  return text


def check_command_line(flag_values: flags.FlagValues) -> list:
  """Checks the parsed flags that are not Params fields.

  Returns the warning lines to print; raises ClassicFlagError (one line) for
  an absl app flag this harness does not offer.
  """
  for name in ABSL_APP_FLAGS_NOT_OFFERED:
    if name in flag_values and flag_values[name].present:
      raise ClassicFlagError(
        "--%s: absl.app's debugger/profiler flags are not offered by "
        'this harness' % name
      )
  values = {n: flag_values[n].value for n in EXTRA_FLAGS if n in flag_values}
  return check_extra_flags(values)
