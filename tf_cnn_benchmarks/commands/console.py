"""The console commands `pip install .` puts on PATH (pyproject.toml
[project.scripts]): each runs its command module as `python -m
tf_cnn_benchmarks.commands.NAME` would, so the module's own `__main__` block
(bad input: one line, exit status 2) decides the exit status.

To add a command: give the module a `__main__` block (`sys.exit(main())`),
a function here, a line in [project.scripts] and a thin scripts/NAME.py
(tests/test_install.py lists the commands).
"""

import runpy
import sys


def run_command(name: str) -> int:
  """Runs tf_cnn_benchmarks.commands.<name> as __main__; its exit status."""
  try:
    runpy.run_module(
      'tf_cnn_benchmarks.commands.' + name, run_name='__main__', alter_sys=True
    )
  except SystemExit as e:
    if e.code is None or isinstance(e.code, int):
      return e.code or 0
    print(e.code, file=sys.stderr)  # sys.exit('message'), as Python does
    return 1
  return 0


def sweep() -> int:
  """tf-cnn-benchmarks-sweep."""
  return run_command('sweep')


def compare() -> int:
  """tf-cnn-benchmarks-compare."""
  return run_command('compare')


def plot() -> int:
  """tf-cnn-benchmarks-plot."""
  return run_command('plot')


def report() -> int:
  """tf-cnn-benchmarks-report."""
  return run_command('report')


def launch_local_cluster() -> int:
  """tf-cnn-benchmarks-launch."""
  return run_command('launch_local_cluster')


def make_fake_data() -> int:
  """tf-cnn-benchmarks-make-fake-data."""
  return run_command('make_fake_data')


def profile_host() -> int:
  """tf-cnn-benchmarks-profile."""
  return run_command('profile_host')


def predict_scaling() -> int:
  """tf-cnn-benchmarks-predict."""
  return run_command('predict_scaling')


def validate_on_paper() -> int:
  """tf-cnn-benchmarks-validate-on-paper."""
  return run_command('validate_on_paper')


def predict_scale_benchmark() -> int:
  """tf-cnn-benchmarks-predict-scale-benchmark."""
  return run_command('predict_scale_benchmark')


def interval_coverage() -> int:
  """tf-cnn-benchmarks-interval-coverage."""
  return run_command('interval_coverage')
