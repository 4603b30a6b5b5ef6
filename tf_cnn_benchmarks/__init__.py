"""tf_cnn_benchmarks: data-parallel CNN training benchmarks on TensorFlow.

Importing the package sets environment defaults before TensorFlow loads
(an explicit value in the environment always wins):
  * TF_ENABLE_ONEDNN_OPTS=1: oneDNN kernels, which also make NCHW convolutions,
    pooling and batch norm run on the CPU (the Eigen kernels are NHWC-only);
  * TF_CPP_MIN_LOG_LEVEL=2: TensorFlow's C++ info and warning lines stay off
    the console, so stderr carries the benchmark's own messages;
  * TF_XLA_FLAGS gets --tf_xla_cpu_global_jit (added to what is there): CPU
    auto-clustering for --xla (see xla.py); without --xla it does nothing.
"""

import os

os.environ.setdefault('TF_ENABLE_ONEDNN_OPTS', '1')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
if '--tf_xla_cpu_global_jit' not in os.environ.get('TF_XLA_FLAGS', ''):
  os.environ['TF_XLA_FLAGS'] = (
    os.environ.get('TF_XLA_FLAGS', '') + ' --tf_xla_cpu_global_jit'
  ).strip()
