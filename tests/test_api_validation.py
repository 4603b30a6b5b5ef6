"""The Python API validates Params as the command line does (issue 29, 10).

Params changed after setup() are checked again at BenchmarkCNN(params), and
a value of the wrong type is refused with a line naming the flag.
"""

import pytest

from tf_cnn_benchmarks import __main__ as entry
from tf_cnn_benchmarks import benchmark_cnn
from tf_cnn_benchmarks.config import params as params_lib


@pytest.fixture(scope='module')
def resolved():
  """Params as a classic caller holds them after setup()."""
  return benchmark_cnn.setup(
    benchmark_cnn.make_params(
      model='trivial',
      device='cpu',
      batch_size=2,
      num_batches=2,
      num_warmup_batches=0,
    )
  )


def refusal(params) -> str:
  with pytest.raises(params_lib.ParamsError) as info:
    benchmark_cnn.BenchmarkCNN(params)
  return str(info.value)


def test_negative_num_batches_after_setup_is_refused(resolved):
  message = refusal(resolved._replace(num_batches=-5))
  assert message == '--num_batches=-5: must be >= 1 (or auto)'


def test_too_many_towers_after_setup_is_refused(resolved):
  message = refusal(resolved._replace(num_gpus=5000))
  assert message == '--num_gpus=5000: must be in 1..1024'


def test_a_string_for_a_bool_is_refused(resolved):
  message = refusal(resolved._replace(use_fp16='False'))
  assert message.startswith("--use_fp16='False': must be True or False")
  assert 'not str' in message


@pytest.mark.parametrize(
  'name, value, allowed',
  [
    ('batch_size', 32.0, 'a whole number (int)'),
    ('num_gpus', '2', 'a whole number (int)'),
    ('init_learning_rate', '0.1', 'a number (float) or None'),
    ('model', 3, 'a string (str)'),
    ('forward_only', 1, 'True or False (bool)'),
  ],
)
def test_wrong_types_are_refused_naming_flag_and_type(
  resolved, name, value, allowed
):
  message = refusal(resolved._replace(**{name: value}))
  assert message.startswith('--%s=%r: must be %s' % (name, value, allowed))


def test_setup_refuses_wrong_types_too():
  with pytest.raises(params_lib.ParamsError, match='--use_bf16='):
    benchmark_cnn.setup(benchmark_cnn.make_params(use_bf16='yes'))


def test_numbers_of_a_wider_kind_are_accepted(resolved):
  # An int where a float is declared is a number too (lr=1).
  plan = params_lib.as_plan(resolved._replace(init_learning_rate=1))
  assert plan.params.init_learning_rate == 1


def test_unchanged_resolved_params_still_run(resolved):
  stats = benchmark_cnn.BenchmarkCNN(resolved).run()
  assert stats['num_steps'] == 2


@pytest.mark.parametrize(
  'changes, flag',
  [
    ({'num_batches': -5}, '--num_batches=-5'),
    ({'num_gpus': 5000}, '--num_gpus=5000'),
    ({'momentum': -1.0}, '--momentum=-1.0'),
    ({'display_every': 0}, '--display_every=0'),
  ],
)
def test_api_and_command_line_give_the_same_message(
  resolved, capsys, changes, flag
):
  api_message = refusal(resolved._replace(**changes))
  status = entry.main(
    ['tf_cnn_benchmarks', '--model=trivial', '--device=cpu', flag]
  )
  assert status == 2
  assert capsys.readouterr().err.strip() == 'error: %s' % api_message
