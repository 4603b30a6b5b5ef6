"""`pip install .`: the commands it puts on PATH, what the wheel holds, and
the requirements files in step with pyproject.toml (issue 30).

The default suite builds the wheel offline (no build isolation, from a copy
of the checkout, so no build/ or *.egg-info is left here), reads its
entry_points.txt, and runs every command's entry function from the unpacked
wheel with the checkout off sys.path. The slow test installs it into a
fresh virtual environment and runs the commands from its bin/. Neither
fetches anything: the dependencies are this environment's (a full install
from the package index was done by hand: docs/install.md).
"""

import configparser
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile

import pytest

from tests import helpers

ROOT = pathlib.Path(helpers.ROOT)
# The commands and the function each runs (pyproject.toml [project.scripts]).
COMMANDS = {
  'tf-cnn-benchmarks': 'tf_cnn_benchmarks.__main__:console_main',
  'tf-cnn-benchmarks-sweep': 'tf_cnn_benchmarks.commands.console:sweep',
  'tf-cnn-benchmarks-compare': 'tf_cnn_benchmarks.commands.console:compare',
  'tf-cnn-benchmarks-plot': 'tf_cnn_benchmarks.commands.console:plot',
  'tf-cnn-benchmarks-report': 'tf_cnn_benchmarks.commands.console:report',
  'tf-cnn-benchmarks-launch': (
    'tf_cnn_benchmarks.commands.console:launch_local_cluster'
  ),
  'tf-cnn-benchmarks-make-fake-data': (
    'tf_cnn_benchmarks.commands.console:make_fake_data'
  ),
  'tf-cnn-benchmarks-profile': (
    'tf_cnn_benchmarks.commands.console:profile_host'
  ),
  'tf-cnn-benchmarks-predict': (
    'tf_cnn_benchmarks.commands.console:predict_scaling'
  ),
  'tf-cnn-benchmarks-validate-on-paper': (
    'tf_cnn_benchmarks.commands.console:validate_on_paper'
  ),
  'tf-cnn-benchmarks-predict-scale-benchmark': (
    'tf_cnn_benchmarks.commands.console:predict_scale_benchmark'
  ),
  'tf-cnn-benchmarks-interval-coverage': (
    'tf_cnn_benchmarks.commands.console:interval_coverage'
  ),
}
# What each command's --help starts with (its usage line).
USAGE = {
  'tf-cnn-benchmarks': 'USAGE: tf-cnn-benchmarks [flags]',
  'tf-cnn-benchmarks-sweep': 'usage: ',
  'tf-cnn-benchmarks-compare': 'usage: ',
  'tf-cnn-benchmarks-plot': 'usage: ',
  'tf-cnn-benchmarks-report': 'usage: ',
  'tf-cnn-benchmarks-launch': 'usage: ',
  'tf-cnn-benchmarks-make-fake-data': 'usage: ',
  'tf-cnn-benchmarks-profile': 'Measures this host',
  'tf-cnn-benchmarks-predict': 'usage: ',
  'tf-cnn-benchmarks-validate-on-paper': 'usage: ',
  'tf-cnn-benchmarks-predict-scale-benchmark': 'usage: ',
  'tf-cnn-benchmarks-interval-coverage': 'usage: ',
}
_COPIED = (
  'tf_cnn_benchmarks',
  'variable_mgr',
  'models',
  'scripts',
  'lab',
  'results',
)


def _pyproject():
  with open(ROOT / 'pyproject.toml', 'rb') as f:
    return tomllib.load(f)


def _requirements(name):
  """The requirement lines of a requirements file, comments dropped."""
  text = (ROOT / name).read_text()
  return [
    ln.split('#')[0].strip()
    for ln in text.splitlines()
    if ln.split('#')[0].strip()
  ]


def build_wheel(dest: pathlib.Path) -> pathlib.Path:
  """The project's wheel, built offline from a copy of the checkout."""
  src = dest / 'src'
  src.mkdir(parents=True)
  for name in ('pyproject.toml', 'README.md'):
    shutil.copy(ROOT / name, src / name)
  ignore = shutil.ignore_patterns('__pycache__', '*.pyc')
  for name in _COPIED:
    shutil.copytree(ROOT / name, src / name, ignore=ignore)
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'pip',
      'wheel',
      '--no-deps',
      '--no-build-isolation',
      '--no-index',
      '-q',
      '-w',
      str(dest / 'dist'),
      str(src),
    ],
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stdout + proc.stderr
  (wheel,) = (dest / 'dist').glob('tf_cnn_benchmarks-*.whl')
  return wheel


@pytest.fixture(scope='module')
def wheel(tmp_path_factory):
  return build_wheel(tmp_path_factory.mktemp('wheel'))


@pytest.fixture(scope='module')
def unpacked(wheel, tmp_path_factory):
  """The wheel's files, as they land in site-packages."""
  target = tmp_path_factory.mktemp('site')
  with zipfile.ZipFile(wheel) as z:
    z.extractall(target)
  return target


def test_wheel_declares_the_commands(wheel):
  with zipfile.ZipFile(wheel) as z:
    (name,) = [n for n in z.namelist() if n.endswith('/entry_points.txt')]
    parser = configparser.ConfigParser()
    parser.optionxform = str  # command names keep their case
    parser.read_string(z.read(name).decode())
  assert dict(parser['console_scripts']) == COMMANDS
  assert _pyproject()['project']['scripts'] == COMMANDS


