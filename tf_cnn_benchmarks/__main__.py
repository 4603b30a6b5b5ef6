"""`python -m tf_cnn_benchmarks`: flags -> Params -> run -> exit status.

Exit status: 0 on success, 2 on a bad flag or combination, bad data (a
missing or malformed --data_dir, a corrupt record or image), an unusable
checkpoint or a --batch_size that runs out of memory (one line on stderr
naming the flag or file and what is wrong, no traceback), 1 if the run fails
(in a cluster: one line naming the lost task, or the failed RPC;
--build_only: one line naming a GPU op without a GPU kernel; a checkpoint,
summary or trace whose write failed during the run, a full disk: one line
naming the file, the results line still written when only the final
checkpoint failed; an evaluator task whose chief never marked the end of
training within --eval_timeout_secs: one line), 130 on Ctrl-C (one line).
"""

from __future__ import annotations

import os
import sys

from absl import app  # noqa: F401  (defines --only_check_args, as absl.app runs)
from absl import flags
from absl import logging  # noqa: F401  (its flags, as under absl.app)

from tf_cnn_benchmarks.cluster import slurm
from tf_cnn_benchmarks.cluster import spec
from tf_cnn_benchmarks.config import classic_flags
from tf_cnn_benchmarks.config import limits
from tf_cnn_benchmarks.config import params_value
from tf_cnn_benchmarks.platform import ctrl_c
from tf_cnn_benchmarks.platform import quiet
from tf_cnn_benchmarks.platform import xla_env
from tf_cnn_benchmarks.reporting import environment
from tf_cnn_benchmarks.reporting import model_table
from tf_cnn_benchmarks.reporting import outputs

# Everything imported above is free of TensorFlow, so --help, --helpfull and
# flag errors print at once; TensorFlow loads (quietly) after the flags parse.
FLAGS = flags.FLAGS
flags.DEFINE_bool(
  'list_models',
  False,
  'Print the name and dataset of every registered model, then exit.',
)
flags.DEFINE_bool(
  'list_models_with_stats',
  False,
  'Print every model with its dataset, image size, parameter count and '
  'GFLOPs, one row as each model is built, then exit.',
)
params_value.define_flags(FLAGS)
classic_flags.define_flags(FLAGS)


# The command `pip install .` puts on PATH (pyproject.toml [project.scripts]).
CONSOLE_COMMAND = 'tf-cnn-benchmarks'


def _usage_error(message: str) -> int:
  print('error: %s' % message, file=sys.stderr)
  return 2


def _print_help(argv: list[str], *, full: bool) -> int:
  """-h, --help, --helpshort, --helpfull: help grouped by topic, status 0."""
  classic_script = bool(argv) and argv[0].endswith('tf_cnn_benchmarks.py')
  program = argv[0] if classic_script else 'python -m tf_cnn_benchmarks'
  if argv and os.path.basename(argv[0]) == CONSOLE_COMMAND:
    program = CONSOLE_COMMAND
  own = [*params_value.FIELDS, *classic_flags.ENTRY_FLAG_TOPICS]
  print(classic_flags.render_help(FLAGS, own, program, full))
  return 0


def main(argv: list[str], *, reports_results: bool | None = None) -> int:
  """Runs the benchmark the command line describes; returns the exit status.

  Ctrl-C is one line and status 130 (128 + SIGINT), no traceback.
  """
  with ctrl_c.noted() as sigint:
    try:
      return _main(argv, reports_results=reports_results)
    except KeyboardInterrupt:
      return _interrupted()
    except BrokenPipeError:
      # The reader of stdout went away (`--help | head`): stop as a shell
      # tool killed by SIGPIPE would, without a traceback; stdout goes to
      # /dev/null so the interpreter's final flush does not fail again.
      devnull = os.open(os.devnull, os.O_WRONLY)
      os.dup2(devnull, sys.stdout.fileno())
      return 141
    except Exception:
      if sigint.interrupted:  # turned into another error by TensorFlow
        return _interrupted()
      raise


def _interrupted() -> int:
  """The one line of Ctrl-C; status 130 (128 + SIGINT)."""
  # Results lines are appended whole, checkpoints renamed into place:
  # an interrupt loses only the unfinished run.
  ctrl_c.quiet_tensorflow_logger()
  print('interrupted', file=sys.stderr, flush=True)
  return 130


