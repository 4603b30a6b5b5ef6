#!/usr/bin/env python3
"""This harness against the classic tf_cnn_benchmarks, side by side.

  python scripts/overhead_vs_classic.py [--quick] [--configs=a,b]
      [--classic_python=PY --classic_script=PATH] [--repeats=3]
      [--no_trace] [--json=FILE] [--markdown]
      [--write_reference=FILE]

Runs a fixed set of CPU configurations (CONFIGS; --quick: QUICK) with both
harnesses, alternating A B B A within each round (--repeats rounds), and
prints for each: both images/sec (medians), the median of the per-round
ratios ours / classic, and two figures of how busy each harness keeps the
cores: "op time / step", the sum of the op durations of one traced step over
the step's wall time (an op that runs on both cores through oneDNN's own
threads counts once, so a chain of such ops reads 1.0 with both cores
full), and "CPU busy", the CPU seconds of the harness's process (every
thread) over the wall seconds from its first step line to its total line
(2.0 on two cores: no core ever idle; medians over the rounds). Without
--classic_python the classic figures come from the committed reference
(results/overhead_reference.json, made on the CPU it names by
--write_reference), so the ratios are only meaningful on that CPU; with
it, from runs in the same script, which is the only comparison this
shared-machine project trusts.

The classic harness runs as `PY PATH <flags>` with TF_USE_LEGACY_KERAS=1
(it needs tf_keras); this one as `python -m tf_cnn_benchmarks <flags>` with
the interpreter running this script (--ours_python to change it).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

from tf_cnn_benchmarks.platform import checkout
from tf_cnn_benchmarks.platform import json_input

REPO_ROOT = checkout.ROOT
# A Chrome trace of a few steps is megabytes; a larger file is not read.
MAX_TRACE_BYTES = 512 * 2**20
REFERENCE = os.path.join(REPO_ROOT, 'results', 'overhead_reference.json')
COMMON = (
  '--device=cpu',
  '--data_format=NHWC',
  '--local_parameter_device=cpu',
)
PS = '--variable_update=parameter_server'
TWO_TOWERS = ('--data_name=cifar10', '--num_gpus=2', '--batch_size=32')


@dataclasses.dataclass(frozen=True)
class Config:
  """One row of the table: a model, a batch and a strategy."""

  name: str
  flags: tuple
  num_batches: int = 60


CONFIGS = (
  Config('resnet20_b64', ('--model=resnet20', '--data_name=cifar10',
                          '--batch_size=64', PS)),
  Config('trivial_b32', ('--model=trivial', '--batch_size=32', PS), 400),
  Config('lenet_b64', ('--model=lenet', '--batch_size=64', PS), 200),
  Config('resnet20_2x32_pscpu', ('--model=resnet20', *TWO_TOWERS,
                                 '--variable_update=replicated',
                                 '--all_reduce_spec=pscpu')),
  Config('resnet20_2x32_ps', ('--model=resnet20', *TWO_TOWERS, PS)),
  Config('resnet20_2x32_xring', ('--model=resnet20', *TWO_TOWERS,
                                 '--variable_update=replicated',
                                 '--all_reduce_spec=xring')),
  Config('alexnet_b32', ('--model=alexnet', '--batch_size=32', PS), 20),
  Config('resnet50_b16', ('--model=resnet50', '--batch_size=16', PS), 10),
  # A step's fixed cost: a graph of almost no work, so the harness's own
  # per-step work (fetches, Python) is most of the step.
  Config('trivial_b1_fixed_cost', ('--model=trivial', '--data_name=cifar10',
                                   '--batch_size=1', PS), 3000),
)  # fmt: skip
QUICK = (
  'resnet20_b64',
  'trivial_b32',
  'lenet_b64',
  'resnet20_2x32_pscpu',
  'trivial_b1_fixed_cost',
)
TOTAL_LINE = re.compile(r'^total images/sec: ([0-9.]+)\s*$', re.M)
# A step line of either harness ("10\timages/sec: ..."): the timed loop runs.
STEP_LINE = re.compile(r'^\s*\d+\s+images/sec:')


def parse_args(argv):
  """The script's options."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--configs', default=None, help='names, comma-separated')
  parser.add_argument('--quick', action='store_true', help=' '.join(QUICK))
  parser.add_argument('--classic_python', default=None)
  parser.add_argument('--classic_script', default=None)
  parser.add_argument('--ours_python', default=sys.executable)
  parser.add_argument(
    '--before_dir', default=None,
    help='a checkout of this harness to measure too (its "before")',
  )  # fmt: skip
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--num_warmup_batches', type=int, default=10)
  parser.add_argument(
    '--batches_scale', type=float, default=1.0,
    help="multiplies each configuration's timed steps",
  )  # fmt: skip
  parser.add_argument('--no_trace', action='store_true')
  parser.add_argument('--timeout', type=int, default=900)
  parser.add_argument('--json', default=None, help='write the rows here')
  parser.add_argument('--markdown', action='store_true')
  parser.add_argument('--reference', default=REFERENCE)
  parser.add_argument(
    '--write_reference', default=None,
    help="write the classic figures of this run as the reference file",
  )  # fmt: skip
  args = parser.parse_args(argv)
  if bool(args.classic_python) != bool(args.classic_script):
    parser.error('--classic_python and --classic_script go together')
  if args.write_reference and not args.classic_python:
    parser.error('--write_reference needs the classic harness')
  args.selected = select(args.configs, args.quick, parser.error)
  return args


