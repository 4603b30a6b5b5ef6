"""This task's `tf.distribute.Server`, and the thread pools it runs with."""

from __future__ import annotations

from typing import Any, Mapping

import tensorflow as tf

from tf_cnn_benchmarks.cluster import spec as spec_lib
from tf_cnn_benchmarks.cluster import thread_pools as pools_lib
from tf_cnn_benchmarks.platform import gpu_runtime
from tf_cnn_benchmarks.platform import quiet

tf1 = tf.compat.v1
# The pools' rule lives without TensorFlow (thread_pools.py, the cost model
# reads it); its types are named here too for this module's callers.
ThreadPools = pools_lib.ThreadPools
TF_DEFAULTS = pools_lib.TF_DEFAULTS


def tasks_on_my_host(
  cluster: spec_lib.Cluster, colocated: bool | None = None
) -> dict:
  """{job: number of its tasks sharing this task's cores}: those whose
  address has this task's host, or all of them when `colocated`."""
  host = cluster.address_of(*cluster.me).rpartition(':')[0]
  return pools_lib.tasks_sharing_cores(cluster.spec_dict(), host, colocated)


def thread_pools(
  cluster: spec_lib.Cluster,
  mode: str = 'auto',
  cores: int | None = None,
  explicit: ThreadPools = TF_DEFAULTS,
  colocated: bool | None = None,
) -> ThreadPools:
  """The pool sizes of this task's server: thread_pools.host_pools for
  the tasks whose address names this task's host (hosts are compared as
  written), or for all the cluster's tasks when `colocated`
  (--tasks_colocated). `explicit` (--num_intra_threads /
  --num_inter_threads; 0: unset) wins over both modes.
  """
  sized = pools_lib.host_pools(
    tasks_on_my_host(cluster, colocated), cluster.job_name, mode, cores
  )
  return ThreadPools(
    explicit.intra_op or sized.intra_op, explicit.inter_op or sized.inter_op
  )


def pools_for(cluster: spec_lib.Cluster, params) -> ThreadPools:
  """thread_pools from a run's Params (--cluster_threads, --num_*_threads,
  --tasks_colocated)."""
  return thread_pools(
    cluster,
    params.cluster_threads,
    explicit=ThreadPools(
      params.num_intra_threads or 0, params.num_inter_threads
    ),
    colocated=params.tasks_colocated,
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
