"""What every scripts/NAME.py runs: `python -m tf_cnn_benchmarks.commands.NAME`
with the same arguments, in place of this process (same pid, exit status and
signals), with the checkout's root first on PYTHONPATH so the package is
found from any directory. It computes the root itself: it runs before the
package can be imported (tf_cnn_benchmarks/platform/checkout.py is the same
rule for the package's own child processes)."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(command: str) -> None:
  """Replaces this process with the command module `command`."""
  env = dict(os.environ)
  rest = [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p]
  env['PYTHONPATH'] = os.pathsep.join([ROOT] + [p for p in rest if p != ROOT])
  module = 'tf_cnn_benchmarks.commands.' + command
  os.execve(sys.executable, [sys.executable, '-m', module, *sys.argv[1:]], env)
