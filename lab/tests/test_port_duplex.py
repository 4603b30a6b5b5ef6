"""lab/probes/port_duplex.py: a push into a ps task timed
alone, beside the other workers' reads out of it, and both at once."""

import json
import os
from pathlib import Path
import subprocess
import sys

import pytest

from lab.probes import port_duplex

REPO = Path(__file__).resolve().parents[2]


def test_overlap_is_one_when_both_take_the_longer_alone():
  """A push of 300 ms beside reads of 600: together 600 ms (full duplex)."""
  assert port_duplex.overlap(300.0, 600.0, 600.0) == 1.0


def test_overlap_is_zero_when_both_take_the_sum():
  """Together 900 ms: one direction after the other."""
  assert port_duplex.overlap(300.0, 600.0, 900.0) == 0.0


def test_overlap_between_and_clipped():
  """Together 750 ms: 150 of the push's 300 ms carried beside the reads;
  faster than the longer alone or slower than the sum clips to 1 or 0."""
  assert port_duplex.overlap(300.0, 600.0, 750.0) == 0.5
  assert port_duplex.overlap(300.0, 600.0, 590.0) == 1.0
  assert port_duplex.overlap(300.0, 600.0, 950.0) == 0.0
  assert port_duplex.overlap(0.0, 600.0, 600.0) == 0.0


@pytest.mark.slow  # three TensorFlow tasks, ~30 s
def test_worker_zero_times_a_push_beside_a_read():
  proc = subprocess.run(
    [
      sys.executable,
      'scripts/launch_local_cluster.py',
      '--module=lab.probes.port_duplex',
      '--num_workers=2',
      '--num_ps=1',
      '--no-controller',
      '--',
      '--message_bytes=65536',
      '--rounds=2',
    ],
    cwd=REPO,
    capture_output=True,
    text=True,
    timeout=180,
    env=dict(os.environ, PYTHONPATH=str(REPO)),
  )
  assert proc.returncode == 0, proc.stderr[-2000:] + proc.stdout[-2000:]
  lines = [ln for ln in proc.stdout.splitlines() if port_duplex.PREFIX in ln]
  assert len(lines) == 1, proc.stdout[-2000:]
  out = json.loads(lines[0].split(port_duplex.PREFIX, 1)[1])
  assert set(out) == {'push_ms', 'reads_ms', 'both_ms', 'overlap'}
  assert all(out[k] > 0 for k in ('push_ms', 'reads_ms', 'both_ms'))
  assert 0.0 <= out['overlap'] <= 1.0
