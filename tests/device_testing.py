"""Helpers shared by the all-reduce tests: logical CPU devices and sessions."""

import tensorflow as tf

tf1 = tf.compat.v1


def session_config(num_cpus):
  """num_cpus logical CPUs; grappler off: the graph runs as built (fast)."""
  config = tf1.ConfigProto(device_count={'CPU': num_cpus})
  config.graph_options.rewrite_options.disable_meta_optimizer = True
  return config


def cpu_devices(n):
  """'/cpu:0' .. '/cpu:n-1'."""
  return [f'/cpu:{i}' for i in range(n)]


def same_device(a, b):
  """Whether two device strings name the same device."""
  return (
    tf.DeviceSpec.from_string(a).to_string()
    == tf.DeviceSpec.from_string(b).to_string()
  )
