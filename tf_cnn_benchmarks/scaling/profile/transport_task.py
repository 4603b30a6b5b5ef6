"""The processes of the transport profile: `serve` and `measure` tasks.

    python -m tf_cnn_benchmarks.scaling.profile.transport_task \
        serve SPEC JOB TASK
    python -m tf_cnn_benchmarks.scaling.profile.transport_task \
        measure SPEC REQUEST

SPEC is the cluster's JSON ({"ps": [addr], "worker": [addr, addr]}, all on
127.0.0.1). `serve` starts that task's tf.distribute.Server and waits (it
exits when its parent goes). `measure` is worker 0: it starts its server,
measures gRPC passes between ps 0 and itself, collective all-reduces
between worker 0 and worker 1, a step it drives on ps 0 and worker 1 (a
controller's; again with every core kept busy), copies between two logical
CPUs of one process, and the optimizer apply on ps 0, and prints one JSON
line. A request with "transfer_cpu" measures, in a run of its own, the CPU
gRPC and collective messages take from busy cores (transfer_cpu.py).
transport.py starts these processes; every figure crosses a real gRPC
channel between separate processes.
"""

from __future__ import annotations

import json
import os
import sys
import time

import tensorflow as tf

from tf_cnn_benchmarks.cluster import servers
from tf_cnn_benchmarks.platform import json_input
from tf_cnn_benchmarks.scaling.model import profile_format as fmt
from tf_cnn_benchmarks.scaling.profile import busy_cores
from tf_cnn_benchmarks.scaling.profile import transfer_cpu
from tf_cnn_benchmarks.scaling.profile import transport_apply
from tf_cnn_benchmarks.scaling.profile import transport_bench as bench
from tf_cnn_benchmarks.training import optimizers

tf1 = tf.compat.v1


def server(spec: dict, job: str, task: int):
  """Task `job`:`task` of `spec`'s tf.distribute.Server, started."""
  return tf.distribute.Server(
    tf.train.ClusterSpec(spec),
    job_name=job,
    task_index=task,
    protocol='grpc',
    config=servers.server_config(1),
    start=True,
  )


def serve(spec: dict, job: str, task: int) -> None:
  """Runs the task's server until the parent process goes away.

  The main thread polls the parent (Server.join would hold it in C++, deaf
  to the parent's end); transport.py also asks the kernel to kill this
  process with its parent (Linux).
  """
  parent = os.getppid()
  started = server(spec, job, task)
  while os.getppid() == parent:
    time.sleep(0.5)
  del started


def _rows(samples) -> list:
  return [[s.nbytes, s.median_us, s.p10_us, s.p90_us] for s in samples]


def _step_rows(sample) -> list:
  """A controller step's row: its median, p10, p90 and mean."""
  return [_rows([sample])[0] + [sample.mean_us]]


def measure(spec: dict, request: dict) -> dict:
  """Every transport's HopSamples and the ps apply samples, as JSON."""
  task = server(spec, 'worker', 0)
  config = bench.plain_config()
  config.experimental.collective_group_leader = transfer_cpu.LEADER
  ps, workers = transfer_cpu.PS, list(transfer_cpu.WORKERS)
  sizes = request['sizes']
  out = {
    'grpc': _rows(
      bench.measure_pass(task.target, config, [ps, workers[0]], sizes)
    ),
    'collective': _rows(
      bench.measure_collective(task.target, config, workers, sizes)
    ),
  }
  remote = [ps, workers[1]]
  out[fmt.CONTROLLER_STEP] = _step_rows(
    bench.measure_controller_step(task.target, config, remote)
  )
  with busy_cores.busy():  # as when colocated tasks compute meanwhile
    out[fmt.CONTROLLER_STEP_BUSY] = _step_rows(  # wide spread: more runs
      bench.measure_controller_step(task.target, config, remote, reps=300)
    )
  local = bench.plain_config(tf1.ConfigProto(device_count={'CPU': 2}))
  out['local_copy'] = _rows(
    bench.measure_pass('', local, ['/cpu:0', '/cpu:1'], sizes)
  )
  if request.get('apply_shapes'):
    out['ps_apply'] = transport_apply.measure_apply(
      task.target,
      config,
      ps,
      request['apply_shapes'],
      optimizers.OptimizerConfig(**request['optimizer']),
    )
  return out


def measure_cpu(spec: dict, request: dict) -> dict:
  """What gRPC and collective messages take from busy cores (the request's
  sizes and seconds; transfer_cpu.py), as JSON. Its own run of the tasks:
  the collectives here must meet no other graph's instance keys."""
  task = server(spec, 'worker', 0)
  with busy_cores.spinners() as pids:
    rows = transfer_cpu.measure_all(
      task.target,
      pids,
      request['sizes'],
      request['seconds'],
      copies=request.get('copies', (1,)),
      groups=request.get('groups', (2,)),
    )
  return {'transfer_cpu': [r.as_json() for r in rows]}


def main(argv) -> int:
  """The `serve` or `measure` command (see the module docstring)."""
  command = argv[1]
  spec = json_input.loads(argv[2], 'the cluster spec argument')
  if command == 'serve':
    serve(spec, argv[3], int(argv[4]))
    return 0
  request = json_input.loads(argv[3], 'the request argument')
  run = measure_cpu if request.get('transfer_cpu') else measure
  result = run(spec, request)
  print(json.dumps(result), flush=True)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))
