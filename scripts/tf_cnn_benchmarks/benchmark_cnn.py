"""The classic module `benchmark_cnn`, for callers in this folder.

Forwards to tf_cnn_benchmarks.benchmark_cnn (make_params,
make_params_from_flags, setup, BenchmarkCNN, ...; any other name is looked
up there) and adds the classic define_flags and
set_default_param_values_and_env_vars.
"""

import _classic_root  # noqa: F401  (first: the package, not this folder)
import flags as _classic_flags_module

from tf_cnn_benchmarks import benchmark_cnn as _driver
from tf_cnn_benchmarks.platform import gpu_runtime as _gpu_runtime

make_params = _driver.make_params
make_params_from_flags = _driver.make_params_from_flags
setup = _driver.setup
BenchmarkCNN = _driver.BenchmarkCNN


def define_flags(specs=None) -> None:
  """Defines the absl flags of every parameter (classic define_flags)."""
  _classic_flags_module.define_flags(specs)


def set_default_param_values_and_env_vars(params):
  """The Params with every automatic default resolved (validated), and the
  environment variables their runtime flags set (GPU thread mode, MKL's
  KMP_*), as classic did before building the graph."""
  resolved = setup(params)
  _gpu_runtime.apply_environment(_gpu_runtime.environment(resolved))
  return resolved


def __getattr__(name: str):
  """Any other public name of the driver module."""
  if name.startswith('__'):
    raise AttributeError(name)
  return getattr(_driver, name)
