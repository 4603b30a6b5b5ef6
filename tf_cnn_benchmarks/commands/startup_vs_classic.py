#!/usr/bin/env python3
"""How long a run takes to start, phase by phase, against the classic harness.

  python scripts/startup_vs_classic.py [--towers=1,2,4,8]
      [--models=resnet50] [--variable_updates=replicated]
      [--cluster [--cluster_variable_updates=parameter_server]]
      [--classic_python=PY --classic_script=PATH] [--repeats=2]
      [--num_batches=3] [--json=FILE] [--write_reference=FILE]

A tiny run (batch 2 per tower, one warm-up step, a few timed steps, NHWC on
the CPU) of each configuration with both harnesses, alternating A B A B, each
run's output lines timestamped as they arrive. The lines both harnesses
print split a run into phases:

  import   process start -> 'Generating training model' (TensorFlow, flags,
           the header)
  build    -> 'Initializing graph' (the towers, gradients, updates)
  init     -> 'Running warm up' (session, variable initialisation, the copy
           of tower 0's values)
  first    -> 'Done warm up' (the first step: graph optimisation, executors)
  steady   one timed step (between the first and the last step line)
  end      the last step line -> exit (results, FLOP counts, teardown)

Each phase in wall seconds and in CPU seconds of the run's process (user +
system, every thread, from /proc): on a shared machine the CPU figure moves
less with the load. Medians over the rounds; "classic / this" above 1.0
means this harness is faster. Without --classic_python the classic figures
come from the committed reference (results/startup_reference.json, made by
--write_reference on the CPU it names), meaningful only on that CPU. This
harness runs with --peak_tflops_per_device=none (no peak measurement, as the
classic harness has none). --cluster adds a 2-worker run of each manager in
--cluster_variable_updates (parameter_server, distributed_replicated: one ps
task, two workers, one tower each, on 127.0.0.1), timed on worker 0.
No test asserts a time: this script prints them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import socket
import statistics
import subprocess
import sys
import time

from tf_cnn_benchmarks.commands import overhead_vs_classic as overhead
from tf_cnn_benchmarks.platform import checkout
from tf_cnn_benchmarks.platform import json_input

REFERENCE = os.path.join(checkout.ROOT, 'results', 'startup_reference.json')
# (phase, the line that ends it); 'steady' and 'end' are derived.
MARKS = (
  ('import', 'Generating training model'),
  ('build', 'Initializing graph'),
  ('init', 'Running warm up'),
  ('first', 'Done warm up'),
)
PHASES = ('import', 'build', 'init', 'first', 'steady', 'end', 'total')
TOTAL = 'total images/sec'
# The managers a 2-worker run with one ps task times (both harnesses run
# them with the same flags).
CLUSTER_UPDATES = ('parameter_server', 'distributed_replicated')


@dataclasses.dataclass(frozen=True)
class Config:
  """One configuration: its name and the flags both harnesses get."""

  name: str
  flags: tuple
  cluster: bool = False


def configs(args) -> list:
  """The configurations the flags ask for, in order."""
  out = []
  for model in args.models.split(','):
    for update in args.variable_updates.split(','):
      for towers in args.tower_counts:
        out.append(
          Config(
            '%s %s x%d' % (model, update, towers),
            ('--model=%s' % model, '--variable_update=%s' % update,
             '--num_gpus=%d' % towers),
          )
        )  # fmt: skip
  if args.cluster:
    model = args.models.split(',')[0]
    for update in args.cluster_variable_updates.split(','):
      out.append(
        Config(
          '%s %s 2 workers' % (model, update),
          ('--model=%s' % model, '--variable_update=%s' % update,
           '--num_gpus=1'),
          cluster=True,
        )
      )  # fmt: skip
  return out


def _cluster_updates(text: str) -> str:
  names = text.split(',')
  if not names or any(n not in CLUSTER_UPDATES for n in names):
    raise argparse.ArgumentTypeError(
      'a comma-separated list of %s, got %r' % ('/'.join(CLUSTER_UPDATES), text)
    )
  return text


def _tower_counts(text: str) -> tuple:
  try:
    counts = tuple(int(t) for t in text.split(','))
  except ValueError:
    counts = ()
  if not counts or min(counts) < 1:
    raise argparse.ArgumentTypeError(
      'a comma-separated list of tower counts >= 1, got %r' % text
    )
  return counts


def parse_args(argv):
  """The script's options."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--towers', dest='tower_counts', type=_tower_counts,
                      default=(1, 2, 4, 8))  # fmt: skip
  parser.add_argument('--models', default='resnet50')
  parser.add_argument('--variable_updates', default='replicated')
  parser.add_argument('--cluster', action='store_true')
  parser.add_argument(
    '--cluster_variable_updates',
    type=_cluster_updates,
    default='parameter_server',
    help='the managers of the 2-worker runs: %s' % ','.join(CLUSTER_UPDATES),
  )
  parser.add_argument('--classic_python', default=None)
  parser.add_argument('--classic_script', default=None)
  parser.add_argument('--ours_python', default=sys.executable)
  parser.add_argument(
    '--before_dir', default=None, help='a checkout of this harness to measure'
  )
  parser.add_argument('--repeats', type=int, default=2)
  parser.add_argument('--num_batches', type=int, default=4)
  parser.add_argument('--timeout', type=int, default=1800)
  parser.add_argument('--json', default=None, help='write the rows here')
  parser.add_argument('--reference', default=REFERENCE)
  parser.add_argument('--write_reference', default=None)
  args = parser.parse_args(argv)
  if bool(args.classic_python) != bool(args.classic_script):
    parser.error('--classic_python and --classic_script go together')
  if args.write_reference and not args.classic_python:
    parser.error('--write_reference needs the classic harness')
  if args.repeats < 1 or args.num_batches < 1:
    parser.error('--repeats and --num_batches must be >= 1')
  return args


