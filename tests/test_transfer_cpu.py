"""transfer_cpu and scripts/measure_transfer_cpu.py: the CPU a transfer
takes from the compute beside it."""

import json
from pathlib import Path
import sys

import pytest

from tf_cnn_benchmarks.scaling import transfer_cpu

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'scripts'))

import measure_transfer_cpu as script  # noqa: E402


def test_a_hop_is_the_difference_of_the_two_chains_per_run():
  """2 spinning cores. The short chain: 100 runs in 1 s, the spinners got
  1.8 of its 2 core-seconds (2 ms lost a run). The long one, 10 hops more:
  50 runs in 1 s, 1.3 core-seconds (14 ms lost a run). A hop: (20 - 10)
  ms / 10 = 1000 us of wall, (14 - 2) ms / 10 = 1200 core-us lost."""
  short = transfer_cpu.Window(100, 1.0, 1.8)
  long = transfer_cpu.Window(50, 1.0, 1.3)
  wall, lost = transfer_cpu.per_hop(short, long, 10, 2)
  assert wall == pytest.approx(1000.0)
  assert lost == pytest.approx(1200.0)
  messages = transfer_cpu.messages_in_hop('collective')
  assert (messages, transfer_cpu.messages_in_hop('grpc')) == (4, 1)
  row = transfer_cpu.HopCpu('collective', 64, messages, wall, lost)
  assert row.cores == pytest.approx(1.2)
  assert row.as_json()['lost_core_us_per_message'] == pytest.approx(300.0)


@pytest.mark.parametrize(
  'argv,flag',
  [
    (['--transports=nccl'], '--transports'),
    (['--sizes=64,x'], '--sizes'),
    (['--sizes=2'], '--sizes'),
    (['--seconds=0'], '--seconds'),
  ],
)
def test_bad_flags_are_one_line_and_status_2(capsys, argv, flag):
  assert script.main(argv) == 2
  err = capsys.readouterr().err
  assert err.startswith(flag) and err.count('\n') == 1


@pytest.mark.slow  # three TensorFlow tasks and two spinners, ~30 s
def test_real_transfers_take_cpu_from_the_spinners(tmp_path):
  out = tmp_path / 'cpu.jsonl'
  argv = ['--sizes=64,1048576', '--seconds=0.5', '--json_out=%s' % out]
  assert script.main(argv) == 0
  rows = [json.loads(line) for line in out.read_text().splitlines()]
  assert [(r['transport'], r['bytes']) for r in rows] == [
    ('grpc', 64),
    ('grpc', 1048576),
    ('collective', 64),
    ('collective', 1048576),
  ]
  for r in rows:
    assert r['wall_us_per_hop'] > 0 and r['lost_core_us_per_hop'] > 0
  assert rows[2]['messages_per_hop'] == 4
