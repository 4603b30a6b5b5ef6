"""The classic module `flags`, for callers in this folder.

param_specs maps every parameter name to a ParamSpec (flag_type,
default_value, description, kwargs) as classic did; DEFINE_* add a caller's
own; define_flags() defines an absl flag for each (the project's own
parameters through their definitions in tf_cnn_benchmarks.config).
"""

import collections

import _classic_root  # noqa: F401  (first: the package, not this folder)
from absl import flags as absl_flags

from tf_cnn_benchmarks.config import classic_flags as _classic_flags
from tf_cnn_benchmarks.config import params_value as _params_value

FLAGS = absl_flags.FLAGS
ParamSpec = collections.namedtuple(
  'ParamSpec', ['flag_type', 'default_value', 'description', 'kwargs']
)
# absl's flag_type() -> the classic ParamSpec type names.
_CLASSIC_TYPES = {'bool': 'boolean', 'int': 'integer', 'multi_string': 'list'}
_ABSL_DEFINERS = {
  'boolean': absl_flags.DEFINE_boolean,
  'float': absl_flags.DEFINE_float,
  'integer': absl_flags.DEFINE_integer,
  'string': absl_flags.DEFINE_string,
  'enum': absl_flags.DEFINE_enum,
  'list': absl_flags.DEFINE_list,
}


def _define_project_flags(flag_values) -> None:
  _params_value.define_flags(flag_values)
  _classic_flags.define_flags(flag_values)


def _project_specs() -> dict:
  """A ParamSpec per parameter of this project, read off its absl flags."""
  scratch = absl_flags.FlagValues()
  _define_project_flags(scratch)
  specs = {}
  for name in scratch:
    flag = scratch[name]
    kind = flag.flag_type()
    kind = _CLASSIC_TYPES.get(kind, kind)
    specs[name] = ParamSpec(kind, flag.default, flag.help, {})
  return specs


param_specs = _project_specs()
_PROJECT_NAMES = frozenset(param_specs)


def DEFINE_string(name, default, help):
  """Adds a string parameter to param_specs (defined by define_flags)."""
  param_specs[name] = ParamSpec('string', default, help, {})


def DEFINE_boolean(name, default, help):
  """Adds a boolean parameter to param_specs."""
  param_specs[name] = ParamSpec('boolean', default, help, {})


def DEFINE_integer(name, default, help, lower_bound=None, upper_bound=None):
  """Adds an integer parameter to param_specs."""
  bounds = {'lower_bound': lower_bound, 'upper_bound': upper_bound}
  param_specs[name] = ParamSpec('integer', default, help, bounds)


def DEFINE_float(name, default, help, lower_bound=None, upper_bound=None):
  """Adds a float parameter to param_specs."""
  bounds = {'lower_bound': lower_bound, 'upper_bound': upper_bound}
  param_specs[name] = ParamSpec('float', default, help, bounds)


def DEFINE_enum(name, default, enum_values, help):
  """Adds an enum parameter to param_specs."""
  param_specs[name] = ParamSpec(
    'enum', default, help, {'enum_values': enum_values}
  )


def DEFINE_list(name, default, help):
  """Adds a list parameter to param_specs."""
  param_specs[name] = ParamSpec('list', default, help, {})


def define_flags(specs=None) -> None:
  """Defines an absl flag for each parameter (idempotent).

  The project's own parameters get their own definitions (types, choices,
  help); a caller's DEFINE_* additions (or `specs`) are defined as given.
  """
  _define_project_flags(FLAGS)
  for name, spec in (specs or param_specs).items():
    if name in _PROJECT_NAMES or name in FLAGS:
      continue
    if spec.flag_type not in _ABSL_DEFINERS:
      raise ValueError('Unknown flag_type %s' % spec.flag_type)
    _ABSL_DEFINERS[spec.flag_type](
      name, spec.default_value, help=spec.description, **spec.kwargs
    )