def select(names, quick: bool, error) -> tuple:
  """The configurations to run, in CONFIGS order."""
  by_name = {c.name: c for c in CONFIGS}
  wanted = names.split(',') if names else QUICK if quick else list(by_name)
  unknown = [n for n in wanted if n not in by_name]
  if unknown:
    error('--configs: unknown %s (known: %s)' % (
      ','.join(unknown), ','.join(by_name)))  # fmt: skip
  return tuple(c for c in CONFIGS if c.name in wanted)


# The /proc/cpuinfo flags that decide which kernels oneDNN runs.
ISA_FLAGS = (
  ('avx2', 'AVX2'),
  ('avx512f', 'AVX-512'),
  ('avx512_bf16', 'AVX512_BF16'),
  ('amx_tile', 'AMX'),
)


def cpu_name(path: str = '/proc/cpuinfo') -> str:
  """This machine's CPU model, its peak ISA flags and its logical CPUs."""
  model, flags = platform.processor() or 'unknown CPU', set()
  try:
    with open(path) as f:
      for line in f:
        key, _, value = line.partition(':')
        if key.strip() == 'model name' and flags == set():
          model = value.strip()
        elif key.strip() == 'flags':
          flags = set(value.split())
          break
  except OSError:
    pass
  isa = [name for flag, name in ISA_FLAGS if flag in flags]
  return '%s (%s), %d logical CPUs' % (
    model, ', '.join(isa) or 'no AVX2', os.cpu_count() or 0)  # fmt: skip


def run_flags(config: Config, args, trace_file: str | None = None) -> list:
  """The flags both harnesses get for `config` (one traced step or timed)."""
  if trace_file:
    steps = ['--num_batches=2', '--trace_file=%s' % trace_file]
  else:
    steps = ['--num_batches=%d' % max(
      2, round(config.num_batches * args.batches_scale))]  # fmt: skip
  warmup = '--num_warmup_batches=%d' % args.num_warmup_batches
  return [*COMMON, *config.flags, warmup, *steps]


def command(harness: str, args) -> tuple:
  """(argv prefix, extra environment, cwd) of a harness."""
  if harness == 'classic':
    cwd = os.path.dirname(os.path.abspath(args.classic_script))
    return [args.classic_python, args.classic_script], {
      'TF_USE_LEGACY_KERAS': '1'
    }, cwd  # fmt: skip
  root = args.before_dir if harness == 'before' else REPO_ROOT
  return [args.ours_python, '-m', 'tf_cnn_benchmarks'], {}, root


def process_cpu_seconds(pid: int) -> float | None:
  """CPU time (user + system, every thread) process `pid` has used."""
  try:
    with open('/proc/%d/stat' % pid) as f:
      fields = f.read().rpartition(')')[2].split()
  except OSError:
    return None
  # Fields 14 and 15 of proc(5), counted from the state (field 3) here.
  return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


@dataclasses.dataclass(frozen=True)
class Run:
  """One run: its images/sec, and the cores its process kept busy from its
  first step line to its total line (CPU seconds / wall seconds)."""

  images_per_sec: float
  cpu_busy: float | None = None


def run_once(harness: str, flags: list, args) -> Run | None:
  """One run (None: it failed; its last stderr line shown)."""
  argv, env, cwd = command(harness, args)
  env = {**os.environ, **env, 'PYTHONUNBUFFERED': '1'}
  with tempfile.TemporaryFile('w+') as err:
    proc = subprocess.Popen(
      argv + flags, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=err,
      text=True,
    )  # fmt: skip
    try:
      out, busy = _read_timed(proc, args.timeout)
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.wait()
      out, busy = '', None
    err.seek(0)
    stderr = err.read()
  found = TOTAL_LINE.findall(out)
  if proc.returncode or not found:
    tail = (stderr.strip().splitlines() or ['(no stderr)'])[-1]
    print('  %s failed (status %s): %s' % (harness, proc.returncode, tail),
          file=sys.stderr, flush=True)  # fmt: skip
    return None
  return Run(float(found[-1]), busy)