def test_wheel_holds_every_package_and_command(wheel):
  with zipfile.ZipFile(wheel) as z:
    names = set(z.namelist())
  for top in ('tf_cnn_benchmarks', 'variable_mgr', 'models'):
    for path in (ROOT / top).rglob('*.py'):
      if '__pycache__' not in path.parts:
        assert path.relative_to(ROOT).as_posix() in names
  # Every scripts/NAME.py entry point has its command module; the entry
  # points, the lab and the tests are not installed.
  for path in (ROOT / 'scripts').glob('[a-z]*.py'):
    assert 'tf_cnn_benchmarks/commands/%s' % path.name in names
  assert not [
    n for n in names if n.split('/')[0] in ('lab', 'scripts', 'tests')
  ]


def test_requirements_files_match_pyproject():
  project = _pyproject()['project']
  extras = project['optional-dependencies']
  assert _requirements('requirements.txt') == project['dependencies']
  assert _requirements('requirements-test.txt') == extras['test']
  assert _requirements('requirements-tools.txt') == extras['tools']
  assert _requirements('requirements-gpu.txt') == extras['gpu']
  assert extras['gpu'] == ['tensorflow[and-cuda]==2.21.0']
  runtime = {re.split('[=<>\\[]', r)[0] for r in project['dependencies']}
  assert not runtime & {'pytest', 'ruff', 'import-linter', 'jsonschema'}


def test_ci_runs_the_readmes_test_command():
  """The README's first test command (after its set-up) is the line CI
  runs, flags and all: the suite's speed on two cores rests on its -n 2."""
  readme = (ROOT / 'README.md').read_text()
  first = next(ln for ln in readme.splitlines() if 'pytest' in ln)
  command = first[first.index('.venv/bin/python -m pytest') :].strip()
  assert '-n 2' in command and '"not slow"' in command
  ci_lines = (ROOT / '.ci' / 'run').read_text().splitlines()
  assert command in [ln.strip() for ln in ci_lines]


def _outside_env(site) -> dict:
  """This environment's interpreter and dependencies, with the unpacked
  wheel in place of the checkout on sys.path."""
  env = helpers.quiet_env(PYTHONPATH=str(site))
  env.pop('PYTHONSTARTUP', None)
  return env


@pytest.mark.parametrize('command', sorted(COMMANDS))
def test_every_command_runs_from_the_installed_files(
  command, unpacked, tmp_path
):
  module, function = COMMANDS[command].split(':')
  program = (
    'import sys; sys.argv = [%r, "--help"]; '
    'import %s as m; '
    'assert m.__file__.startswith(%r), m.__file__; '
    'sys.exit(m.%s())' % (command, module, str(unpacked), function)
  )
  proc = subprocess.run(
    [sys.executable, '-c', program],
    cwd=tmp_path,  # not the checkout: the imports come from the wheel
    env=_outside_env(unpacked),
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.lstrip().startswith(USAGE[command]), proc.stdout[:300]


_PURELIB = 'import sysconfig; print(sysconfig.get_path("purelib"))'


def _venv_with_our_dependencies(path: pathlib.Path) -> pathlib.Path:
  """A fresh virtual environment that sees this one's packages (a .pth
  line), without the project: the project is installed into it next."""
  base = getattr(sys, '_base_executable', sys.executable)
  subprocess.run([base, '-m', 'venv', str(path)], check=True, timeout=300)
  python = path / 'bin' / 'python'
  site = subprocess.run(
    [
      str(python),
      '-c',
      'import sysconfig; print(sysconfig.get_path("purelib"))',
    ],
    check=True,
    capture_output=True,
    text=True,
  ).stdout.strip()
  ours = sysconfig.get_path('purelib')
  pathlib.Path(site, 'deps_of_this_env.pth').write_text(ours + '\n')
  return python


@pytest.mark.slow
def test_pip_install_puts_working_commands_on_path(tmp_path):
  python = _venv_with_our_dependencies(tmp_path / 'venv')
  wheel = build_wheel(tmp_path / 'build')
  subprocess.run(
    [
      str(python),
      '-m',
      'pip',
      'install',
      '-q',
      '--no-deps',
      '--no-index',
      str(wheel),
    ],
    check=True,
    timeout=600,
  )
  bin_dir = tmp_path / 'venv' / 'bin'
  for command in COMMANDS:
    assert os.access(bin_dir / command, os.X_OK), command
  work = tmp_path / 'work'
  work.mkdir()
  env = helpers.quiet_env(PATH='%s:%s' % (bin_dir, os.environ['PATH']))
  env.pop('PYTHONPATH', None)

  def run(*argv):
    return subprocess.run(
      argv, cwd=work, env=env, capture_output=True, text=True, timeout=900
    )

  proc = run(
    'tf-cnn-benchmarks',
    '--device=cpu',
    '--model=trivial',
    '--batch_size=4',
    '--num_batches=3',
    '--num_warmup_batches=1',
    '--result_file=results/one.jsonl',
  )
  assert proc.returncode == 0, proc.stderr
  assert 'total images/sec: ' in proc.stdout
  proc = run('tf-cnn-benchmarks-compare', 'results/one.jsonl')
  assert proc.returncode == 0, proc.stderr
  assert 'trivial' in proc.stdout
  # Relative paths in a launched task's flags mean the caller's directory.
  proc = run(
    'tf-cnn-benchmarks-launch',
    '--num_workers=2',
    '--',
    '--device=cpu',
    '--model=trivial',
    '--batch_size=4',
    '--num_batches=3',
    '--variable_update=collective_all_reduce',
    '--result_file=results/cluster.jsonl',
  )
  assert proc.returncode == 0, proc.stdout + proc.stderr
  assert (work / 'results' / 'cluster.jsonl').exists()
