#!/usr/bin/env python3
"""Peak memory and time of the results readers on a large results file.

  python scripts/bench_readers.py [--lines=100000] [--file=PATH]
      [--repo=DIR] [--memory_limit_mb=M] [--scripts=compare,report,plot]

Writes --lines realistic results lines (schema 2, as the driver and a sweep
write them: every flag in `params`, the full `env`, per-step losses, learning
rates and step times; about 6.5 kB a line) to --file (kept; reused when it
already holds that many lines), then runs compare.py, report.py and plot.py
of the checkout at --repo (default: this one) on it, one at a time, and
prints for each its exit status, wall time and peak resident memory (the
child's own ru_maxrss). --memory_limit_mb caps each run's address space
(RLIMIT_AS), as a small machine would. It prints figures; nothing asserts
them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

from tf_cnn_benchmarks.platform import checkout
from variable_mgr import collective_catalog

REPO_ROOT = checkout.ROOT
SCRIPTS = ('compare', 'report', 'plot')
MODELS = ('resnet20', 'resnet50', 'trivial', 'lenet', 'vgg16')
MANAGERS = ('replicated', 'parameter_server', 'independent', 'hybrid')
STEPS = 50  # timed steps of each line (and 5 warm-up steps)
# The keys of a training line that are the same in every line here.
TRAINING_KEYS = {
  'gradient_accumulation_steps': 1,
  'start_step': 0,
  'end_step': STEPS + 5,
  'evals': None,
  'time_to_accuracy_sec': None,
  'steps_to_accuracy': None,
  'loss_scale': None,
  'skipped_steps': 0,
  'loss_type': 'total_loss',
  'learning_rates': [0.1] * (STEPS + 5),
  'top_1_accuracies': None,
  'top_5_accuracies': None,
}


def parse_args(argv):
  """The script's options."""
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('--lines', type=int, default=100000)
  p.add_argument('--file', help='the results file (default: a temporary one)')
  p.add_argument('--repo', default=REPO_ROOT, help='checkout whose scripts run')
  p.add_argument('--memory_limit_mb', type=int, help='RLIMIT_AS of each run')
  p.add_argument('--scripts', default=','.join(SCRIPTS))
  args = p.parse_args(argv)
  if args.lines < 1:
    p.error('--lines: want a count >= 1')
  unknown = set(args.scripts.split(',')) - set(SCRIPTS)
  if unknown:
    p.error('--scripts: %s: want some of %s' % (sorted(unknown), SCRIPTS))
  return args


def _params(rng, point: dict) -> dict:
  """A `params` block of about 140 flags, like the driver's."""
  params = {
    'flag_%03d' % i: rng.choice((0, 1.5, 'x' * 8, None, True))
    for i in range(130)
  }
  params.update(
    model=point['model'],
    variable_update=point['variable_update'],
    num_gpus=point['num_devices'],
    batch_size=point['batch_size'],
    num_batches=STEPS,
    num_warmup_batches=5,
    all_reduce_spec=None,
    data_name='cifar10',
    device='cpu',
  )
  return params


def _env(point: dict, command_line: str) -> dict:
  """A full `env` block (schema 2) of one made-up host."""
  return {
    'tensorflow': '2.21.0',
    'python': '3.11.7',
    'os': 'Linux-6.1.0-x86_64-with-glibc2.36',
    'hostname': 'bench-host-%d' % point['host'],
    'command_line': command_line,
    'device_kind': 'cpu',
    'cuda_version': None,
    'cudnn_version': None,
    'is_cuda_build': False,
    'is_rocm_build': False,
    'cpu_model': 'Bench CPU 9000',
    'num_cores': 16,
    'cpu_flags': ['avx2', 'avx512f'],
    'memory_total_bytes': 64 * 2**30,
    'gpu_count': 0,
    'gpu_model': None,
    'gpu_compute_capability': None,
    'gpu_driver': None,
    'gpu_memory_mib': None,
    'git_commit': '0123456789abcdef0123456789abcdef01234567',
    'git_dirty': False,
    'null_reasons': {'gpu_model': 'no GPU', 'cuda_version': 'not a CUDA build'},
  }


def _floats(rng, n: int, low: float, high: float) -> list:
  return [rng.uniform(low, high) for _ in range(n)]


