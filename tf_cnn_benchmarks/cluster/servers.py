"""This task's `tf.distribute.Server`."""

from __future__ import annotations

import tensorflow as tf

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


def start_server(cluster: spec_lib.Cluster, num_cpu_devices: int = 1):
  """Starts this task's tf.distribute.Server."""
  return tf.distribute.Server(
    tf.train.ClusterSpec(cluster.spec_dict()),
    job_name=cluster.job_name,
    task_index=cluster.task_index,
    protocol=cluster.protocol,
    config=server_config(num_cpu_devices),
    start=True,
  )
