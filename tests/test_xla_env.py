"""A malformed TF_XLA_FLAGS is one line and status 2 (issue 29, item 9).

TensorFlow aborts the process at its first device on a value it cannot
parse, and the entry point's capture of fd 2 left nothing on the console.
"""

import pytest

from tests import helpers
from tf_cnn_benchmarks.platform import xla_env


@pytest.mark.parametrize(
  'value,needle',
  [
    ('garbage', "'garbage' is not a --name"),  # TF reads it as a file
    ('--nosuchflag', 'Unknown flag in TF_XLA_FLAGS: --nosuchflag'),
  ],
)
def test_malformed_tf_xla_flags_is_one_line_status_2(value, needle):
  proc = helpers.run_benchmark(
    '--model=trivial',
    '--device=cpu',
    '--num_batches=1',
    env=helpers.task_env() | {'TF_XLA_FLAGS': value},
    timeout=600,
  )
  assert proc.returncode == 2, proc.stderr
  lines = [ln for ln in proc.stderr.splitlines() if 'TF_XLA_FLAGS' in ln]
  assert len(lines) == 1 and needle in lines[0], proc.stderr


def test_syntax_of_tf_xla_flags():
  assert xla_env.syntax_problem('') is None
  assert xla_env.syntax_problem('--a --b_c=1  --d=x=y') is None
  assert 'not a --name' in xla_env.syntax_problem('--a -b')
  assert 'not a --name' in xla_env.syntax_problem('--')


def test_the_package_default_alone_is_not_probed(monkeypatch):
  def no_probe(env):
    raise AssertionError('probed')

  monkeypatch.setattr(xla_env, 'probe_problem', no_probe)
  env = {'TF_XLA_FLAGS': xla_env.DEFAULT_FLAG}
  assert xla_env.problem(env) is None
