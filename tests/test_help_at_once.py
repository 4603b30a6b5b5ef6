"""--help, --helpfull, flag errors and --list_models print before TensorFlow.

Asked of the process itself (is `tensorflow` in sys.modules when it exits?),
not timed: a loaded machine makes any time bound flaky.
"""

import ast
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_PROBE = """
import runpy, sys
sys.argv = ['tf_cnn_benchmarks'] + %r
status = 0
try:
  runpy.run_module('tf_cnn_benchmarks', run_name='__main__', alter_sys=True)
except SystemExit as e:
  status = e.code
sys.stdout.flush()
sys.stderr.write('\\nPROBE %%s %%s' %% (status, 'tensorflow' in sys.modules))
"""


def _probe(argv):
  """(exit status, stdout, stderr lines, whether TensorFlow was loaded)."""
  proc = subprocess.run(
    [sys.executable, '-c', _PROBE % (argv,)],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  *err, last = proc.stderr.split('\n')
  _, status, loaded = last.split()
  return int(status), proc.stdout, [e for e in err if e], loaded == 'True'


@pytest.mark.parametrize(
  'argv',
  [['--help'], ['--helpfull'], ['-h'], ['--list_models']],
)
def test_help_and_model_names_print_without_tensorflow(argv):
  status, out, err, loaded = _probe(argv)
  assert status == 0, err
  assert out
  assert not loaded


@pytest.mark.parametrize(
  'argv,names',
  [
    (['--no_such_flag=1'], 'no_such_flag'),
    (['--num_gpus=x'], '--num_gpus'),
    (['--use_fp16=maybe'], '--use_fp16'),
  ],
)
def test_flag_errors_are_one_line_without_tensorflow(argv, names):
  status, _, err, loaded = _probe(argv)
  assert status == 2
  assert len(err) == 1 and names in err[0], err
  assert not loaded


def test_booleans_show_as_absl_prints_them():
  for switch in ('--help', '--helpfull'):
    status, out, _, _ = _probe([switch])
    assert status == 0
    lines = out.splitlines()
    at = lines.index(
      '  --[no]forward_only: Time inference (forward pass) '
      'only, no gradients or'
    )
    assert lines[at + 2] == "    (default: 'false')"
    assert any(line.startswith('  --[no]use_fp16: ') for line in lines)
    assert any(line.startswith('  --[no]xla: ') for line in lines)
    assert not any(line.startswith('  --forward_only:') for line in lines)


def test_help_keeps_the_topics():
  _, out, _, _ = _probe(['--help'])
  headings = [
    line for line in out.splitlines() if line.endswith(':') and line[0] != ' '
  ]
  assert headings[:7] == [
    'model and data:',
    'strategy and all-reduce:',
    'precision:',
    'cluster:',
    'checkpoints and evaluation:',
    'observability:',
    'performance knobs:',
  ]


def test_list_models_prints_every_registered_name():
  status, out, _, _ = _probe(['--list_models'])
  assert status == 0
  listed = {
    tuple(cell.strip() for cell in line.strip('|').split('|'))
    for line in out.splitlines()[2:]
  }
  assert listed == set(_registered_models())


def _registered_models():
  """(name, dataset) of every model the families register (a fresh process:
  tests may register models of their own)."""
  proc = subprocess.run(
    [sys.executable, '-c', 'import models; print(models.list_models())'],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr
  return ast.literal_eval(proc.stdout.strip().splitlines()[-1])


def test_help_into_a_closed_pipe_ends_without_a_traceback():
  # `--help | head -1`: the reader is gone before the help is written.
  read_end, write_end = os.pipe()
  os.close(read_end)
  proc = subprocess.run(
    [sys.executable, '-m', 'tf_cnn_benchmarks', '--help'],
    cwd=ROOT,
    stdout=write_end,
    stderr=subprocess.PIPE,
    text=True,
    timeout=300,
  )
  os.close(write_end)
  assert (proc.returncode, proc.stderr) == (141, '')
