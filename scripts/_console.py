"""The console commands `pip install .` puts on PATH for the scripts.

Installed, this directory is the package `tf_cnn_benchmarks_scripts`
(pyproject.toml [tool.setuptools.package-dir]); each command of
[project.scripts] runs its script exactly as `python scripts/NAME.py` runs it
from a checkout: the script's directory first on sys.path (the scripts import
their siblings, `import _results_io`, as top-level modules) and the file run
as `__main__`, so its own `if __name__ == '__main__':` block (bad input: one
line, exit status 2) decides the exit status. The usage lines name the
command (sys.argv[0]).

To add a command for a new script scripts/NAME.py: give the script a
`__main__` block (`sys.exit(main())`), add a function here, and a line to
pyproject.toml [project.scripts] (tests/test_install.py lists the commands).
"""

import os
import runpy
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def run_script(name: str) -> int:
  """Runs scripts/<name>.py as its command line would; returns its status."""
  if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
  try:
    runpy.run_path(os.path.join(_HERE, name + '.py'), run_name='__main__')
  except SystemExit as e:
    if e.code is None or isinstance(e.code, int):
      return e.code or 0
    print(e.code, file=sys.stderr)  # sys.exit('message'), as Python does
    return 1
  return 0


def sweep() -> int:
  """tf-cnn-benchmarks-sweep: scripts/sweep.py."""
  return run_script('sweep')


def compare() -> int:
  """tf-cnn-benchmarks-compare: scripts/compare.py."""
  return run_script('compare')


def plot() -> int:
  """tf-cnn-benchmarks-plot: scripts/plot.py."""
  return run_script('plot')


def report() -> int:
  """tf-cnn-benchmarks-report: scripts/report.py."""
  return run_script('report')


def launch_local_cluster() -> int:
  """tf-cnn-benchmarks-launch: scripts/launch_local_cluster.py."""
  return run_script('launch_local_cluster')


def make_fake_data() -> int:
  """tf-cnn-benchmarks-make-fake-data: scripts/make_fake_data.py."""
  return run_script('make_fake_data')


def profile_host() -> int:
  """tf-cnn-benchmarks-profile: scripts/profile_host.py."""
  return run_script('profile_host')


def predict_scaling() -> int:
  """tf-cnn-benchmarks-predict: scripts/predict_scaling.py."""
  return run_script('predict_scaling')
