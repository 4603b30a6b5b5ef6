"""Test set-up: repo root on sys.path, TensorFlow in graph mode, quiet logs;
the fixtures more than one test file uses."""

import os
import sys
import tempfile

import pytest

os.environ.setdefault('TF_ENABLE_ONEDNN_OPTS', '1')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
# The MFU peak is measured once per test session (and its subprocesses), not
# read from or written to the user's cache.
os.environ.setdefault(
  'TF_CNN_BENCHMARKS_CACHE_DIR', tempfile.mkdtemp(prefix='tf_cnn_cache_')
)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

# The package's environment defaults (oneDNN, log level, TF_XLA_FLAGS) must be
# in place before TensorFlow parses them: XLA's flags are read once per
# process, the first time any device is created, so a test module that lists
# devices before importing the package would silently turn --xla off.
import tf_cnn_benchmarks  # noqa: E402,F401,I001  # isort: skip
import tensorflow as tf  # pylint: disable=g-import-not-at-top  # noqa: E402

tf.compat.v1.disable_eager_execution()
tf.get_logger().setLevel('ERROR')


@pytest.fixture(scope='module')
def stream_imagenet_dir(tmp_path_factory):
  """The fake ImageNet of the input stream tests (tests.helpers)."""
  from tests import helpers  # pylint: disable=g-import-not-at-top

  return helpers.streams_imagenet(tmp_path_factory)


@pytest.fixture(scope='module')
def stream_cifar(tmp_path_factory):
  """(directory, written arrays) of the stream tests' fake CIFAR-10."""
  from tests import helpers  # pylint: disable=g-import-not-at-top

  return helpers.streams_cifar10(tmp_path_factory)


@pytest.fixture
def test_models_registered():
  """The models of tests/testing_models.py, registered in this process."""
  from tests import testing_models  # pylint: disable=g-import-not-at-top

  testing_models.ensure_registered()
