"""A transfer's CPU per byte is taken ahead of compute (simulate.py's
priority uses), and a throttled link's bytes cost more of it than
loopback's (cost_model_calibration.LINK_CPU, measured by link_cpu.py)."""

import json
import math
import os
from pathlib import Path
import subprocess
import sys

import pytest

from lab.probes import link_cpu
from tests.test_cost_model import made_up_profile
from tests.test_cost_model import no_interference
from tf_cnn_benchmarks.scaling.model import cost_model_calibration as cal_lib
from tf_cnn_benchmarks.scaling.model import cost_model_graph
from tf_cnn_benchmarks.scaling.model import simulate
from tf_cnn_benchmarks.scaling.model import target as target_lib


def _compute_and_transfer(priority):
  """100 us of compute asking the one core, and 100 bytes over a link of
  1 byte/us asking 0.5 core-us a byte (first, or shared with compute)."""
  graph = simulate.Graph()
  graph.add(simulate.Job(100.0, {'cpu': 1.0}, cap=1.0, name='compute'))
  if priority:
    graph.add(simulate.Job(100.0, {'link': 1.0}, priority={'cpu': 0.5}))
  else:
    graph.add(simulate.Job(100.0, {'link': 1.0, 'cpu': 0.5}))
  return simulate.run(graph, {'cpu': 1.0, 'link': 1.0})


def test_a_priority_use_is_taken_before_the_others_share_by_hand():
  """First: the transfer runs at the link's 1 byte/us, taking half the
  core; compute gets the other half (50 us of work by 100 us) and finishes
  its last 50 alone, at 150. Shared: both ask 1.5 cores of one, each gets
  2/3 of its ask: both end at 150, the transfer 50 us later."""
  assert _compute_and_transfer(True) == pytest.approx([150.0, 100.0])
  assert _compute_and_transfer(False) == pytest.approx([150.0, 150.0])


def test_priority_users_share_an_overasked_resource_and_leave_the_floor():
  """Two transfers of 10 bytes, each asking a whole core a byte at its own
  link's 1 byte/us, on one core: they share it (0.5 byte/us each, done at
  20 us) and leave compute PRIORITY_FLOOR of it; compute then runs alone."""
  graph = simulate.Graph()
  graph.add(simulate.Job(10.0, {'cpu': 1.0}, cap=1.0, name='compute'))
  for link in ('a', 'b'):
    graph.add(simulate.Job(10.0, {link: 1.0}, priority={'cpu': 1.0}))
  ends = simulate.run(graph, {'cpu': 1.0, 'a': 1.0, 'b': 1.0})
  floor = simulate.PRIORITY_FLOOR
  assert ends[1:] == pytest.approx([20.0, 20.0])
  assert ends[0] == pytest.approx(20.0 + (10.0 - 20.0 * floor))


def test_a_priority_use_of_an_unknown_resource_is_refused():
  graph = simulate.Graph()
  graph.add(simulate.Job(1.0, {'link': 1.0}, priority={'gpu': 1.0}))
  with pytest.raises(ValueError, match='gpu'):
    simulate.run(graph, {'link': 1.0})


def _with_link_cpu(value):
  cal = no_interference()
  constants = dict(cal.constants)
  constants['link_cpu_us_per_byte'] = cal_lib.Constant(value, 'test', '')
  return cal_lib.Calibration(constants)


def test_a_throttled_transfer_takes_cpu_from_colocated_compute_by_hand():
  """Two colocated workers (8 cores) over 100 Mbit/s (12.5 bytes/us as
  payload). Compute asks all 8 cores for 1000 us; 12500 bytes cross the
  link meanwhile at 0.32 core-us a byte: 4 cores for 1000 us, taken first.
  Compute runs at half speed while the bytes cross: it ends at 1500 us,
  the transfer 1000 us after its latency. Without the link's CPU: 1000."""
  profile = made_up_profile([(4, 1.0)])
  target = target_lib.make_target(
    num_workers=2, link_mbits=100.0, topology='shared', colocated=True
  )
  ends = {}
  for value in (0.32, 0.0):
    b = cost_model_graph.StepBuilder(profile, target, _with_link_cpu(value))
    start = b.graph.join([], 'start')
    compute = b.work([('cpu', 0)] * 8, 1000.0, [start], 'compute')
    b.phase([(('cpu', 0), ('cpu', 1))], 12500, [start], 'grpc', 'send')
    job = b.graph.jobs[-1]
    assert 'cpu' not in job.demands
    assert job.priority.get('cpu', 0.0) == pytest.approx(value)
    ends[value] = simulate.run(b.graph, b.capacities())[compute]
  assert ends[0.32] == pytest.approx(1500.0)
  assert ends[0.0] == pytest.approx(1000.0)


def test_the_measured_table_between_its_rates_and_unthrottled():
  for topology, rows in cal_lib.LINK_CPU.items():
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    (r0, g0, c0), (r1, g1, c1) = rows[:2]
    assert cal_lib.link_cpu(r0, topology, 'grpc') == pytest.approx(g0)
    assert cal_lib.link_cpu(r0, topology, 'collective') == pytest.approx(c0)
    middle = math.sqrt(r0 * r1)
    assert cal_lib.link_cpu(middle, topology, 'grpc') == pytest.approx(
      (g0 + g1) / 2
    )
    assert cal_lib.link_cpu(None, topology, 'grpc') == 0.0
    assert all(g >= 0 and c >= 0 for _, g, c in rows)
  lines = cal_lib.default_calibration().lines()
  assert any(line.startswith('link_cpu = ') for line in lines)


