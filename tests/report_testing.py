"""Synthetic results lines for the compare/plot/report tests.

tests/fixtures/repeats.jsonl (schema 2, 'Fixture CPU 9000', 2 cores), built
by hand; images/sec per point:

  replicated        1 device: repeats 100, 110, 90   (run CI +-4)
                    2 devices: repeats 240, 200, 220 (run CI +-6)
  parameter_server  1 device: repeats 100, 102, 98   (run CI +-3)
                    2 devices: repeats 150, 152, 148 (run CI +-3)
  independent       one line per point, no sweep.repeat:
                    1 device 100, run CI [95, 105];
                    2 devices 250, run CI [245, 255]

The repeats are interleaved as sweep.py --repeats writes them (every point
once, then again), each with sweep.repeat 0, 1, 2.
"""

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / 'tests' / 'fixtures'
REPEATS = str(FIXTURES / 'repeats.jsonl')
SCALING = str(FIXTURES / 'scaling.jsonl')


def fixture_records(path=REPEATS):
  """The records of a fixture file, in order."""
  return [json.loads(line) for line in Path(path).read_text().splitlines()]


def record(variable_update, num_devices, ips, repeat=None, spread=None, **env):
  """One status-ok line like the fixture's: trivial, batch 32; repeat goes
  to sweep.repeat (no sweep block when None), spread (low, high) to
  images_per_sec_spread, env keys override the fixture's env."""
  line = dict(fixture_records()[0])
  line.update(
    variable_update=variable_update,
    num_devices=num_devices,
    images_per_sec=float(ips),
    images_per_sec_per_device=ips / num_devices,
    images_per_sec_spread=None,
    env=dict(line['env'], **env),
  )
  if spread is not None:
    low, high = spread
    line['images_per_sec_spread'] = {
      'stderr': (high - low) / 3.92,
      'ci95_low': low,
      'ci95_high': high,
      'jitter': 1.0,
    }
  line['sweep'] = dict(line['sweep'], repeat=repeat)
  if repeat is None:
    del line['sweep']
  return line


def write_records(path, records):
  """Write records as a JSON-lines results file; returns str(path)."""
  Path(path).write_text(''.join(json.dumps(r) + '\n' for r in records))
  return str(path)