def _read_timed(proc, timeout: float) -> tuple:
  """(its stdout, CPU seconds / wall seconds between its first step line
  and its total line, or None); waits for the process to end."""
  deadline = time.monotonic() + timeout
  lines, first, busy = [], None, None
  for text in proc.stdout:
    lines.append(text)
    now, cpu = time.monotonic(), process_cpu_seconds(proc.pid)
    if first is None and STEP_LINE.match(text) and cpu is not None:
      first = (now, cpu)
    elif first and TOTAL_LINE.match(text.rstrip('\n')) and cpu is not None:
      busy = round((cpu - first[1]) / max(now - first[0], 1e-9), 3)
    if now > deadline:
      raise subprocess.TimeoutExpired(proc.args, timeout)
  proc.wait(timeout=max(deadline - time.monotonic(), 1))
  return ''.join(lines), busy


def _speed(run) -> float | None:
  """images/sec of a run (a Run, a bare figure, or None)."""
  return run.images_per_sec if isinstance(run, Run) else run


def _cpu(run) -> float | None:
  return run.cpu_busy if isinstance(run, Run) else None


def cores_busy(trace_path: str) -> dict | None:
  """Sum of op time, step time and their ratio in a Chrome trace file.

  Only the compute timelines count (the '... Compute' processes of every
  device); the step runs from the first op's start to the last op's end.
  """
  try:
    data = json_input.load_file(trace_path, max_bytes=MAX_TRACE_BYTES)
  except (OSError, ValueError):
    return None
  events = data['traceEvents'] if isinstance(data, dict) else data
  names = {
    e['pid']: e.get('args', {}).get('name', '')
    for e in events
    if e.get('ph') == 'M' and e.get('name') == 'process_name'
  }
  ops = [
    e for e in events
    if e.get('ph') == 'X' and names.get(e.get('pid'), '').endswith('Compute')
  ]  # fmt: skip
  if not ops:
    return None
  start = min(e['ts'] for e in ops)
  end = max(e['ts'] + e.get('dur', 0) for e in ops)
  total = sum(e.get('dur', 0) for e in ops)
  span = max(end - start, 1)
  return {
    'op_ms': round(total / 1e3, 2),
    'step_ms': round(span / 1e3, 2),
    'cores_busy': round(total / span, 3),
  }


def traced(harness: str, config: Config, args, tmp: str) -> dict | None:
  """cores_busy() of one traced step of `harness` on `config`."""
  path = os.path.join(tmp, '%s_%s.json' % (harness, config.name))
  if _speed(run_once(harness, run_flags(config, args, path), args)) is None:
    return None
  return cores_busy(path)


def median_ratio(ours: list, classic: list) -> float | None:
  """Median of the per-round ratios ours / classic (rounds where both ran)."""
  pairs = [o / c for o, c in zip(ours, classic) if o and c]
  return round(statistics.median(pairs), 3) if pairs else None


def median(values: list) -> float | None:
  """Median of the values that are not None."""
  got = [v for v in values if v]
  return round(statistics.median(got), 2) if got else None


def measure(config: Config, args, reference: dict, tmp: str) -> dict:
  """One configuration's row: A B B A rounds, then one traced step each."""
  live = bool(args.classic_python)
  harnesses = ['classic'] if live else []
  harnesses += ['before'] if args.before_dir else []
  harnesses.append('ours')
  runs = {h: [] for h in ('ours', 'classic', *harnesses)}
  cpu = {h: [] for h in harnesses}
  for r in range(args.repeats):
    # A B B A: each harness runs as often early as late in a round pair.
    for harness in harnesses if r % 2 == 0 else harnesses[::-1]:
      run = run_once(harness, run_flags(config, args), args)
      runs[harness].append(_speed(run))
      cpu[harness].append(_cpu(run))
  row = {'config': config.name, 'flags': list(config.flags)}
  row['cpu_busy'] = {h: median(v) for h, v in cpu.items() if median(v)}
  ref = reference.get(config.name, {})
  if live:
    row['classic'] = median(runs['classic'])
    row['ratio'] = median_ratio(runs['ours'], runs['classic'])
  else:
    row['classic'] = ref.get('classic')
    row['ratio'] = (
      round(median(runs['ours']) / row['classic'], 3)
      if row['classic'] and median(runs['ours']) else None
    )  # fmt: skip
  row['ours'] = median(runs['ours'])
  if args.before_dir:
    row['before'] = median(runs['before'])
    row['ratio_before'] = (
      median_ratio(runs['before'], runs['classic']) if live
      else round(row['before'] / row['classic'], 3)
      if row['before'] and row['classic'] else None
    )  # fmt: skip
    row['after_vs_before'] = median_ratio(runs['ours'], runs['before'])
  row['runs'] = runs
  if not args.no_trace:
    row['ours_trace'] = traced('ours', config, args, tmp)
    row['classic_trace'] = (
      traced('classic', config, args, tmp) if live
      else ref.get('classic_trace')
    )  # fmt: skip
  return row


