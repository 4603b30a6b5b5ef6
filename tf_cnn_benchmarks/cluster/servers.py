"""This task's `tf.distribute.Server`, and the thread pools it runs with."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping

import tensorflow as tf

from tf_cnn_benchmarks.cluster import spec as spec_lib
from tf_cnn_benchmarks.platform import gpu_runtime
from tf_cnn_benchmarks.platform import quiet

tf1 = tf.compat.v1

# --cluster_threads: size each task's pools for the tasks sharing its host,
# or leave TensorFlow's defaults (every task sized for all the cores).
THREAD_MODES = ('auto', 'tf_default')


@dataclasses.dataclass(frozen=True)
class ThreadPools:
  """A task's intra-op and inter-op pool sizes (0: TensorFlow's default)."""

  intra_op: int = 0
  inter_op: int = 0


# Both pools at TensorFlow's defaults.
TF_DEFAULTS = ThreadPools()


def available_cores() -> int:
  """Cores this process may run on (its affinity mask, as TensorFlow counts)."""
  try:
    return max(1, len(os.sched_getaffinity(0)))
  except (AttributeError, OSError):
    return max(1, os.cpu_count() or 1)


def tasks_on_my_host(cluster: spec_lib.Cluster) -> dict:
  """{job: number of its tasks whose address has this task's host}."""
  host = cluster.address_of(*cluster.me).rpartition(':')[0]
  return {
    job: sum(1 for a in addresses if a.rpartition(':')[0] == host)
    for job, addresses in cluster.spec_dict().items()
  }


def thread_pools(
  cluster: spec_lib.Cluster,
  mode: str = 'auto',
  cores: int | None = None,
  explicit: ThreadPools = TF_DEFAULTS,
) -> ThreadPools:
  """The pool sizes of this task's server.

  TensorFlow sizes every process's pools for all the cores, so N tasks on
  one host run N times as many busy (spinning) threads as cores. With
  mode 'auto', the workers on a host split its cores; a ps or controller
  that shares the host with workers (it applies updates or only drives the
  steps) gets an even share of all the host's tasks. A task alone on its
  host keeps TensorFlow's defaults. Hosts are compared as written in the
  cluster's addresses. `explicit` (--num_intra_threads /
  --num_inter_threads; 0: unset) wins over both modes.
  """
  sized = TF_DEFAULTS
  here = tasks_on_my_host(cluster)
  sharing = sum(here.values())
  if mode == 'auto' and sharing > 1:
    cores = cores or available_cores()
    split = here['worker'] if cluster.job_name == 'worker' else sharing
    share = max(1, cores // split)
    sized = ThreadPools(share, share)
  return ThreadPools(
    explicit.intra_op or sized.intra_op, explicit.inter_op or sized.inter_op
  )


def pools_for(cluster: spec_lib.Cluster, params) -> ThreadPools:
  """thread_pools from a run's Params (--cluster_threads, --num_*_threads)."""
  return thread_pools(
    cluster,
    params.cluster_threads,
    explicit=ThreadPools(
      params.num_intra_threads or 0, params.num_inter_threads
    ),
  )


def server_config(
  num_cpu_devices: int = 1,
  pools: ThreadPools = TF_DEFAULTS,
  runtime_fields: Mapping[str, Any] | None = None,
) -> tf1.ConfigProto:
  """Config the server creates its devices with (CPU towers: logical CPUs).

  The server's devices and its compute pool run every op placed on this
  task, so its pool sizes are the ones that count (a client session's own
  are not used for remote graphs). Likewise the GPU options: the server
  creates the GPU devices, so runtime_fields (dotted field -> value, the
  GPU options of gpu_runtime.config_fields) are set here, last.
  """
  config = tf1.ConfigProto(device_count={'CPU': max(1, num_cpu_devices)})
  config.intra_op_parallelism_threads = pools.intra_op
  config.inter_op_parallelism_threads = pools.inter_op
  config.experimental.collective_group_leader = spec_lib.task_device(
    'worker', 0
  )
  # The server creates the GPU devices: several tasks may share a GPU.
  config.gpu_options.allow_growth = True
  gpu_runtime.set_config_fields(config, runtime_fields or {})
  return config


_HOSTS_FLAG = {
  'ps': 'ps_hosts',
  'worker': 'worker_hosts',
  'controller': 'controller_host',
}


def start_server(
  cluster: spec_lib.Cluster,
  num_cpu_devices: int = 1,
  pools: ThreadPools = TF_DEFAULTS,
  runtime_fields: Mapping[str, Any] | None = None,
):
  """Starts this task's tf.distribute.Server.

  runtime_fields: the run's GPU options (see server_config).

  Raises ClusterError naming the port and its flag when the port is taken
  (TensorFlow's own lines name neither); its C++ log lines are dropped.
  """
  failure = None
  with quiet.captured_stderr_fd():
    try:
      return tf.distribute.Server(
        tf.train.ClusterSpec(cluster.spec_dict()),
        job_name=cluster.job_name,
        task_index=cluster.task_index,
        protocol=cluster.protocol,
        config=server_config(num_cpu_devices, pools, runtime_fields),
        start=True,
      )
    except tf.errors.OpError as e:
      failure = e
  address = cluster.address_of(*cluster.me)
  raise spec_lib.ClusterError(
    '--%s: %s of %s: cannot listen on port %s (%s; in use by another '
    'process?)'
    % (
      _HOSTS_FLAG[cluster.job_name],
      address,
      cluster.task_name,
      address.rpartition(':')[2],
      str(failure.message if hasattr(failure, 'message') else failure)
      .strip()
      .splitlines()[0],
    )
  )
