"""lab/scripts/measure_transfer_cpu.py: its flags and a real measurement."""

import json

import pytest

from lab.scripts import measure_transfer_cpu as script


@pytest.mark.parametrize(
  'argv,flag',
  [
    (['--transports=nccl'], '--transports'),
    (['--sizes=64,x'], '--sizes'),
    (['--sizes=2'], '--sizes'),
    (['--seconds=0'], '--seconds'),
    (['--concurrent=0'], '--concurrent'),
    (['--concurrent=4,x'], '--concurrent'),
    (['--groups=3'], '--groups'),
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
    ('collective', 64),
  ]
  for r in rows:
    assert r['wall_us_per_hop'] > 0 and r['lost_core_us_per_hop'] > 0
  assert rows[2]['messages_in_hop'] == 4
  assert (rows[4]['tasks'], rows[4]['messages_in_hop']) == (3, 12)
