"""lab/probes/ring_sets.py: sets of collective all-reduces
over the launcher's workers, timed at once."""

import json
import os
from pathlib import Path
import subprocess
import sys

import pytest

from lab.probes import ring_sets

REPO = Path(__file__).resolve().parents[2]


def test_sets_sizes_and_copies():
  assert ring_sets.parse_sets('6291456;256x3;19200, 40') == [
    [6291456],
    [256, 256, 256],
    [19200, 40],
  ]


@pytest.mark.parametrize('bad', ['', '2', '256x0', '256x65', 'ax2', '1;;2'])
def test_bad_sets_are_refused(bad):
  with pytest.raises(ValueError):
    ring_sets.parse_sets(bad)


def test_the_wire_time_of_the_busiest_port_by_hand():
  """3 workers: each port carries 4/3 of 3 MB; at 8 Mbit/s, of which the
  model's wire_payload (1448 of 1514 bytes) is payload."""
  ms = ring_sets.wire_ms([1_000_000, 2_000_000], 3, 8.0)
  assert ms == pytest.approx(4e6 / (1448.0 / 1514.0) / 1000.0)
  assert ring_sets.wire_ms([1000], 3, None) is None
  assert ring_sets.wire_ms([1000], 1, 8.0) is None


@pytest.mark.slow  # three TensorFlow tasks, ~25 s
def test_worker_zero_times_each_set():
  proc = subprocess.run(
    [
      sys.executable,
      str(REPO / 'scripts' / 'launch_local_cluster.py'),
      '--module=lab.probes.ring_sets',
      '--num_workers=2',
      '--num_ps=1',
      '--no-controller',
      '--no-private_network',
      '--timeout=240',
      '--',
      '--sets=65536;256x3',
      '--rounds=2',
    ],
    cwd=REPO,
    capture_output=True,
    text=True,
    timeout=300,
    env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'),
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  lines = [
    json.loads(line.split(ring_sets.PREFIX, 1)[1])
    for line in proc.stdout.splitlines()
    if ring_sets.PREFIX in line
  ]
  assert [(x['tensors'], x['bytes']) for x in lines] == [(1, 65536), (3, 768)]
  for x in lines:
    assert 0 < x['min_ms'] <= x['median_ms'] <= x['max_ms']
    assert x['wire_ms'] is None and x['workers'] == 2
