"""tf_cnn_benchmarks: data-parallel CNN training benchmarks on TensorFlow.

Importing the package sets two environment defaults before TensorFlow loads
(an explicit value in the environment always wins):
  * TF_ENABLE_ONEDNN_OPTS=1: oneDNN kernels, which also make NCHW convolutions,
    pooling and batch norm run on the CPU (the Eigen kernels are NHWC-only);
  * TF_CPP_MIN_LOG_LEVEL=2: TensorFlow's C++ info and warning lines stay off
    the console, so stderr carries the benchmark's own messages.
"""

import os

os.environ.setdefault('TF_ENABLE_ONEDNN_OPTS', '1')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
