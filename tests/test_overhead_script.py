"""scripts/overhead_vs_classic.py: its figures from traces and runs.

No harness runs here: run_once is replaced, and the traces are written by
the test, so every figure is known exactly.
"""

import json
import os
import sys

import pytest

from tf_cnn_benchmarks.commands import overhead_vs_classic as ovc

COMPUTE = '/job:localhost/replica:0/task:0/device:CPU:%d Compute'


def write_trace(path, ops):
  """A Chrome trace: ops = (device, start us, duration us), + a tensor row."""
  events = [
    {'ph': 'M', 'name': 'process_name', 'pid': d, 'args': {'name': n}}
    for d, n in ((0, COMPUTE % 0), (1, COMPUTE % 1), (9, 'x Tensors'))
  ]
  for device, start, dur in ops:
    events.append({'ph': 'X', 'pid': device, 'tid': 0, 'ts': start, 'dur': dur})
  events.append({'ph': 'X', 'pid': 9, 'tid': 0, 'ts': 0, 'dur': 10**6})
  with open(path, 'w') as f:
    json.dump({'traceEvents': events}, f)


def test_cores_busy_is_op_time_over_the_step(tmp_path):
  path = str(tmp_path / 't.json')
  # Two devices: 3 ms + 1 ms + 2 ms of ops over a 4 ms step.
  write_trace(path, [(0, 1000, 3000), (0, 4000, 1000), (1, 2000, 2000)])
  assert ovc.cores_busy(path) == {
    'op_ms': 6.0,
    'step_ms': 4.0,
    'cores_busy': 1.5,
  }


def test_cores_busy_of_a_missing_or_empty_trace(tmp_path):
  assert ovc.cores_busy(str(tmp_path / 'none.json')) is None
  path = str(tmp_path / 'empty.json')
  write_trace(path, [])
  assert ovc.cores_busy(path) is None


def test_median_ratio_pairs_rounds():
  assert ovc.median_ratio([110, 90, 120], [100, 100, 100]) == 1.1
  # A failed run drops its round only.
  assert ovc.median_ratio([110, None, 130], [100, 100, 100]) == 1.2
  assert ovc.median_ratio([None], [100]) is None


def test_select_quick_and_unknown():
  assert [c.name for c in ovc.select(None, True, None)] == list(ovc.QUICK)
  assert len(ovc.select(None, False, None)) == len(ovc.CONFIGS)

  def error(message):
    raise ValueError(message)

  with pytest.raises(ValueError, match='unknown nope'):
    ovc.select('lenet_b64,nope', False, error)


def test_both_harnesses_get_the_same_flags():
  args = ovc.parse_args(['--configs=lenet_b64'])
  (config,) = args.selected
  flags = ovc.run_flags(config, args)
  assert '--model=lenet' in flags and '--device=cpu' in flags
  assert '--num_batches=200' in flags
  traced = ovc.run_flags(config, args, '/tmp/t.json')
  assert '--trace_file=/tmp/t.json' in traced


def test_reference_mode_divides_by_the_committed_figure(
  tmp_path, monkeypatch, capsys
):
  ref = tmp_path / 'ref.json'
  ref.write_text(
    json.dumps(
      {
        'cpu': ovc.cpu_name(),
        'rows': [
          {
            'config': 'lenet_b64',
            'classic': 200.0,
            'classic_trace': {'cores_busy': 1.5},
          }
        ],
      }
    )
  )
  speeds = iter([250.0, 260.0, 240.0])
  monkeypatch.setattr(ovc, 'run_once', lambda *a: next(speeds))
  out = tmp_path / 'out.json'
  status = ovc.main(
    [
      '--configs=lenet_b64',
      '--reference=%s' % ref,
      '--no_trace',
      '--json=%s' % out,
    ]
  )
  assert status == 0
  (row,) = json.loads(out.read_text())['rows']
  assert row['ours'] == 250.0 and row['classic'] == 200.0
  assert row['ratio'] == 1.25
  assert 'lenet_b64' in capsys.readouterr().out


def test_no_classic_and_no_reference_is_an_error(tmp_path, capsys):
  status = ovc.main(['--reference=%s' % (tmp_path / 'none.json')])
  assert status == 2
  assert 'no reference' in capsys.readouterr().err


def test_live_rounds_alternate_the_order(monkeypatch):
  order = []

  def fake(harness, flags, args):
    order.append(harness)
    return 100.0

  monkeypatch.setattr(ovc, 'run_once', fake)
  args = ovc.parse_args(
    [
      '--configs=lenet_b64',
      '--classic_python=py',
      '--classic_script=x.py',
      '--repeats=4',
      '--no_trace',
    ]
  )
  row = ovc.measure(args.selected[0], args, {}, '/tmp')
  assert order == ['classic', 'ours', 'ours', 'classic'] * 2
  assert row['ratio'] == 1.0


# CPU busy: the process's CPU seconds over the wall seconds of its timed loop.

_CHILD = """
import sys, time
print('10\\timages/sec: 1.0 +/- 0.0', flush=True)
start = time.process_time()
if sys.argv[1] == 'spin':
  while time.process_time() - start < 0.4:
    pass
else:
  time.sleep(0.4)
print('total images/sec: 5.0', flush=True)
"""


def _timed(tmp_path, how):
  script = tmp_path / 'child.py'
  script.write_text(_CHILD)
  proc = ovc.subprocess.Popen(
    [sys.executable, str(script), how], stdout=ovc.subprocess.PIPE, text=True
  )
  return ovc._read_timed(proc, timeout=60)


def test_cpu_busy_of_a_spinning_and_a_sleeping_process(tmp_path):
  out, spinning = _timed(tmp_path, 'spin')
  assert 'total images/sec: 5.0' in out
  # One thread spinning: at most one core (and busy unless starved).
  assert 0.2 < spinning <= 1.05
  _, sleeping = _timed(tmp_path, 'sleep')
  assert sleeping < 0.15


def test_cpu_seconds_of_a_process_that_is_gone():
  assert ovc.process_cpu_seconds(2**22 + 12345) is None
  assert ovc.process_cpu_seconds(os.getpid()) > 0
