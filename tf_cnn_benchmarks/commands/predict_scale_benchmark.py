#!/usr/bin/env python3
"""Time and peak memory of predicting every strategy against cluster size.

  python scripts/predict_scale_benchmark.py [--profile=FILE]
      [--gpus=8,64,128,512,1024] [--gpus_per_host=8]

For each cluster size, a child process pinned to one core predicts every
strategy the hardware model has (replicated on one host; the cluster
managers and horovod on more, ps tasks one per worker host) with its band,
as predict_scaling does, and the parent prints the child's wall time and
peak resident memory (its own ru_maxrss, interpreter included). It prints
figures; nothing asserts them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from tf_cnn_benchmarks.platform import checkout
from tf_cnn_benchmarks.platform import json_input

DEFAULT_PROFILE = os.path.join(
  checkout.ROOT, 'tests', 'data', 'profile_resnet101_p100_synthetic.json'
)
ONE_HOST = ('replicated', 'parameter_server', 'horovod')
CLUSTER = (
  'parameter_server',
  'distributed_replicated',
  'distributed_all_reduce',
  'collective_all_reduce',
  'hybrid',
  'horovod',
)


def parse_args(argv):
  """The script's options."""
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('--profile', default=DEFAULT_PROFILE)
  p.add_argument('--gpus', default='8,64,128,512,1024')
  p.add_argument('--gpus_per_host', type=int, default=8)
  p.add_argument('--child', type=int, help=argparse.SUPPRESS)
  return p.parse_args(argv)


def predict_all(profile_path, gpus, gpus_per_host) -> dict:
  """Every strategy on one cluster size: {name: images/sec}, and seconds."""
  # Imported here: the parent process measures children only.
  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks.commands import predict_hardware
  from tf_cnn_benchmarks.scaling.model import cost_model
  from tf_cnn_benchmarks.scaling.model import hardware as hw_lib
  from tf_cnn_benchmarks.scaling.model import profile_format

  start = time.perf_counter()
  profile = profile_format.load_profile(profile_path)
  hosts = max(1, gpus // gpus_per_host)
  names = ONE_HOST if hosts == 1 else CLUSTER
  out = {}
  for name in names:
    ps = hosts if name in ('parameter_server', 'distributed_replicated') else 0
    if hosts == 1:
      ps = 0
    hw = hw_lib.make_hardware(
      num_workers=hosts,
      gpus_per_host=min(gpus, gpus_per_host),
      num_ps=ps,
      link_mbits=100000.0,
      network='rdma',
      intra='nvlink2',
    )
    spec = 'nccl/xring' if name == 'distributed_all_reduce' else None
    p = predict_hardware.predict(profile, hw, cost_model.Strategy(name, spec))
    out[name] = round(p.images_per_sec, 1)
  return {'seconds': time.perf_counter() - start, 'images_per_sec': out}


def _child(args) -> int:
  if hasattr(os, 'sched_setaffinity'):
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
  print(json.dumps(predict_all(args.profile, args.child, args.gpus_per_host)))
  return 0


def _measure(args, gpus) -> tuple:
  """(wall s, predict s, peak MB, result) of one child."""
  cmd = [
    sys.executable,
    '-m',
    'tf_cnn_benchmarks.commands.predict_scale_benchmark',
    '--child=%d' % gpus,
    '--profile=%s' % args.profile,
    '--gpus_per_host=%d' % args.gpus_per_host,
  ]
  start = time.perf_counter()
  child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
  text = child.stdout.read()
  _, status, usage = os.wait4(child.pid, 0)
  child.returncode = os.waitstatus_to_exitcode(status)
  wall = time.perf_counter() - start
  if child.returncode != 0:
    raise RuntimeError('the child for %d GPUs failed' % gpus)
  result = json_input.loads(
    text.strip().splitlines()[-1], 'the child for %d GPUs' % gpus
  )
  return wall, result['seconds'], usage.ru_maxrss / 1024.0, result


def main(argv=None) -> int:
  """Prints one line per cluster size."""
  args = parse_args(sys.argv[1:] if argv is None else argv)
  if args.child:
    return _child(args)
  try:
    sizes = [int(x) for x in args.gpus.split(',')]
  except ValueError:
    sizes = []
  if not sizes or min(sizes) < 1:
    print(
      'predict_scale_benchmark.py: error: --gpus=%s: want integers >= 1'
      % args.gpus,
      file=sys.stderr,
    )
    return 2
  print(
    '%6s %6s %10s %12s %10s  %s'
    % ('GPUs', 'hosts', 'wall s', 'predict s', 'peak MB', 'strategies')
  )
  for gpus in sizes:
    wall, predict_s, peak, result = _measure(args, gpus)
    print(
      '%6d %6d %10.2f %12.3f %10.1f  %d (%s)'
      % (
        gpus,
        max(1, gpus // args.gpus_per_host),
        wall,
        predict_s,
        peak,
        len(result['images_per_sec']),
        ', '.join(result['images_per_sec']),
      ),
      flush=True,
    )
  return 0


if __name__ == '__main__':
  sys.exit(main())
