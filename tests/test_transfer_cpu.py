"""transfer_cpu: the CPU a transfer takes from the compute beside it (its
script, lab/scripts/measure_transfer_cpu.py, is tested in the lab)."""

import dataclasses
from pathlib import Path

import pytest

from tf_cnn_benchmarks.scaling.profile import transfer_cpu

REPO = Path(__file__).resolve().parents[1]


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


def test_fit_a_message_from_the_smallest_and_a_byte_from_the_largest():
  """gRPC: 300 core-us at 64 B (one message), 1300 at 1 MB, 17300 at
  16 MB: a byte of a message 16000 / 15 MB. A collective hop of two tasks
  is 4 messages carrying 2 S bytes: 1000 at 64 B is 250 a message, and
  (33000 - 3000) / 15 MB / 2 a byte."""
  mb = 1_000_000
  rows = [
    transfer_cpu.HopCpu('grpc', 64, 1, 500.0, 300.0),
    transfer_cpu.HopCpu('grpc', mb, 1, 900.0, 1300.0),
    transfer_cpu.HopCpu('grpc', 16 * mb, 1, 9000.0, 17300.0),
    transfer_cpu.HopCpu('collective', 64, 4, 1000.0, 1000.0),
    transfer_cpu.HopCpu('collective', mb, 4, 3000.0, 3000.0),
    transfer_cpu.HopCpu('collective', 16 * mb, 4, 30000.0, 33000.0),
  ]
  figures = transfer_cpu.fit(rows)
  assert figures['grpc'] == pytest.approx((300.0, 16000.0 / (15 * mb)))
  assert figures['collective'] == pytest.approx(
    (250.0, 30000.0 / (15 * mb) / 2)
  )
  again = transfer_cpu.rows_from_json([r.as_json() for r in rows])
  assert transfer_cpu.fit(again) == pytest.approx(figures)
  # Rows of chains at once are not the one message's cost: left out.
  crowded = transfer_cpu.HopCpu('grpc', 64, 1, 900.0, 2400.0, copies=16)
  assert transfer_cpu.fit(rows + [crowded]) == pytest.approx(figures)


def test_copies_at_once_share_their_loss_over_all_their_messages():
  """16 collective hops at once (4 messages each) lost 10240 core-us:
  160 a message; the row says how many ran at once."""
  row = transfer_cpu.HopCpu('collective', 64, 4, 7800.0, 10240.0, copies=16)
  j = row.as_json()
  assert (j['copies'], j['messages_in_hop']) == (16, 4)
  assert j['lost_core_us_per_message'] == pytest.approx(160.0)
  assert transfer_cpu.rows_from_json([j]) == [row]


def test_two_group_sizes_split_a_tasks_cpu_into_its_steps_and_its_op():
  """An all-reduce over n tasks: each task runs the op once and sends one
  message in each of its 2(n - 1) ring steps. Over 2 tasks a hop lost
  1000 core-us (500 a task: op + 2 steps), over 3 tasks 2100 (700 a task:
  op + 4 steps): a step's message 100, the op 300. gRPC has no group."""
  rows = [
    transfer_cpu.HopCpu('grpc', 64, 1, 500.0, 300.0),
    transfer_cpu.HopCpu('collective', 64, 4, 1200.0, 1000.0),
    transfer_cpu.HopCpu('collective', 64, 12, 2200.0, 2100.0, tasks=3),
  ]
  assert transfer_cpu.messages_in_hop('collective', 3) == 12
  assert transfer_cpu.fit_group(rows) == {
    'collective': pytest.approx((100.0, 300.0))
  }
  again = transfer_cpu.rows_from_json([r.as_json() for r in rows])
  assert again == rows and again[2].as_json()['tasks'] == 3
  # Steps costing more than the whole two-task share are capped at it
  # (the op then 0); fewer than nothing, at 0 (the op all of it).
  dear = dataclasses.replace(rows[2], lost_core_us=4500.0)
  cheap = dataclasses.replace(rows[2], lost_core_us=1200.0)
  assert transfer_cpu.fit_group(rows[:2] + [dear]) == {
    'collective': pytest.approx((250.0, 0.0))
  }
  assert transfer_cpu.fit_group(rows[:2] + [cheap]) == {
    'collective': pytest.approx((0.0, 500.0))
  }
  assert transfer_cpu.fit_group(rows[:2]) == {}


def test_the_three_task_row_is_left_out_of_the_two_task_fits():
  """fit and fit_concurrent read two-task hops only."""
  mb = 1_000_000
  rows = [
    transfer_cpu.HopCpu('collective', 64, 4, 1000.0, 1000.0),
    transfer_cpu.HopCpu('collective', mb, 4, 3000.0, 3000.0),
    transfer_cpu.HopCpu('collective', 16 * mb, 4, 30000.0, 33000.0),
    transfer_cpu.HopCpu('collective', 64, 4, 7800.0, 10240.0, copies=16),
  ]
  three = transfer_cpu.HopCpu('collective', 64, 12, 2000.0, 9000.0, tasks=3)
  assert transfer_cpu.fit(rows + [three]) == transfer_cpu.fit(rows)
  assert transfer_cpu.fit_concurrent(rows + [three]) == {'collective': 160.0}
  plan = transfer_cpu._plan(('grpc', 'collective'), (64, mb), (1, 16), (2, 3))
  assert plan == [
    ('grpc', 64, 1, 2),
    ('grpc', 64, 16, 2),
    ('grpc', mb, 1, 2),
    ('collective', 64, 1, 2),
    ('collective', 64, 16, 2),
    ('collective', mb, 1, 2),
    ('collective', 64, 1, 3),
  ]
