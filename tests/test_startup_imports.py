"""What the entry point's TensorFlow import loads (issue 57 start-up)."""

import subprocess
import sys

from tests.helpers import ROOT

PROBE = """
import sys
from tf_cnn_benchmarks.platform import quiet
quiet.load_tensorflow()
loaded = sorted(n for n in quiet.KERAS_EXTRAS if n in sys.modules)
import matplotlib.pyplot, pandas  # as usual afterwards
print(loaded, all(n in sys.modules for n in quiet.KERAS_EXTRAS))
"""


def test_keras_optional_extras_stay_out_of_the_benchmark_process():
  proc = subprocess.run(
    [sys.executable, '-c', PROBE],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.split('\n')[-2] == '[] True'
