"""How a CPU host's throughput grows with towers computing at once.

k towers on one CPU host (k colocated worker tasks, or k logical CPU
devices) do not get k times one tower's work done, nor what the tower's
busy cores (compute.cores_busy) suggest: parallel kernels whose threads
are time-sliced wait for each other, and the copies share caches and
memory. On this repository's 2-core machine one resnet20 tower alone kept
1.46 cores busy, yet two or three at once did only 0.98-1.10x its
images/sec.
So the profile measures it: k copies of the local benchmark at once, each
with the thread pools a worker gets on a host shared by k workers (the
rule of cluster/thread_pools.host_pools), against one copy alone with
TensorFlow's default pools (a task alone on its host), in rounds (see
measure_speedups). speedup(k) = the copies' images/sec summed / the one
copy's. The cost model turns it into
what each of k towers asks of the host (cost_model_graph.StepBuilder.
tower_cores).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from typing import Callable, Dict, Sequence

from tf_cnn_benchmarks.cluster import thread_pools
from tf_cnn_benchmarks.platform import checkout
from tf_cnn_benchmarks.reporting import result_lines

DEFAULT_COPIES = (2, 3)
# Rounds of alone / k at once (their median is the figure).
DEFAULT_ROUNDS = 3
WARMUP_STEPS = 5


class ConcurrentProfileError(RuntimeError):
  """A copy failed or wrote no result (one line: which and why)."""


def copy_argv(flags: Dict[str, object], k: int, cores: int, num_steps: int):
  """The benchmark command of one of `k` copies (without --result_file).

  flags: the profile's benchmark flags (model, data_name, batch_size, ...).
  """
  argv = [sys.executable, '-m', 'tf_cnn_benchmarks']
  fixed = {
    'device': 'cpu',
    'num_gpus': 1,
    'variable_update': 'parameter_server',
    'num_batches': num_steps,
    'num_warmup_batches': WARMUP_STEPS,
    'display_every': 1000,
    'peak_tflops_per_device': 'none',
  }
  for name, value in dict(flags, **fixed).items():
    if value is not None:
      argv.append('--%s=%s' % (name, value))
  if k > 1:  # a worker sharing its host with k-1 others
    pools = thread_pools.host_pools({'worker': k}, 'worker', 'auto', cores)
    argv += ['--num_intra_threads=%d' % pools.intra_op]
    argv += ['--num_inter_threads=%d' % pools.inter_op]
  return argv


def run_copies(argvs: Sequence[list], timeout: float) -> list:
  """Runs every command at once; each one's images/sec, in order."""
  with tempfile.TemporaryDirectory() as tmp:
    paths = [os.path.join(tmp, 'copy%d.jsonl' % i) for i in range(len(argvs))]
    procs = [
      subprocess.Popen(
        list(argv) + ['--result_file=' + path],
        cwd=checkout.ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
      )
      for argv, path in zip(argvs, paths)
    ]
    errors = [p.communicate(timeout=timeout)[1] for p in procs]
    out = []
    for proc, path, err in zip(procs, paths, errors):
      if proc.returncode or not os.path.exists(path):
        tail = (err or '').strip().splitlines()[-1:] or ['no output']
        raise ConcurrentProfileError(
          'a concurrent copy exited %d: %s' % (proc.returncode, tail[0])
        )
      out.append(
        float(result_lines.read_json_lines(path)[0][1]['images_per_sec'])
      )
    return out


def measure_speedups(
  flags: Dict[str, object],
  cores: int,
  copies: Sequence[int] = DEFAULT_COPIES,
  num_steps: int = 20,
  timeout: float = 900.0,
  runner: Callable[[Sequence[list], float], list] = run_copies,
  rounds: int = DEFAULT_ROUNDS,
) -> tuple:
  """((k, speedup(k)) for k in `copies`), each against one copy alone.

  `rounds` rounds of: one copy alone, then k copies at once for each k; one
  copy alone again at the end. A round's speedup(k) is its k copies' summed
  images/sec over the mean of the lone copies just before and after it (a
  short run's images/sec drifts by several percent over minutes); the
  figure is the median over the rounds.
  """
  ks = sorted({int(k) for k in copies if int(k) >= 2})
  if not ks:
    return ()
  single = [copy_argv(flags, 1, cores, num_steps)]
  alone = [runner(single, timeout)[0]]
  together = []
  for _ in range(max(1, rounds)):
    together.append(
      {
        k: sum(runner([copy_argv(flags, k, cores, num_steps)] * k, timeout))
        for k in ks
      }
    )
    alone.append(runner(single, timeout)[0])
  out = []
  for k in ks:
    ratios = [
      got[k] / ((alone[r] + alone[r + 1]) / 2) for r, got in enumerate(together)
    ]
    out.append((k, round(statistics.median(ratios), 4)))
  return tuple(out)
