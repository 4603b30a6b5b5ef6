""":::MLLOG lines of --ml_perf_compliance_logging, read back with the
mlperf-logging package's own parser and compliance checker."""

import importlib.util
import io
import json

from mlperf_logging.compliance_checker import mlp_compliance
from mlperf_logging.compliance_checker import mlp_parser
from mlperf_logging.mllog import constants as keys
from mlperf_logging.mllog import mllog
import pytest

from tests import helpers
from tests import test_profiling
from tf_cnn_benchmarks.observability import mlperf_log

# The last MLPerf training rules with the ResNet benchmark.
RULESET = '4.0.0'


def parsed(path):
  """The parser's log lines of `path`; fails on any line it cannot parse."""
  lines, errors = mlp_parser.parse_file(str(path), ruleset=RULESET)
  assert errors == []
  return lines


def compliance_run(tmp_path, **kw):
  """(result, console, parsed lines of the log file) of a short run."""
  path = tmp_path / 'mlperf.log'
  result, console = test_profiling.run(
    1,
    num_batches=4,
    ml_perf_compliance_logging=True,
    ml_perf_log_file=str(path),
    **kw,
  )
  return result, console, parsed(path)


def test_run_logs_run_epochs_evaluations_and_settings(tmp_path):
  result, console, lines = compliance_run(
    tmp_path, eval_during_training_every_n_steps=2, num_eval_batches=1
  )
  got = [ll.key for ll in lines]
  by_key = {}
  for ll in lines:
    by_key.setdefault(ll.key, []).append(ll.value)
  assert got[:3] == [
    'submission_benchmark',
    'submission_division',
    'submission_platform',
  ]
  assert by_key['submission_benchmark'][0]['value'] == 'resnet'
  # The settings come between init_start and init_stop.
  init = got[got.index('init_start') : got.index('init_stop')]
  for key in (
    'global_batch_size',
    'gradient_accumulation_steps',
    'seed',
    'train_samples',
    'eval_samples',
    'opt_name',
    'opt_base_learning_rate',
    'opt_weight_decay',
  ):
    assert key in init, key
  assert by_key['global_batch_size'][0]['value'] == 4
  assert by_key['opt_base_learning_rate'][0]['value'] == 0.1  # test_linear's
  assert by_key['train_samples'][0]['value'] == 50000  # CIFAR-10's split
  # Training: run_start, then blocks cut by the evaluations (after timed
  # steps 2 and 4: global steps 3 and 5, warm-up included).
  rest = got[got.index('run_start') :]
  assert rest == [
    'run_start',
    'block_start',
    'epoch_start',
    'block_stop',
    'eval_start',
    'eval_accuracy',
    'eval_stop',
    'block_start',
    'block_stop',
    'eval_start',
    'eval_accuracy',
    'eval_stop',
    'epoch_stop',
    'run_stop',
  ]
  accuracies = by_key['eval_accuracy']
  evals = result.training.evals
  assert [a['value'] for a in accuracies] == [e.top_1_accuracy for e in evals]
  assert [a['metadata']['samples_count'] for a in accuracies] == [12, 20]
  assert accuracies[1]['metadata']['epoch_num'] == pytest.approx(20 / 50000)
  assert by_key['epoch_start'][0]['metadata']['epoch_num'] == 1
  assert by_key['run_stop'][0]['metadata']['status'] == 'success'
  # The console has the same lines.
  console_lines = [
    line for line in console.splitlines() if line.startswith(':::MLLOG')
  ]
  assert [ll.full_string for ll in lines] == console_lines


def test_log_passes_the_compliance_checker_with_the_submitters_keys(tmp_path):
  """The package's checker (open division, ResNet) accepts the run's log
  once the submitter adds what only it knows (organisation, status, the
  page cache cleared before the run)."""
  # (trivial: the checker wants an accuracy under 1, which test_linear's
  # synthetic evaluation reaches.)
  _, _, lines = compliance_run(
    tmp_path,
    model='trivial',
    data_name='imagenet',
    eval_during_training_every_n_steps=2,
    num_eval_batches=1,
  )
  assert lines
  submitter = io.StringIO()
  logger = mllog.MLLogger(logger=_string_logger(submitter))
  logger.event(keys.SUBMISSION_ORG, 'an organisation')
  logger.event(keys.SUBMISSION_STATUS, 'research')
  logger.event(keys.CACHE_CLEAR, True)
  full = tmp_path / 'submission.log'
  full.write_text(submitter.getvalue() + (tmp_path / 'mlperf.log').read_text())
  checker = mlp_compliance.make_checker('training', RULESET, False, True)
  assert checker.check_file(str(full), 'training_%s/common.yaml' % RULESET)
  # And it is the run's lines that satisfy it: without the evaluations'
  # accuracy the same check fails.
  no_eval = tmp_path / 'no_eval.log'
  no_eval.write_text(
    ''.join(
      line + '\n'
      for line in full.read_text().splitlines()
      if '"eval_accuracy"' not in line
    )
  )
  checker = mlp_compliance.make_checker('training', RULESET, False, True)
  assert not checker.check_file(
    str(no_eval), 'training_%s/common.yaml' % RULESET
  )


def _string_logger(stream):
  import logging  # pylint: disable=g-import-not-at-top

  logger = logging.Logger('submitter', logging.INFO)
  logger.addHandler(logging.StreamHandler(stream))
  return logger


