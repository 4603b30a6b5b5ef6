"""This task's `tf.distribute.Server`."""

from __future__ import annotations

import tensorflow as tf

from tf_cnn_benchmarks import quiet
from tf_cnn_benchmarks.cluster import spec as spec_lib

tf1 = tf.compat.v1


def server_config(num_cpu_devices: int = 1) -> tf1.ConfigProto:
  """Config the server creates its devices with (CPU towers: logical CPUs)."""
  config = tf1.ConfigProto(device_count={'CPU': max(1, num_cpu_devices)})
  config.experimental.collective_group_leader = spec_lib.task_device(
    'worker', 0
  )
  # The server creates the GPU devices: several tasks may share a GPU.
  config.gpu_options.allow_growth = True
  return config


_HOSTS_FLAG = {
  'ps': 'ps_hosts',
  'worker': 'worker_hosts',
  'controller': 'controller_host',
}


def start_server(cluster: spec_lib.Cluster, num_cpu_devices: int = 1):
  """Starts this task's tf.distribute.Server.

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
        config=server_config(num_cpu_devices),
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
