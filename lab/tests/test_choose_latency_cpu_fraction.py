"""lab/scripts/choose_latency_cpu_fraction.py picks the fraction whose
predicted cluster/local ratios are nearest the measured calibration cells."""

import contextlib
import io
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

from lab.scripts import choose_latency_cpu_fraction as choose  # noqa: E402
from tf_cnn_benchmarks.scaling.model import profile_format  # noqa: E402

FIXTURE = REPO / 'tests' / 'data' / 'profile_resnet20_cpu.json'


def test_the_fraction_that_predicts_the_measured_ratios_is_chosen(tmp_path):
  """Cells 'measured' as the model predicts them at 0.25 choose 0.25 over
  its neighbours, and every cell's figure is printed."""
  (tmp_path / 'resnet20_cifar10_b32_cpu.json').write_text(FIXTURE.read_text())
  profile = profile_format.load_profile(str(FIXTURE))
  cal = choose.with_fraction(0.25)
  managers = ('parameter_server', 'collective_all_reduce', 'hybrid')
  cells = [
    {
      'model': 'resnet20',
      'manager': m,
      'ratio': choose.predicted_ratio(profile, m, 2, cal),
    }
    for m in managers
  ]
  measured = tmp_path / 'cells.json'
  measured.write_text(json.dumps({'cells': cells}))
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    choose.main(
      [
        '--measured=%s' % measured,
        '--profile_dir=%s' % tmp_path,
        '--fractions=1,0.25,0',
      ]
    )
  lines = out.getvalue().splitlines()
  assert lines[-1].startswith('chosen: latency_cpu_fraction = 0.25 ')
  assert sum('measured' in line for line in lines) == 3 * len(managers)