def _main(argv: list[str], *, reports_results: bool | None = None) -> int:
  """main() without the Ctrl-C handling.

  reports_results: None (default) lets the chief alone write the results line;
  True makes this process write it whatever its task (tests of clusters).
  """
  help_kind = classic_flags.help_requested(argv)
  if help_kind:
    return _print_help(argv, full=help_kind == 'full')
  # Each command line starts from the defaults (main may run several in one
  # process: absl keeps the last command line's values).
  FLAGS.unparse_flags()
  try:
    rest = FLAGS(argv, known_only=False)
  except flags.Error as e:
    return _usage_error(str(e).splitlines()[0])
  if len(rest) > 1:
    return _usage_error(
      'unexpected argument(s): %s (flags look like '
      '--name=value)' % ' '.join(rest[1:])
    )
  if FLAGS.list_models or FLAGS.list_models_with_stats:
    return _list_models(with_stats=FLAGS.list_models_with_stats)
  xla_problem = xla_env.problem()  # TensorFlow would abort, silently
  if xla_problem:
    return _usage_error(xla_problem)
  slurm_problem = _bind_slurm_gpus()  # before TensorFlow lists the GPUs
  if slurm_problem:
    return _usage_error(slurm_problem)
  quiet.load_tensorflow()  # before any import that loads TensorFlow
  plan, status, prediction = _plan_from_flags()
  if plan is None:
    return status
  if 'only_check_args' in FLAGS and FLAGS.only_check_args:
    return 0  # absl's --only_check_args: the flags are valid, do not run
  # TensorFlow's modules import here, once quiet.load_tensorflow() ran:
  # --help and flag errors answer without TensorFlow.
  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks.evaluation import evaluator_task
  from tf_cnn_benchmarks.observability import placement

  try:
    return _dispatch(plan, reports_results, prediction)
  except _bad_input_errors() as e:
    return _usage_error(str(e).splitlines()[0])
  except evaluator_task.EvaluatorTimeout as e:  # the chief never marked
    print('error: %s' % e, file=sys.stderr, flush=True)
    return 1
  except placement.MissingKernelError as e:  # --build_only's kernel check
    print('error: %s' % e, file=sys.stderr, flush=True)
    return 1
  except outputs.OutputWriteError as e:  # a full disk during the run
    print('error: %s' % e, file=sys.stderr, flush=True)
    return 1


def _plan_from_flags() -> tuple:
  """(the run plan, None, the auto prediction or None) after its warning
  lines, or (None, 2, None) after the one error line of a bad flag (for
  --device=gpu without a GPU, TensorFlow's reasons before it).

  --variable_update=auto is resolved here, before the plan (and so the
  manager) is made: scaling/auto/auto.py prints its ranking and picks.
  """
  # These import TensorFlow: late, after the flags parse (--help without it).
  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks.config import params as params_lib
  from tf_cnn_benchmarks.platform import gpu_runtime
  from tf_cnn_benchmarks.scaling.auto import auto

  try:
    values = {name: FLAGS[name].value for name in params_lib.FIELDS}
    plan, choice = auto.make_auto_plan(**values)
    for line in classic_flags.check_command_line(FLAGS):
      print(line, file=sys.stderr, flush=True)
    for line in gpu_runtime.cpu_warnings(plan.params) + list(plan.warnings):
      print(line, file=sys.stderr, flush=True)
  except (
    params_lib.ParamsError,
    classic_flags.ClassicFlagError,
    auto.AutoError,
  ) as e:
    if _gpu_asked_for_and_missing(str(e)):
      _print_why_no_gpu()
    return None, _usage_error(str(e)), None
  _warn_if_gpu_expected()
  return plan, None, choice and choice.record()


def _gpu_asked_for_and_missing(error: str) -> bool:
  """Whether error is the refusal of --device=gpu where TensorFlow sees no
  GPU (config/resolve.py), as opposed to another bad flag."""
  # Imports TensorFlow: late, after the flags parse (--help without it).
  from tf_cnn_benchmarks.platform import devices  # pylint: disable=g-import-not-at-top

  return (
    (FLAGS.device or '').lower() == 'gpu'
    and error.startswith('--device=gpu:')
    and not devices.gpu_visible()
  )


def _print_why_no_gpu() -> None:
  """TensorFlow's own lines on why it sees no GPU, on stderr (its start-up
  chatter is otherwise kept off it: platform/quiet.py)."""
  # Imports TensorFlow: late, after the flags parse (--help without it).
  from tf_cnn_benchmarks.platform import devices  # pylint: disable=g-import-not-at-top

  for line in devices.why_no_gpu():
    print(line, file=sys.stderr, flush=True)