def _busy(trace) -> str:
  return '%.2f' % trace['cores_busy'] if trace else '-'


def line(row: dict) -> str:
  """One printed line of a row."""

  def num(v):
    return '%.1f' % v if v else '-'

  cpu = row.get('cpu_busy', {})
  text = ('%-22s ours %8s  classic %8s  ratio %6s  op/step ours %s classic %s'
          '  cpu ours %s classic %s') % (
    row['config'], num(row['ours']), num(row['classic']),
    row['ratio'] or '-',
    _busy(row.get('ours_trace')), _busy(row.get('classic_trace')),
    cpu.get('ours', '-'), cpu.get('classic', '-'),
  )  # fmt: skip
  if 'before' in row:
    text += '  | before %s ratio %s, after/before %s' % (
      num(row['before']), row['ratio_before'] or '-',
      row['after_vs_before'] or '-')  # fmt: skip
  return text


def markdown(rows: list) -> list:
  """The rows as a Markdown table."""
  before = any('before' in r for r in rows)
  head = '| config | ours img/s | classic img/s | ours / classic |'
  rule = '|---|---:|---:|---:|'
  if before:
    head += ' before / classic | after / before |'
    rule += '---:|---:|'
  head += ' op time / step ours | classic | CPU busy ours | classic |'
  out = [head, rule + '---:|---:|---:|---:|']
  for r in rows:
    cells = [r['config'], r['ours'], r['classic'], r['ratio']]
    if before:
      cells += [r.get('ratio_before'), r.get('after_vs_before')]
    cells += [_busy(r.get('ours_trace')), _busy(r.get('classic_trace'))]
    cpu = r.get('cpu_busy', {})
    cells += [cpu.get('ours'), cpu.get('classic')]
    out.append('| %s |' % ' | '.join(str(c or '-') for c in cells))
  return out


def load_reference(path: str) -> tuple:
  """(the reference's rows by config name, its CPU) or ({}, None)."""
  try:
    data = json_input.load_file(path)
  except (OSError, ValueError):
    return {}, None
  return {r['config']: r for r in data.get('rows', [])}, data.get('cpu')


def write_json(path: str, header: dict, rows: list) -> None:
  """The run's header and rows as one JSON document."""
  with open(path, 'w') as f:
    json.dump({**header, 'rows': rows}, f, indent=1)
    f.write('\n')


def main(argv=None) -> int:
  args = parse_args(sys.argv[1:] if argv is None else argv)
  reference, ref_cpu = ({}, None)
  if not args.classic_python:
    reference, ref_cpu = load_reference(args.reference)
    if not reference:
      print('error: no classic harness given and no reference at %s'
            % args.reference, file=sys.stderr)  # fmt: skip
      return 2
  header = {
    'cpu': cpu_name(),
    'date': datetime.datetime.now(datetime.timezone.utc).isoformat(
      timespec='minutes'),
    'classic': 'live' if args.classic_python else 'reference (%s)' % ref_cpu,
    'load_average_start': [round(x, 2) for x in os.getloadavg()],
    'repeats': args.repeats,
  }  # fmt: skip
  print('CPU: %s; classic: %s; load average %s' % (
    header['cpu'], header['classic'], header['load_average_start']),
    flush=True)  # fmt: skip
  if ref_cpu and ref_cpu != header['cpu']:
    print('warning: the reference was measured on %s' % ref_cpu,
          file=sys.stderr)  # fmt: skip
  rows = []
  with tempfile.TemporaryDirectory(prefix='overhead_') as tmp:
    for config in args.selected:
      rows.append(measure(config, args, reference, tmp))
      print(line(rows[-1]), flush=True)
  header['load_average_end'] = [round(x, 2) for x in os.getloadavg()]
  print('load average at the end: %s' % header['load_average_end'])
  if args.markdown:
    print('\n'.join(markdown(rows)))
  if args.json:
    write_json(args.json, header, rows)
  if args.write_reference:
    ref_rows = [
      {
        'config': r['config'],
        'classic': r['classic'],
        'classic_trace': r.get('classic_trace'),
      }
      for r in rows
    ]
    write_json(args.write_reference, header, ref_rows)  # fmt: skip
  return 0


if __name__ == '__main__':
  sys.exit(main())