def run_flags(config: Config, args) -> list:
  """The flags of one tiny run of `config`."""
  return [
    '--device=cpu', '--data_format=NHWC', '--batch_size=2',
    '--num_warmup_batches=1', '--num_batches=%d' % args.num_batches,
    '--display_every=1', *config.flags,
  ]  # fmt: skip


def phases_of(stamps: list, exit_at: tuple, num_batches: int) -> dict:
  """{phase: (wall s, CPU s)} from (wall, cpu, line) stamps of one run.

  stamps start at (0, 0) with the process; exit_at is (wall, cpu) when it
  ended. A phase whose closing line never came is missing. A steady step is
  the time between the first and the last timed step line over the steps
  between them (each step prints one, --display_every=1), so what a
  harness does after its steps (results, FLOP counts) is in 'end'.
  """
  del num_batches  # the step lines say how many steps ran
  at = {}
  for wall, cpu, text in stamps:
    for _, mark in MARKS:
      if text.startswith(mark) and mark not in at:
        at[mark] = (wall, cpu)
  out, last = {}, (0.0, 0.0)
  for phase, mark in MARKS:
    if mark not in at:
      return out
    out[phase] = _minus(at[mark], last)
    last = at[mark]
  steps = [
    (wall, cpu)
    for wall, cpu, text in stamps
    if wall >= last[0] and overhead.STEP_LINE.match(text)
  ]
  if len(steps) >= 2:
    span = _minus(steps[-1], steps[0])
    out['steady'] = (span[0] / (len(steps) - 1), span[1] / (len(steps) - 1))
  if steps:
    out['end'] = _minus(exit_at, steps[-1])
  out['total'] = exit_at
  return out


def _minus(a: tuple, b: tuple) -> tuple:
  return (a[0] - b[0], a[1] - b[1])


def run_once(harness: str, config: Config, args) -> dict | None:
  """The phases of one run (None: it failed, its last line shown)."""
  argv, env, cwd = overhead.command(harness, args)
  flags = run_flags(config, args)
  if harness != 'classic':
    flags.append('--peak_tflops_per_device=none')
  env = {**os.environ, **env, 'PYTHONUNBUFFERED': '1'}
  helpers = _cluster_tasks(argv, flags, env, cwd) if config.cluster else []
  if config.cluster:
    flags = flags + helpers[0]
  try:
    return _timed(argv + flags, env, cwd, args)
  finally:
    for proc in helpers[1:]:
      proc.kill()
      proc.wait()


def _timed(argv: list, env: dict, cwd: str, args) -> dict | None:
  start = time.monotonic()
  proc = subprocess.Popen(
    argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT, text=True,
  )  # fmt: skip
  stamps, tail = [], ''
  for text in proc.stdout:
    cpu = overhead.process_cpu_seconds(proc.pid)
    stamps.append((time.monotonic() - start, cpu or 0.0, text.strip()))
    tail = text.strip() or tail
    if time.monotonic() - start > args.timeout:
      proc.kill()
  cpu = overhead.process_cpu_seconds(proc.pid)  # before it is reaped
  proc.wait()
  exit_at = (time.monotonic() - start, cpu or stamps[-1][1] if stamps else 0)
  if proc.returncode:
    print('  run failed (status %s): %s' % (proc.returncode, tail),
          file=sys.stderr, flush=True)  # fmt: skip
    return None
  return phases_of(stamps, exit_at, args.num_batches)


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def _cluster_tasks(argv, flags, env, cwd) -> list:
  """[worker 0's cluster flags, the ps task, worker 1] of a 2-worker run."""
  ps, w0, w1 = ('127.0.0.1:%d' % _free_port() for _ in range(3))
  common = ['--ps_hosts=%s' % ps, '--worker_hosts=%s,%s' % (w0, w1)]
  procs = [common + ['--job_name=worker', '--task_index=0']]
  for role in (['--job_name=ps', '--task_index=0'],
               ['--job_name=worker', '--task_index=1']):  # fmt: skip
    procs.append(
      subprocess.Popen(
        argv + flags + common + role, cwd=cwd, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
      )
    )  # fmt: skip
  return procs


