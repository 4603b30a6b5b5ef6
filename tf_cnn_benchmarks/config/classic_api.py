"""The classic tf_cnn_benchmarks Python API, for programmatic callers.

Benchmark runners written for the classic harness do:

  from tf_cnn_benchmarks import benchmark_cnn
  params = benchmark_cnn.make_params(model='resnet50', batch_size=32)
  params = benchmark_cnn.setup(params)
  params = params._replace(num_batches=50)
  bench = benchmark_cnn.BenchmarkCNN(params)
  bench.print_info()
  stats = bench.run()   # stats['images_per_sec'], ...

benchmark_cnn re-exports make_params, make_params_from_flags and setup from
here; BenchmarkCNN.run returns a ClassicStats: the classic dict, whose
attributes are still those of our richer results.BenchmarkResult.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from absl import flags

from tf_cnn_benchmarks.config import classic_flags
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.config import params_value


def make_params(**kwargs: Any) -> params_lib.Params:
  """Params from flag-name keyword arguments, automatic defaults still unset.

  Raises:
    params_lib.ParamsError: an unknown name or a value outside its choices.
  """
  unknown = set(kwargs) - set(params_lib.FIELDS)
  pending = {n: kwargs.pop(n) for n in unknown & set(classic_flags.EXTRA_FLAGS)}
  if pending:  # a warning (no effect) is printed, a pending flag raises
    for line in classic_flags.check_extra_flags(pending):
      print(line, file=sys.stderr, flush=True)
  unknown -= set(pending)
  if unknown:
    raise params_lib.ParamsError(
      'unknown parameter(s): %s' % ', '.join(sorted(unknown))
    )
  return params_lib.Params(**params_lib.classic_spellings(kwargs))


def make_params_from_flags(
  flag_values: flags.FlagValues = flags.FLAGS,
) -> params_lib.Params:
  """Params from the absl flags (defined here when the caller has not)."""
  params_value.define_flags(flag_values)
  classic_flags.define_flags(flag_values)
  return make_params(**{n: flag_values[n].value for n in params_lib.FIELDS})


def setup(params: params_lib.Params) -> params_lib.Params:
  """The validated Params with every automatic default resolved."""
  return params_lib.as_plan(params).params


class ClassicStats(dict):
  """The classic run() dict; other attributes are the BenchmarkResult's.

  Keys: num_workers, num_steps, average_wall_time (seconds per timed step),
  images_per_sec, last_average_loss, and top_1_accuracy / top_5_accuracy
  when an evaluation ran.
  """

  def __init__(self, result):
    super().__init__(_classic_keys(result))
    self.result = result

  def __getattr__(self, name: str):
    if name == 'result':  # not set yet (unpickling)
      raise AttributeError(name)
    return getattr(self.result, name)


def _classic_keys(result) -> dict:
  stats = {
    'num_workers': result.num_workers,
    'num_steps': result.num_steps,
    'average_wall_time': result.step_time_ms['mean'] / 1000.0,
    'images_per_sec': result.images_per_sec,
    'last_average_loss': result.final_loss,
  }
  evaluation = result.evaluation
  if evaluation is None and result.training and result.training.evals:
    evaluation = result.training.evals[-1]  # the last during training
  if evaluation is not None:
    stats['top_1_accuracy'] = evaluation.top_1_accuracy
    stats['top_5_accuracy'] = evaluation.top_5_accuracy
  return stats


def fields_of(params: params_lib.Params) -> dict:
  """Params as keyword arguments (for callers that rebuild them)."""
  return dataclasses.asdict(params)
