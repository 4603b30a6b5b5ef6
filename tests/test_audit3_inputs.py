"""Values that meant something else, and errors that named the wrong flag.

Issue 58: --timeout=nan was no limit; --link_mbits=1e300 reached tc; a
profile of another model ranked the strategies for that model with only a
warning; a torn training_done.json was ignored until the evaluator's
timeout; compare.py --plot named --out; the scripts' output files failed
after the work, with a bare [Errno 2].
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.helpers import AUTO_PROFILE
from tests.helpers import AUTO_RESNET20
from tests.helpers import ROOT
from tests.helpers import TRIVIAL_FLAGS
from tests.helpers import cli_status
from tests.helpers import run_script
from tests.helpers import task_env
from tf_cnn_benchmarks.scaling.auto import auto

RESULTS = os.path.join(ROOT, 'tests', 'fixtures', 'baseline.jsonl')
AUTO_TRIVIAL = [
  *TRIVIAL_FLAGS,
  '--num_batches=1',
  '--variable_update=auto',
  '--scaling_profile=' + AUTO_PROFILE,  # resnet20's
]


def _one_line(proc) -> str:
  lines = [ln for ln in proc.stderr.splitlines() if ln]
  assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
  assert len(lines) == 1, lines
  return lines[0]


# ---- the local launcher ------------------------------------------------------


@pytest.mark.parametrize('value', ['nan', 'inf', '-inf', '0', '-1', 'abc'])
def test_launcher_timeout_must_be_a_finite_number_above_0(value):
  proc = run_script(
    'launch_local_cluster.py',
    '--num_workers=1',
    '--timeout=' + value,
    '--',
    *TRIVIAL_FLAGS,
    '--num_batches=1',
    env=task_env(),
    timeout=60,
  )
  assert _one_line(proc) == (
    'error: --timeout=%s: must be a number of seconds > 0' % value
  )


@pytest.mark.parametrize('value', ['1e300', '1717987', '-5', '0', 'nan'])
def test_launcher_link_mbits_is_what_tc_can_shape(value):
  proc = run_script(
    'launch_local_cluster.py',
    '--num_workers=1',
    '--link_mbits=' + value,
    '--',
    *TRIVIAL_FLAGS,
    env=task_env(),
    timeout=60,
  )
  assert _one_line(proc) == (
    'error: --link_mbits=%s: must be a number of Mbit/s from 0.000008 '
    '(1 byte/s) to 1717986, the rates tc tbf can shape (absent: '
    'unthrottled)' % value
  )


def test_the_link_mbits_bounds_are_tcs():
  """tc takes a token bucket at both bounds and refuses one past each."""
  if not shutil.which('unshare') or not shutil.which('tc'):
    pytest.skip('no unshare or tc here')
  code = (
    'from tf_cnn_benchmarks.commands import netshape as n; '
    'print([bool(n.shaping_works(m)) for m in '
    '(n.MIN_MBITS, n.MAX_MBITS, n.MIN_MBITS * 0.9, n.MAX_MBITS + 1)])'
  )
  proc = subprocess.run(
    [sys.executable, '-c', code],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=120,
  )
  if proc.stdout.strip() == '[True, True, True, True]':
    pytest.skip('no network namespace here (unshare -rn fails)')
  assert proc.stdout.strip() == '[False, False, True, True]', proc.stderr


# ---- --link_mbits of the predictions -----------------------------------------


def test_predict_scaling_names_link_mbits_as_given():
  proc = run_script(
    'predict_scaling.py',
    '--profile=' + AUTO_PROFILE,
    '--num_workers=2',
    '--link_mbits=-5',
    timeout=120,
  )
  assert _one_line(proc) == (
    'predict_scaling.py: error: --link_mbits=-5: want a number > 0 or none'
  )


@pytest.mark.parametrize('value', [-5.0, float('nan'), float('inf'), 0])
def test_auto_names_link_mbits_as_given(value):
  with pytest.raises(auto.AutoError) as e:
    auto.choose(dict(AUTO_RESNET20, link_mbits=value))
  assert str(e.value).startswith(
    '--link_mbits=%s: must be a number of Mbit/s > 0'
    % {-5.0: '-5', 0: '0'}.get(value, str(value))
  )


def test_the_command_line_names_link_mbits_as_given():
  status, err = cli_status(
    *AUTO_TRIVIAL, '--scaling_profile_any_model', '--link_mbits=-5'
  )
  assert status == 2 and len(err) == 1, err
  assert err[0].startswith('error: --link_mbits=-5: must be a number')


# ---- a profile of another model ----------------------------------------------

OTHER_MODEL = (
  '--scaling_profile=%s: a profile of --model=resnet20 --batch_size=32, this '
  'run is --model=trivial --batch_size=2 (it would rank the strategies for '
  'resnet20 at --batch_size=32); give --scaling_profile_any_model to use it '
  'anyway' % AUTO_PROFILE
)


def test_a_profile_of_another_model_is_refused():
  status, err = cli_status(*AUTO_TRIVIAL)
  assert (status, err) == (2, ['error: ' + OTHER_MODEL])


def test_the_python_api_refuses_it_too():
  with pytest.raises(auto.AutoError) as e:
    auto.choose(dict(AUTO_RESNET20, model='trivial', batch_size=2))
  assert str(e.value) == OTHER_MODEL


def test_any_model_uses_it_with_a_warning():
  status, err = cli_status(*AUTO_TRIVIAL, '--scaling_profile_any_model')
  assert status == 0, err
  assert [ln for ln in err if 'profiles --model=resnet20' in ln], err


def test_the_launcher_refuses_it_before_any_task_starts():
  proc = run_script(
    'launch_local_cluster.py',
    '--num_workers=2',
    '--',
    *AUTO_TRIVIAL,
    env=task_env(),
    timeout=120,
  )
  assert _one_line(proc) == 'error: ' + OTHER_MODEL
  assert '[worker:' not in proc.stdout


def test_predict_scaling_refuses_a_profile_of_another_model():
  args = ['--profile=' + AUTO_PROFILE, '--model=trivial', '--num_workers=2']
  proc = run_script('predict_scaling.py', *args, timeout=120)
  assert _one_line(proc) == (
    'predict_scaling.py: error: --profile=%s: a profile of --model=resnet20, '
    'this run is --model=trivial (it would rank the strategies for '
    'resnet20); give --profile_any_model to use it anyway' % AUTO_PROFILE
  )
  assert proc.stdout == ''
  proc = run_script(
    'predict_scaling.py', *args, '--profile_any_model', timeout=120
  )
  assert proc.returncode == 0, proc.stderr


# ---- the chief's mark, torn ------------------------------------------------


def test_an_evaluator_refuses_a_torn_mark(tmp_path):
  mark = tmp_path / 'training_done.json'
  mark.write_text('{"final_step": 3')
  status, err = cli_status(
    *TRIVIAL_FLAGS,
    '--job_name=evaluator',
    '--train_dir=%s' % tmp_path,
    '--eval_interval_secs=1',
    '--eval_timeout_secs=10',
  )
  assert status == 2 and len(err) == 1, err
  assert err[0].startswith('error: %s: not valid JSON (' % mark)


# ---- output files, checked before the work -----------------------------------


def _blocked(tmp_path):
  """A path under a regular file: its directory cannot be made."""
  (tmp_path / 'file').write_text('')
  return str(tmp_path / 'file' / 'sub')


@pytest.mark.parametrize(
  'script, flag, name',
  [
    ('compare.py', '--plot', 'x.png'),
    ('report.py', '--out', 'x.html'),
    ('plot.py', '--out', 'x.png'),
  ],
)
def test_results_scripts_check_their_output_first(tmp_path, script, flag, name):
  for path, why in (
    ('/proc/' + name, 'cannot create files in /proc'),
    (os.path.join(_blocked(tmp_path), name), 'is not a directory'),
  ):
    proc = run_script(script, RESULTS, '%s=%s' % (flag, path), timeout=120)
    line = _one_line(proc)
    assert line.startswith('%s: error: %s=%s: ' % (script, flag, path)), line
    assert why in line, line
    assert proc.stdout == ''  # nothing done before the check


@pytest.mark.parametrize(
  'path, why',
  [
    ('/proc/x.jsonl', 'cannot create files in /proc'),
    ('/nonexistent-dir/x.jsonl', 'no such directory /nonexistent-dir'),
  ],
)
def test_predict_scaling_checks_json_out_first(path, why):
  proc = run_script(
    'predict_scaling.py',
    '--profile=' + AUTO_PROFILE,
    '--num_workers=2',
    '--json_out=' + path,
    timeout=120,
  )
  line = _one_line(proc)
  assert line.startswith('predict_scaling.py: error: --json_out=%s: ' % path)
  assert why in line, line
  assert proc.stdout == ''  # no table: nothing predicted before the check


def test_predict_scaling_still_writes_json_out(tmp_path):
  path = str(tmp_path / 'p.jsonl')
  proc = run_script(
    'predict_scaling.py',
    '--profile=' + AUTO_PROFILE,
    '--num_workers=2',
    '--json_out=' + path,
    timeout=120,
  )
  assert proc.returncode == 0, proc.stderr
  with open(path) as f:
    assert all(json.loads(ln) for ln in f)


def test_profile_host_checks_out_before_measuring():
  proc = run_script(
    'profile_host.py',
    '--model=trivial',
    '--data_name=cifar10',
    '--batch_size=8',
    '--device=cpu',
    '--profile_steps=3',
    '--profile_traced_steps=1',
    '--transport_max_bytes=0',
    '--concurrent_copies=',
    '--out=/proc/x.json',
    env=task_env(),
    timeout=120,
  )
  assert _one_line(proc) == (
    'error: --out=/proc/x.json: cannot create files in /proc (no write '
    'permission)'
  )
