"""Run parameters: one frozen `Params` value, resolved into the run plan.

Every field of `Params` is a command-line flag with the same name, declared
once with fields.field (help, topic, classic status, whether it shapes the
graph); Params and its field groups are in params_value.py, which generates
the absl flags. `make_params(**overrides)` builds a validated, resolved
`Params` without touching absl, for tests and scripts; `make_plan(**overrides)`
also returns what they resolve to (cluster, manager class, mode), decided
once.

"Resolved" means every automatic default is replaced by the concrete value
the run will use (device kind, data format, batch size, number of batches,
...), so the value recorded in a results line says exactly what ran. The
checks and the defaults themselves are in resolve.py.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Optional

from absl import flags

from tf_cnn_benchmarks.cluster import spec as cluster_spec
from tf_cnn_benchmarks.config import params_value
from tf_cnn_benchmarks.config import resolve
import variable_mgr

# The value (params_value.py), by the names its callers know it here.
Params = params_value.Params
ParamsError = params_value.ParamsError
FIELDS = params_value.FIELDS


class Mode(enum.Enum):
  """What a run does with the model."""

  TRAIN = 'train'
  FORWARD_ONLY = 'forward_only'  # inference timing, no gradients
  EVAL = 'eval'  # accuracy of checkpoints (--eval)


@dataclasses.dataclass(frozen=True)
class RunPlan:
  """Params and what they resolve to, decided once at the top level.

  params: the validated, resolved Params.
  cluster: the cluster.spec.Cluster of a multi-worker run, else None.
  manager_cls: the VariableMgr class that runs it (the cluster variant in a
    cluster).
  mode: train, forward only or eval.
  device_was_auto: --device was not given (the header says so).
  warnings: lines the entry point prints once on stderr (flags the run
    ignores, as the classic harness did silently).
  manager_settings: the variable_mgr.ManagerSettings the manager is built
    from (the parsed --all_reduce_spec included); made from params when
    not given.
  """

  params: Params
  cluster: Optional[cluster_spec.Cluster]
  manager_cls: type
  mode: Mode
  device_was_auto: bool = False
  warnings: tuple = ()
  manager_settings: Any = None

  def __post_init__(self):
    if self.manager_settings is None:
      settings = variable_mgr.ManagerSettings.from_params(self.params)
      object.__setattr__(self, 'manager_settings', settings)


def plan_from_flags(flag_values: flags.FlagValues = flags.FLAGS) -> RunPlan:
  """Builds the run plan from parsed flags."""
  return make_plan(**{name: flag_values[name].value for name in FIELDS})


def params_from_flags(flag_values: flags.FlagValues = flags.FLAGS) -> Params:
  """Builds validated, resolved Params from parsed flags."""
  return plan_from_flags(flag_values).params


def make_plan(**overrides: Any) -> RunPlan:
  """Validates and resolves keyword arguments (flag names) into a RunPlan."""
  unknown = sorted(set(overrides) - set(FIELDS))
  if unknown:
    raise ParamsError('unknown parameter(s): %s' % ', '.join(unknown))
  raw = Params(**classic_spellings(overrides))
  resolve.check_choices(raw)
  resolved = resolve.resolve(raw)
  return RunPlan(
    resolved.params,
    resolved.cluster,
    resolved.manager_cls,
    mode_of(resolved.params),
    device_was_auto=resolved.device_was_auto,
    warnings=resolved.warnings,
  )


# String flags whose classic default was '' (unset).
_EMPTY_IS_UNSET = (
  'job_name',
  'ps_hosts',
  'worker_hosts',
  'controller_host',
  'trace_file',
  'eval_dir',
  # Classic default None, where '' is off too.
  'rewriter_config',
  'tfprof_file',
  'partitioned_graph_file_prefix',
  'benchmark_log_dir',
  'benchmark_test_id',
)


def classic_spellings(overrides: dict) -> dict:
  """The classic spellings made ours: '' for unset, CPU/GPU for cpu/gpu."""
  out = dict(overrides)
  for name in _EMPTY_IS_UNSET:
    if out.get(name) == '':
      out[name] = None
  for name in ('device', 'local_parameter_device'):
    if out.get(name) in ('CPU', 'GPU'):
      out[name] = out[name].lower()
  return out


def make_params(**overrides: Any) -> Params:
  """Builds validated, resolved Params from keyword arguments (flag names)."""
  return make_plan(**overrides).params


def as_plan(params_or_plan) -> RunPlan:
  """A RunPlan as it is; Params (Python callers) made into one.

  Resolved Params are validated again (a caller may have changed them
  since) and taken as they are; Params with automatic defaults still unset
  (the classic API's make_params) are validated and resolved.
  """
  if isinstance(params_or_plan, RunPlan):
    return params_or_plan
  p = params_or_plan
  if not is_resolved(p):
    return make_plan(**dataclasses.asdict(p))
  checked = resolve.revalidate(p)  # changed since setup()? same checks
  return RunPlan(p, checked.cluster, checked.manager_cls, mode_of(p))


def is_resolved(p: Params) -> bool:
  """Whether every automatic default of p has its concrete value."""
  return (
    p.data_name is not None
    and p.device is not None
    and p.data_format is not None
    and p.batch_size > 0
    and p.num_batches is not None
    and p.num_warmup_batches is not None
    and p.use_resource_vars is not None
  )


def mode_of(p: Params) -> Mode:
  """The run mode the --eval / --forward_only flags ask for."""
  if p.eval:
    return Mode.EVAL
  return Mode.FORWARD_ONLY if p.forward_only else Mode.TRAIN


def as_dict(p: Params) -> dict:
  """Params as a plain dict (flag name -> value), for the results line."""
  return dataclasses.asdict(p)