def test_epochs_follow_the_samples_the_global_step_counts():
  printed = []
  log = mlperf_log.ComplianceLog(
    printed.append, None, global_batch_size=8, num_train_examples=20
  )
  log.run_start(global_step=0)
  for step in range(1, 7):  # 48 samples: epochs end at 24 and 40
    log.step_done(step)
  log.run_stop(success=True)
  events = [_line(text) for text in printed]
  epochs = [
    (e['key'], e['metadata']['epoch_num'])
    for e in events
    if e['key'].startswith('epoch_')
  ]
  assert epochs == [
    ('epoch_start', 1),
    ('epoch_stop', 1),  # after step 3 (24 samples)
    ('epoch_start', 2),
    ('epoch_stop', 2),  # after step 5 (40 samples)
    ('epoch_start', 3),
    ('epoch_stop', 3),  # left unfinished: closed at run_stop
  ]
  assert events[-1]['key'] == 'run_stop'


def test_a_resumed_run_goes_on_counting_epochs():
  printed = []
  log = mlperf_log.ComplianceLog(
    printed.append, None, global_batch_size=8, num_train_examples=20
  )
  log.run_start(global_step=4)  # 32 samples done: in epoch 2
  log.step_done(5)
  log.close()
  events = [_line(text) for text in printed]
  block = [e for e in events if e['key'] == 'block_start'][0]
  assert block['metadata']['samples_count'] == 32
  assert block['metadata']['first_epoch_num'] == pytest.approx(1.6)
  assert [
    e['metadata']['epoch_num'] for e in events if e['key'] == 'epoch_start'
  ] == [2]
  # A run that never stopped by itself (close() after a failure) aborted.
  assert events[-1]['key'] == 'run_stop'
  assert events[-1]['metadata']['status'] == 'aborted'


@pytest.mark.parametrize(
  'model,data_name,status',
  [
    # test_linear's synthetic evaluation reaches top-1 1.0 at once.
    ('test_linear', 'cifar10', 'success'),
    ('trivial', 'imagenet', 'aborted'),  # 1/8: never reached
  ],
)
def test_accuracy_target_decides_the_status(tmp_path, model, data_name, status):
  result, _, lines = compliance_run(
    tmp_path,
    model=model,
    data_name=data_name,
    eval_during_training_every_n_steps=2,
    num_eval_batches=1,
    stop_at_top_1_accuracy=1.0,
  )
  (stop,) = [ll.value for ll in lines if ll.key == 'run_stop']
  assert stop['metadata']['status'] == status
  reached = result.training.time_to_accuracy.steps is not None
  assert reached == (status == 'success')


def test_no_lines_without_the_flag(tmp_path):
  _, console = test_profiling.run(1, num_batches=2)
  assert ':::MLLOG' not in console


def test_flag_on_the_command_line_prints_the_lines(tmp_path):
  """The classic flag, which had no effect, now logs (no warning line)."""
  proc = helpers.run_benchmark(
    '--model=trivial',
    '--num_batches=2',
    '--num_warmup_batches=0',
    '--batch_size=2',
    '--ml_perf_compliance_logging',
  )
  assert proc.returncode == 0, proc.stderr
  assert 'ml_perf_compliance_logging has no effect' not in proc.stderr
  keys_printed = [
    _line(line)['key']
    for line in proc.stdout.splitlines()
    if line.startswith(':::MLLOG')
  ]
  assert keys_printed[0] == 'submission_benchmark'
  assert keys_printed[-1] == 'run_stop'


def _line(text):
  assert text.startswith(':::MLLOG ')
  return json.loads(text[len(':::MLLOG ') :])


def test_log_file_without_the_flag_is_one_line():
  proc = helpers.run_benchmark(
    '--model=trivial', '--ml_perf_log_file=/tmp/never.log'
  )
  assert proc.returncode == 2
  assert (
    proc.stderr.strip()
    .splitlines()[-1]
    .endswith('--ml_perf_log_file: needs --ml_perf_compliance_logging')
  ), proc.stderr


def test_flag_without_the_package_is_one_line(monkeypatch):
  from tf_cnn_benchmarks.config import params as params_lib  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks.config import params_value  # pylint: disable=g-import-not-at-top

  real = importlib.util.find_spec
  monkeypatch.setattr(
    importlib.util,
    'find_spec',
    lambda name, *a: None if name == 'mlperf_logging' else real(name, *a),
  )
  with pytest.raises(
    params_value.ParamsError, match='needs the mlperf-logging package'
  ):
    params_lib.make_params(model='trivial', ml_perf_compliance_logging=True)


@pytest.mark.slow  # a 2-worker cluster
def test_in_a_cluster_the_chief_alone_logs(tmp_path):
  from tests import test_distributed  # pylint: disable=g-import-not-at-top

  path = tmp_path / 'mlperf.log'
  rc, output, _ = test_distributed.launch(
    tmp_path,
    2,
    test_distributed.LINEAR
    + [
      '--variable_update=parameter_server',
      '--ml_perf_compliance_logging',
      '--ml_perf_log_file=%s' % path,
    ],
  )
  assert rc == 0, output[-3000:]
  console = [line for line in output.splitlines() if ':::MLLOG' in line]
  assert console and all(line.startswith('[worker:0]') for line in console)
  # The parser reads the launcher's prefixed lines too.
  printed = tmp_path / 'console.log'
  printed.write_text('\n'.join(console) + '\n')
  assert [ll.key for ll in parsed(printed)] == [ll.key for ll in parsed(path)]