def median_phases(runs: list) -> dict:
  """{phase: (median wall, median CPU)} over the runs that have it."""
  out = {}
  for phase in PHASES:
    got = [r[phase] for r in runs if r and phase in r]
    if got:
      out[phase] = (
        statistics.median(w for w, _ in got),
        statistics.median(c for _, c in got),
      )
  return out


def measure(config: Config, args, reference: dict) -> dict:
  """One configuration, A B A B: both harnesses' median phases."""
  harnesses = ['ours'] + (['classic'] if args.classic_python else [])
  if args.before_dir:
    harnesses.append('before')
  runs = {h: [] for h in harnesses}
  for round_ in range(args.repeats):
    order = harnesses if round_ % 2 == 0 else harnesses[::-1]
    for harness in order:
      print('  %s: %s, round %d' % (config.name, harness, round_ + 1),
            file=sys.stderr, flush=True)  # fmt: skip
      runs[harness].append(run_once(harness, config, args))
  row = {'config': config.name}
  for harness, got in runs.items():
    row[harness] = median_phases(got)
  if 'classic' not in row and config.name in reference:
    row['classic'] = {k: tuple(v) for k, v in reference[config.name].items()}
  return row


def table(rows: list) -> list:
  """The printed table: per config, each phase's wall and CPU seconds."""
  head = '%-34s %-8s' % ('config', 'harness') + ''.join(
    '%15s' % p for p in PHASES
  )
  out = [head, '%-43s' % '' + ''.join('%15s' % 'wall/cpu' for _ in PHASES)]
  for row in rows:
    for harness in ('ours', 'classic', 'before'):
      if harness in row:
        out.append(_row_line(row['config'], harness, row[harness]))
    if 'ours' in row and 'classic' in row:
      out.append(_ratio_line(row['ours'], row['classic']))
  return out


def _row_line(name: str, harness: str, phases: dict) -> str:
  cells = ''.join(
    '%15s' % ('%.1f/%.1f' % phases[p] if p in phases else '-') for p in PHASES
  )
  return '%-34s %-8s%s' % (name, harness, cells)


def _ratio_line(ours: dict, classic: dict) -> str:
  cells = ''
  for p in PHASES:
    if p in ours and p in classic and ours[p][0] > 0 and ours[p][1] > 0:
      cells += '%15s' % (
        '%.2f/%.2f' % (classic[p][0] / ours[p][0], classic[p][1] / ours[p][1])
      )
    else:
      cells += '%15s' % '-'
  return '%-34s %-8s%s' % ('', 'cl/this', cells)


def load_reference(path: str) -> dict:
  """{config name: {phase: (wall, cpu)}} of a reference file ({} if none)."""
  if not os.path.exists(path):
    return {}
  data = json_input.load_file(path, source='--reference=%s' % path)
  if not isinstance(data, dict) or not isinstance(data.get('classic'), dict):
    raise ValueError('--reference=%s: not a file of --write_reference' % path)
  return data['classic']


def main(argv=None) -> int:
  args = parse_args(argv)
  try:
    reference = {} if args.classic_python else load_reference(args.reference)
  except (OSError, ValueError) as e:
    print(str(e).splitlines()[0], file=sys.stderr)
    return 2
  print('# %s' % overhead.cpu_name(), flush=True)
  rows = []
  for config in configs(args):
    rows.append(measure(config, args, reference))
    print('\n'.join(table(rows[-1:])[2:]), flush=True)
  print('\n'.join(table(rows)))
  if args.json:
    with open(args.json, 'w') as f:
      json.dump({'cpu': overhead.cpu_name(), 'rows': rows}, f, indent=1)
  if args.write_reference:
    classic = {r['config']: r['classic'] for r in rows if r.get('classic')}
    with open(args.write_reference, 'w') as f:
      json.dump({'cpu': overhead.cpu_name(), 'classic': classic}, f, indent=1)
  return 0


if __name__ == '__main__':
  sys.exit(main())
