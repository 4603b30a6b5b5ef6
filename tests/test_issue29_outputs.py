"""Issue 29's output defects: the step table's columns as classic printed
them, the results file and the train dir under faults, the cluster's
figures in their own labelled places."""

import io

import pytest

from tests import helpers

pytestmark = pytest.mark.usefixtures('test_models_registered')


def _rows(console: str) -> list:
  """The step table's rows: [step, images/sec, loss, ...] as text fields."""
  lines = console.splitlines()
  start = next(i for i, ln in enumerate(lines) if ln.startswith('Step\t'))
  rows = []
  for line in lines[start + 1 :]:
    if not line[:1].isdigit():
      break
    rows.append(line.split('\t'))
  return rows


def _run(**fields):
  """(result, console text) of an in-process run of the tiny test model."""
  from tf_cnn_benchmarks import benchmark_cnn  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks.config import params as params_lib  # pylint: disable=g-import-not-at-top

  out = io.StringIO()
  p = params_lib.make_params(**dict(helpers.LINEAR_ON_CPU, **fields))
  result = benchmark_cnn.run_benchmark(p, out=out)
  return result, out.getvalue()


def test_forward_only_rows_print_a_zero_loss_and_the_line_the_real_one():
  result, console = _run(
    forward_only=True, num_batches=3, display_every=1, batch_size=4
  )
  rows = _rows(console)
  assert len(rows) == 3
  assert [row[2] for row in rows] == ['0.000'] * 3  # classic's column
  losses = result.to_record()['losses']
  assert len(losses) == 3 + result.num_warmup_steps
  assert all(loss > 0 for loss in losses)  # the real loss, in the line


def test_training_rows_keep_the_real_loss():
  result, console = _run(num_batches=2, display_every=1, batch_size=4)
  shown = [float(row[2]) for row in _rows(console)]
  assert shown == [round(x, 3) for x in result.losses[-2:]]
  assert all(x > 0 for x in shown)