def _warn_if_gpu_expected() -> None:
  """--device unset, TensorFlow sees no GPU but nvidia-smi lists some: the
  run goes on on the CPU, after TensorFlow's reasons and one warning line
  (a GPU box with a TensorFlow that cannot use its GPUs)."""
  if FLAGS.device:
    return
  # Imports TensorFlow: late, after the flags parse (--help without it).
  from tf_cnn_benchmarks.platform import devices  # pylint: disable=g-import-not-at-top

  if devices.gpu_visible():
    return
  rows, _ = environment.nvidia_smi_rows()
  if not rows:
    return
  _print_why_no_gpu()
  print(
    'warning: nvidia-smi lists %d GPU(s) but TensorFlow sees none: running '
    'on the CPU (--device=gpu makes this an error; docs/gpu.md)' % len(rows),
    file=sys.stderr,
    flush=True,
  )


def _bind_slurm_gpus():
  """Under Slurm, the resolver's GPU share of this task; an error or None."""
  try:
    slurm.bind_gpus(slurm.ClusterOptions.of(FLAGS))
  except spec.ClusterError as e:
    return str(e)
  return None


def _list_models(*, with_stats: bool) -> int:
  """--list_models: names at once; --list_models_with_stats: built rows."""
  if not with_stats:
    for line in model_table.name_lines():
      print(line, flush=True)
    return 0
  quiet.load_tensorflow()
  for line in model_table.stats_lines():
    print(line, flush=True)
  return 0


def _bad_input_errors() -> tuple:
  """Errors that mean bad data or a bad checkpoint: one line, exit 2."""
  # These import TensorFlow: late, after the flags parse (--help without it).
  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks.evaluation import evaluation
  from tf_cnn_benchmarks.inputs import input_options
  from tf_cnn_benchmarks.training import checkpoints

  return (
    input_options.DataError,
    checkpoints.CheckpointError,
    evaluation.EvalError,
    outputs.OutputError,
    spec.ClusterError,  # e.g. tasks started with different run flags
    # Out of memory: --batch_size too large for this machine, as the
    # memory lower bound refuses at start (a bad flag value, exit 2).
    limits.BatchTooLargeError,
  )


def _dispatch(plan, reports_results, prediction=None) -> int:
  """Runs the plan: a local run, a cluster client, or a serve-only task.

  prediction: --variable_update=auto's record for the results line.
  """
  # TensorFlow's modules: late, after the flags parse (--help without them).
  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks import benchmark_cnn
  from tf_cnn_benchmarks.cluster import roles
  from tf_cnn_benchmarks.cluster import servers
  from tf_cnn_benchmarks.platform import devices
  from tf_cnn_benchmarks.platform import gpu_runtime

  cluster, p = plan.cluster, plan.params

  def run() -> int:
    benchmark_cnn.run_benchmark(
      plan, reports_results=reports_results, prediction=prediction
    )
    return 0

  if cluster is None:
    return run()
  one_graph = plan.manager_cls.traits.one_graph
  serve_only = cluster.me in roles.roles(cluster, one_graph).serve_only
  if p.build_only:  # this task's graph, without its server or peers
    if serve_only:
      return _usage_error(
        '--build_only: task %s builds no graph (it only serves); give a '
        "worker's (or the controller's) --job_name and --task_index"
        % cluster.task_name
      )
    return run()
  if serve_only:
    # Workers serving a controller's graph hold its CPU towers.
    cpus = devices.logical_cpu_count(p.device, p.num_gpus)
    gpu_runtime.apply_environment(gpu_runtime.environment(p))
    pools = servers.pools_for(cluster, p)
    fields = gpu_runtime.config_fields(p)  # the server creates the GPUs
    return _in_cluster(
      lambda: roles.serve(
        cluster, one_graph, cpus, pools=pools, runtime_fields=fields
      ),
      cluster,
    )
  return _in_cluster(run, cluster)


def _in_cluster(fn, cluster) -> int:
  """Runs a cluster task; a lost peer or failed RPC is one line, status 1."""
  # TensorFlow: late, after the flags parse (--help without it).
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf

  from tf_cnn_benchmarks.cluster import watchdog

  try:
    return fn() or 0
  except tf.errors.OpError as e:
    print(watchdog.describe_failure(cluster, e), file=sys.stderr, flush=True)
    return 1


def exit_process(status: int) -> None:
  """Ends the process with status; after a failed run, without clean-up.

  A cluster task whose peer is gone can block for ever in TensorFlow's
  teardown (a server or session waiting on the lost peer's RPCs), after its
  one error line. Everything the run wrote is flushed and on disk by then.
  """
  if status == 1:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # pylint: disable=protected-access
  sys.exit(status)


def console_main() -> None:
  """The tf-cnn-benchmarks command: what `python -m tf_cnn_benchmarks` does."""
  exit_process(main(sys.argv))


if __name__ == '__main__':
  exit_process(main(sys.argv))
