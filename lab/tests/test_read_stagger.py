"""lab/probes/read_stagger.py: workers reading one ps task at
once, each timing its own read."""

import json
import os
from pathlib import Path
import subprocess
import sys
import time

import pytest

from lab.probes import read_stagger

REPO = Path(__file__).resolve().parents[2]


def _line(task, ends):
  return '[worker:%d] %s%s' % (
    task,
    read_stagger.PREFIX,
    json.dumps({'task': task, 'ends_ms': ends}),
  )


def test_summary_takes_each_finishers_median_over_the_rounds():
  """Round 1 ends at 10, 20, 30 ms (tasks 0, 1, 2), round 2 at 30, 10,
  20 and round 3 at 12, 24, 30: sorted per round, the first finisher's
  median is 10, the second's 20, the last's 30."""
  lines = [
    _line(0, [10.0, 30.0, 12.0]),
    _line(1, [20.0, 10.0, 24.0]),
    _line(2, [30.0, 20.0, 30.0]),
  ]
  out = read_stagger.summarise(lines)
  assert out['ends_ms'] == [10.0, 20.0, 30.0]
  assert out['shares'] == [0.333, 0.667, 1.0]


@pytest.mark.slow  # three TensorFlow tasks, ~30 s
def test_two_workers_time_their_reads_of_one_ps_task():
  start = time.time() + 20
  proc = subprocess.run(
    [
      sys.executable,
      'scripts/launch_local_cluster.py',
      '--module=lab.probes.read_stagger',
      '--num_workers=2',
      '--num_ps=1',
      '--no-controller',
      '--',
      '--start_at=%f' % start,
      '--read_bytes=65536',
      '--rounds=2',
      '--period_ms=500',
    ],
    cwd=REPO,
    capture_output=True,
    text=True,
    timeout=180,
    env=dict(os.environ, PYTHONPATH=str(REPO)),
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  lines = sorted(
    {ln for ln in proc.stdout.splitlines() if read_stagger.PREFIX in ln}
  )
  assert len(lines) == 2, proc.stdout[-2000:]
  out = read_stagger.summarise(lines)
  assert len(out['ends_ms']) == 2 and out['shares'][-1] == 1.0
  assert 0 < out['ends_ms'][0] <= out['ends_ms'][1]