def test_a_calibration_file_may_give_one_link_cpu(tmp_path):
  path = tmp_path / 'cal.json'
  path.write_text(
    json.dumps({'link_cpu_us_per_byte': {'value': 0, 'fitted_on': 'a NIC'}})
  )
  cal = cal_lib.load_calibration(str(path))
  assert cal.link_cpu(100.0, 'switch', 'grpc') == 0.0
  assert cal.link_cpu(None, 'switch', 'grpc') == 0.0
  default = cal_lib.default_calibration()
  assert default.link_cpu(100.0, 'switch', 'grpc') == pytest.approx(
    cal_lib.link_cpu(100.0, 'switch', 'grpc')
  )


def test_per_byte_is_the_slope_over_the_bytes_carried_by_hand():
  """gRPC: 1000 core-us at 1000 bytes, 3000 at 2000: 2 core-us a byte. A
  collective hop carries twice its size (two ring steps): 1 a byte."""
  rows = [
    {'transport': t, 'bytes': n, 'lost_core_us_per_hop': lost}
    for t in ('grpc', 'collective')
    for n, lost in ((1000, 1000.0), (2000, 3000.0))
  ]
  assert link_cpu.per_byte(rows) == pytest.approx(
    {'grpc': 2.0, 'collective': 1.0}
  )


REPO = Path(__file__).resolve().parents[2]

from lab.scripts import measure_link_cpu as script  # noqa: E402


@pytest.mark.parametrize(
  'argv,flag',
  [
    (['--links=25,x,none'], '--links'),
    (['--links=25,100'], '--links'),
    (['--topologies=ring'], '--topologies'),
    (['--runs=0'], '--runs'),
    (['--seconds=0'], '--seconds'),
  ],
)
def test_bad_flags_are_one_line_and_status_2(capsys, argv, flag):
  assert script.main(argv) == 2
  err = capsys.readouterr().err
  assert err.startswith(flag) and err.count('\n') == 1


def test_the_table_is_each_links_median_over_its_runs(capsys):
  """Two runs at 100 Mbit/s: gRPC slopes 2 and 4 core-us a byte (median
  3); unthrottled 1: 2 beyond it."""
  records = []
  for run, (link, slope) in enumerate([(100.0, 2.0), (100.0, 4.0)]):
    for n in (1000, 2000):
      records.append(
        {
          'transport': 'grpc',
          'bytes': n,
          'lost_core_us_per_hop': slope * n,
          'topology': 'switch',
          'link_mbits': link,
          'run': run,
        }
      )
  for n in (1000, 2000):
    records.append(
      {
        'transport': 'grpc',
        'bytes': n,
        'lost_core_us_per_hop': 1.0 * n,
        'topology': 'switch',
        'link_mbits': None,
        'run': 0,
      }
    )
  figures = script.table(records)
  assert figures == {
    ('switch', 100.0): {'grpc': pytest.approx(3.0)},
    ('switch', None): {'grpc': pytest.approx(1.0)},
  }
  script.print_table(figures)
  assert '+2.00000 beyond unthrottled' in capsys.readouterr().out


@pytest.mark.slow  # three TensorFlow tasks and two spinners, ~40 s
def test_the_launcher_runs_the_measurement_on_its_own_tasks(tmp_path):
  done = tmp_path / 'done'
  proc = subprocess.run(
    [
      sys.executable,
      'scripts/launch_local_cluster.py',
      '--module=lab.probes.link_cpu',
      '--num_workers=2',
      '--num_ps=1',
      '--no-controller',
      '--',
      '--done_file=%s' % done,
      '--sizes=65536,1048576',
      '--seconds=0.5',
    ],
    cwd=REPO,
    capture_output=True,
    text=True,
    timeout=300,
    env=dict(os.environ, PYTHONPATH=str(REPO)),
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  rows = [
    json.loads(ln[ln.index(link_cpu.PREFIX) + len(link_cpu.PREFIX) :])
    for ln in proc.stdout.splitlines()
    if link_cpu.PREFIX in ln
  ]
  assert [(r['transport'], r['bytes']) for r in rows] == [
    ('grpc', 65536),
    ('grpc', 1048576),
    ('collective', 65536),
    ('collective', 1048576),
  ]
  assert done.exists()
  assert all(v > 0 for v in link_cpu.per_byte(rows).values())


def test_from_json_prints_the_saved_rows_figures(tmp_path, capsys):
  path = tmp_path / 'rows.jsonl'
  rows = [
    {
      'transport': 'grpc',
      'bytes': n,
      'lost_core_us_per_hop': 2.0 * n,
      'topology': 'switch',
      'link_mbits': link,
      'run': 0,
    }
    for link in (100.0, None)
    for n in (1000, 2000)
  ]
  path.write_text(''.join(json.dumps(r) + '\n' for r in rows))
  assert script.main(['--from_json=%s' % path]) == 0
  assert 'switch   100 Mbit/s: grpc 2.00000' in capsys.readouterr().out
  assert script.main(['--from_json=%s' % (tmp_path / 'none')]) == 2
  err = capsys.readouterr().err
  assert err.startswith('--from_json') and err.count('\n') == 1
