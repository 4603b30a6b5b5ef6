"""The product suite's set-up and shared fixtures (tests/conftest.py):
TensorFlow in graph mode, quiet logs, a private peak cache."""

from tests.conftest import *  # noqa: F401,F403