def realistic_line(rng, point: dict, repeat: int) -> dict:
  """One results line of `point` (a strict schema-2 line of its sweep)."""
  devices, workers = point['num_devices'], point['num_workers']
  ips = point['speed'] * devices * workers * rng.uniform(0.9, 1.1)
  times = _floats(rng, STEPS, 80.0, 120.0)
  point_id = 'model=%(model)s,num_gpus=%(num_devices)d' % point
  line = {
    'schema_version': 2,
    'status': 'ok',
    'error': None,
    'utc_time': '2026-11-28T12:00:00+00:00',
    'params': _params(rng, point),
    'env': _env(point, 'python -m tf_cnn_benchmarks --%s' % point_id),
    'model': point['model'],
    'data_name': 'cifar10',
    'variable_update': point['variable_update'],
    'all_reduce_spec': None,
    'all_reduce_spec_description': 'copy to the CPU (classic default)',
    'gradient_compression': 'none',
    **dict.fromkeys(('powersgd_rank', *collective_catalog.RESULT_KEYS)),
    'precision': 'float32',
    'num_devices': devices,
    'num_workers': workers,
    'batch_size_per_device': point['batch_size'],
    'global_batch_size': point['batch_size'] * devices * workers,
    'num_steps': STEPS,
    'num_warmup_steps': 5,
    'images_per_sec': ips,
    'images_per_sec_per_device': ips / (devices * workers),
    'step_time_ms': {'mean': 100.0, 'p50': 99.0, 'p90': 115.0},
    'losses': _floats(rng, STEPS + 5, 1.0, 3.0),
    'final_loss': 1.5,
    'flops_per_image': 81_000_000,
    'tflops_per_sec': 0.5,
    'peak_tflops_per_device': None,
    'peak_tflops_origin': None,
    'mfu': None,
    'mode': 'train',
    **dict.fromkeys(('data_dir', 'benchmark_test_id')),
    'step_times_ms': [round(t, 3) for t in times],
    'images_per_sec_spread': {
      'stderr': 1.0,
      'ci95_low': ips * 0.98,
      'ci95_high': ips * 1.02,
      'jitter': 2.0,
    },
    'sweep': {
      'name': 'bench',
      'point': {'model': point['model'], 'num_gpus': str(devices)},
      'point_id': point_id,
      'log': 'logs/%s.log' % point_id,
      'repeat': repeat,
    },
  }
  line.update(TRAINING_KEYS)
  if workers > 1:
    line['images_per_sec_per_worker'] = ips / workers
    line['task'] = {'job_name': 'worker', 'task_index': 0}
    line['worker_losses'] = line['losses']
  return line


def sweep_points(rng) -> list:
  """The sweep's points: every model, manager, count and batch size."""
  points = []
  for model in MODELS:
    speed = rng.uniform(50.0, 2000.0)
    for manager in MANAGERS:
      for devices in (1, 2, 4, 8):
        for workers in (1, 2):
          for batch in (32, 64):
            points.append(
              dict(
                model=model,
                variable_update=manager,
                num_devices=devices,
                num_workers=workers,
                batch_size=batch,
                speed=speed,
                host=len(points) % 4,
              )
            )
  return points


def write_results(path: str, lines: int, seed: int = 58) -> None:
  """Writes `lines` realistic results lines to `path` (the sweep's points
  in turn, each repeat after the last)."""
  rng = random.Random(seed)
  points = sweep_points(rng)
  with open(path, 'w', encoding='utf-8') as f:
    for i in range(lines):
      point = points[i % len(points)]
      record = realistic_line(rng, point, i // len(points))
      f.write(json.dumps(record, sort_keys=True) + '\n')


def _count_lines(path: str) -> int:
  with open(path, 'rb') as f:
    return sum(chunk.count(b'\n') for chunk in iter(lambda: f.read(2**20), b''))


def measure(argv, cwd: str, limit_mb) -> dict:
  """Runs argv; its exit status, wall seconds, peak RSS (MiB) and first
  stderr line."""

  def cap():  # in the child, before it runs argv
    if limit_mb:
      size = limit_mb * 2**20
      resource.setrlimit(resource.RLIMIT_AS, (size, size))

  with tempfile.TemporaryFile() as err:
    start = time.perf_counter()
    proc = subprocess.Popen(
      argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=cap
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err.seek(0)
    first = err.readline().decode('utf-8', 'replace').strip()
    if proc.returncode:
      tail = err.read().decode('utf-8', 'replace').strip().splitlines()
      first = tail[-1] if tail else first  # a traceback's last line
  return {
    'status': proc.returncode,
    'seconds': seconds,
    'peak_mib': usage.ru_maxrss / 1024.0,
    'stderr': first,
  }


def main(argv=None) -> int:
  """Writes (or reuses) the file, runs each reader, prints the figures."""
  args = parse_args(sys.argv[1:] if argv is None else argv)
  tmp = tempfile.mkdtemp(prefix='bench_readers_')
  path = args.file or os.path.join(tmp, 'results.jsonl')
  if not (os.path.exists(path) and _count_lines(path) == args.lines):
    start = time.perf_counter()
    write_results(path, args.lines)
    print(
      'wrote %s: %d lines, %.0f MB in %.1f s'
      % (
        path,
        args.lines,
        os.path.getsize(path) / 1e6,
        time.perf_counter() - start,
      )
    )
  outputs = {
    'compare': [],
    'report': ['--out', os.path.join(tmp, 'report.html')],
    'plot': ['--out', os.path.join(tmp, 'plot.png')],
  }
  print(
    '%-8s %6s %9s %12s  %s'
    % ('script', 'exit', 'seconds', 'peak MiB', 'stderr')
  )
  for name in args.scripts.split(','):
    script = os.path.join(args.repo, 'scripts', name + '.py')
    got = measure(
      [sys.executable, script, path] + outputs[name],
      args.repo,
      args.memory_limit_mb,
    )
    print(
      '%-8s %6d %9.1f %12.0f  %s'
      % (
        name,
        got['status'],
        got['seconds'],
        got['peak_mib'],
        got['stderr'][:100],
      )
    )
  return 0


if __name__ == '__main__':
  sys.exit(main())
