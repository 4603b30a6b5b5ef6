"""Measures this host's scaling profile (one JSON file) and prints a summary.

    .venv/bin/python scripts/profile_host.py --model=resnet20 \
      --data_name=cifar10 --batch_size=32 --device=cpu \
      --out=lab/results/profiles/resnet20_cifar10_b32_cpu.json

The model flags are the benchmark's own (same names, same checks: any flag
of `python -m tf_cnn_benchmarks` that shapes the model's step may be given,
e.g. --data_format, --use_fp16, --optimizer, --weight_decay); the profile
always runs one tower on one device with parameter_server, as the cost
model expects. Its own flags: --out (required), --profile_steps,
--profile_traced_steps, --transport_max_bytes (0: no transport run),
--all_reduce_specs, --concurrent_copies, --compressors,
--compressors_only. How to use it: docs/predicting.md;
every field and how it is measured: lab/notes/predicting_profile.md.

The gradient compressors' compute (profile.compressors: each one's
compress + decompress work for the model's gradients on the profiled
device, no network) is measured by default: a few seconds against the
minutes of the rest, and without it the predictors price PowerSGD's many
small ops as streaming passes. To add it to a profile measured before:

    .venv/bin/python scripts/profile_host.py --compressors_only \
      --out=results/profiles/alexnet_cifar10_b32_cpu.json

On paper, for a device this machine does not have (no run: a published
figure and stated assumptions, every one in the profile's `notes`):

    .venv/bin/python scripts/profile_host.py --paper --model=resnet50 \
      --data_name=imagenet --batch_size=64 --images_per_sec=219 \
      --device_name=P100 --out=resnet50_p100.json

builds the model's graph (TensorFlow) for its gradients' sizes and order,
or reads them from --paper_gradients (a list cost_model_paper wrote: no
TensorFlow).

Exit status: 0; 2 with one line on stderr for a bad flag or an unwritable
--out; 1 when the transport tasks fail (one line).
"""

from __future__ import annotations

import datetime
import math
import sys

from absl import flags  # noqa: E402

from tf_cnn_benchmarks.config import params_value  # noqa: E402  (no TF)
from tf_cnn_benchmarks.platform import quiet
from tf_cnn_benchmarks.reporting import outputs
from tf_cnn_benchmarks.scaling.model import cost_model_compression as cmc
from tf_cnn_benchmarks.scaling.model import profile_format
from tf_cnn_benchmarks.scaling.profile import cost_model_paper
from tf_cnn_benchmarks.scaling.profile import profile_concurrent
from variable_mgr import allreduce_spec
from variable_mgr.compression import catalog

FLAGS = flags.FLAGS
params_value.define_flags(FLAGS)
flags.DEFINE_string('out', None, 'The profile JSON file to write.')
flags.DEFINE_integer(
  'profile_steps', 40, 'Timed steps of the local run (after 5 warm-up).'
)
flags.DEFINE_integer(
  'profile_traced_steps', 5, 'Traced steps (ready times) after them.'
)
flags.DEFINE_integer(
  'transport_max_bytes',
  64 << 20,
  'Largest transport message (sizes 64 B by 4x up to it; 0: skip the '
  'transport microbenchmarks and use the worker apply figure for the ps).',
)
flags.DEFINE_list(
  'all_reduce_specs',
  [],
  'All-reduce specs for the chunk lists (default: every registered '
  'algorithm plus pscpu:32k:xring, pscpu/xring, nccl/xring, xring#2).',
)
flags.DEFINE_list(
  'concurrent_copies',
  ['2', '3'],
  'On CPU: k copies of the local run at once, for each k given, against '
  'one alone (compute.concurrent_speedup: what k towers on one host get '
  'done; empty: not measured).',
)
flags.DEFINE_list(
  'compressors',
  ['all'],
  'Gradient compressors whose compute to measure (profile.compressors): '
  'all, none, or names of --gradient_compression; PowerSGD at '
  '--powersgd_rank.',
)
flags.DEFINE_bool(
  'compressors_only',
  False,
  'Measure only --compressors, for the gradients of the profile --out '
  'already holds, on its device, and write them into it (the rest of the '
  'profile as it was; the model flags are not used).',
)

flags.DEFINE_bool(
  'paper',
  False,
  'Write a profile from a published single-device figure instead of '
  'measuring: --model, --data_name, --batch_size, --images_per_sec, '
  '--device_name (and --use_fp16) describe it.',
)
flags.DEFINE_float(
  'images_per_sec',
  None,
  'With --paper: the published images/sec of one device.',
)
flags.DEFINE_string(
  'device_name', None, 'With --paper: the device the figure is of (e.g. V100).'
)
flags.DEFINE_string(
  'paper_gradients',
  None,
  "With --paper: the model's gradient list (JSON, cost_model_paper."
  'save_gradient_list) instead of building the model.',
)

# Flags of the benchmark the profile ignores (it fixes them itself).
_FIXED = ('variable_update', 'num_gpus', 'num_batches', 'job_name')


def _usage_error(message: str) -> int:
  print('error: %s' % message, file=sys.stderr, flush=True)
  return 2


def _given_flags() -> dict:
  """The benchmark flags given on the command line (name -> value)."""
  return {
    name: FLAGS[name].value
    for name in params_value.FIELDS
    if FLAGS[name].present and name not in _FIXED
  }


def _check_args():
  """One line naming the bad flag, or None."""
  if not FLAGS.out:
    return '--out: required (the profile JSON file to write)'
  try:  # the benchmark's own check of an output file
    outputs.check_file('out', FLAGS.out, creates_dirs=False)
  except outputs.OutputError as e:
    return str(e)
  if FLAGS.profile_steps < 3:
    return '--profile_steps=%d: must be >= 3' % FLAGS.profile_steps
  if FLAGS.profile_traced_steps < 1:
    return '--profile_traced_steps=%d: must be >= 1' % (
      FLAGS.profile_traced_steps
    )
  if FLAGS.transport_max_bytes < 0:
    return '--transport_max_bytes: must be >= 0'
  for text in FLAGS.concurrent_copies:
    if not text.isdigit() or int(text) < 2:
      return '--concurrent_copies=%s: want whole numbers >= 2' % ','.join(
        FLAGS.concurrent_copies
      )
  try:
    cmc.measured_names(FLAGS.compressors)
  except ValueError as e:
    return str(e)
  if FLAGS.compressors_only and FLAGS.paper:
    return '--compressors_only: not with --paper (a paper profile has no run)'
  return None


_OWN_FLAGS = (
  'out',
  'paper',
  'images_per_sec',
  'device_name',
  'paper_gradients',
  'profile_steps',
  'profile_traced_steps',
  'transport_max_bytes',
  'all_reduce_specs',
  'concurrent_copies',
  'compressors',
  'compressors_only',
)


def _print_help() -> int:
  print(__doc__.strip())
  print('\nflags of this script:')
  for name in _OWN_FLAGS:
    flag = FLAGS[name]
    print('  --%s (default: %r)\n    %s' % (name, flag.default, flag.help))
  print(
    '\nthe model flags: as `python -m tf_cnn_benchmarks --help` lists them.'
  )
  return 0


def main(argv) -> int:
  """Parses the flags, measures, writes --out, prints the summary."""
  if any(a in ('-h', '--help', '--helpfull') for a in argv[1:]):
    return _print_help()
  try:
    rest = FLAGS(argv)
  except flags.Error as e:
    return _usage_error(str(e).splitlines()[0])
  if len(rest) > 1:
    return _usage_error('unexpected argument(s): %s' % ' '.join(rest[1:]))
  problem = _check_args()
  if problem:
    return _usage_error(problem)
  if FLAGS.paper:
    return _paper()
  if FLAGS.compressors_only:
    return _compressors_only()
  # TensorFlow loads after the flags parse (--help and flag errors answer
  # at once), its start-up lines kept off stderr; these modules import it.
  quiet.load_tensorflow()
  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks.config import params as params_lib
  from tf_cnn_benchmarks.scaling.profile import profile
  from tf_cnn_benchmarks.scaling.profile import transport
  from tf_cnn_benchmarks.scaling.profile import transport_bench

  for text in FLAGS.all_reduce_specs:
    try:
      allreduce_spec.parse_all_reduce_spec(text)
    except allreduce_spec.AllReduceSpecError as e:
      return _usage_error('--all_reduce_specs: %s' % e)
  given = _given_flags()
  try:
    result = profile.measure_profile(
      num_steps=FLAGS.profile_steps,
      num_traced=FLAGS.profile_traced_steps,
      transport_sizes=transport_bench.sizes_up_to(FLAGS.transport_max_bytes),
      specs=FLAGS.all_reduce_specs or None,
      concurrent_copies=tuple(int(k) for k in FLAGS.concurrent_copies),
      compressors=cmc.measured_names(FLAGS.compressors),
      **given,
    )
  except (params_lib.ParamsError, allreduce_spec.AllReduceSpecError) as e:
    return _usage_error(str(e).splitlines()[0])
  except (
    transport.TransportProfileError,
    profile_concurrent.ConcurrentProfileError,
  ) as e:
    print('error: %s' % e, file=sys.stderr, flush=True)
    return 1
  try:
    profile_format.save_profile(result, FLAGS.out)
  except OSError as e:
    return _usage_error('--out=%s: cannot write: %s' % (FLAGS.out, e))
  for line in profile.summary_lines(result):
    print(line, flush=True)
  print('profile written to %s' % FLAGS.out, flush=True)
  return 0


def _compressors_only() -> int:
  """--compressors_only: the compressors measured into the profile --out."""
  try:
    old = profile_format.load_profile(FLAGS.out)
  except profile_format.ProfileError as e:
    return _usage_error('--compressors_only: %s' % e)
  names = cmc.measured_names(FLAGS.compressors)
  if not names:
    return _usage_error('--compressors_only: --compressors names none')
  quiet.load_tensorflow()
  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks.platform import devices
  from tf_cnn_benchmarks.scaling.profile import profile
  from tf_cnn_benchmarks.scaling.profile import profile_compression

  device = old.host.device
  costs = profile_compression.measure_compressors(
    old.gradients,
    names,
    device=device,
    rank=FLAGS.powersgd_rank or catalog.DEFAULT_POWERSGD_RANK,
    config=devices.session_config(
      device,
      1,
      num_intra_threads=FLAGS.num_intra_threads,
      num_inter_threads=FLAGS.num_inter_threads,
    ),
  )
  note = 'compressors measured %s and put in this profile (%s)' % (
    _now(),
    profile.machine_note(),
  )
  try:
    profile_format.add_compressors(FLAGS.out, costs, note)
  except OSError as e:
    return _usage_error('--out=%s: cannot write: %s' % (FLAGS.out, e))
  print(profile_compression.summary_line(costs), flush=True)
  print('profile written to %s' % FLAGS.out, flush=True)
  return 0


def _now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).strftime(
    '%Y-%m-%d %H:%M UTC'
  )


def _paper_problem():
  """One line naming the bad --paper flag, or None."""
  for name in ('model', 'batch_size', 'images_per_sec', 'device_name'):
    if not FLAGS[name].present:
      return '--paper: give --%s' % name
  ips = FLAGS.images_per_sec
  if not (math.isfinite(ips) and ips > 0):
    return '--images_per_sec=%s: want a number > 0' % ips
  if FLAGS.batch_size < 1:
    return '--batch_size=%d: want an integer >= 1' % FLAGS.batch_size
  return None


def _paper_gradients():
  """The gradient list: from --paper_gradients, or the model's graph."""
  if FLAGS.paper_gradients:
    return cost_model_paper.load_gradient_list(FLAGS.paper_gradients)
  quiet.load_tensorflow()
  return cost_model_paper.gradient_list(FLAGS.model, FLAGS.data_name)


def _paper() -> int:
  """--paper: writes a profile from the published figure, no run."""
  problem = _paper_problem()
  if problem:
    return _usage_error(problem)
  try:
    grads = _paper_gradients()
  except ValueError as e:  # a bad list file; an unknown model
    return _usage_error(str(e).splitlines()[0])
  result = cost_model_paper.paper_profile(
    grads,
    model=FLAGS.model,
    data_name=FLAGS.data_name,
    batch_size=FLAGS.batch_size,
    images_per_sec=FLAGS.images_per_sec,
    device_name=FLAGS.device_name,
    use_fp16=FLAGS.use_fp16,
  )
  try:
    profile_format.save_profile(result, FLAGS.out)
  except OSError as e:
    return _usage_error('--out=%s: cannot write: %s' % (FLAGS.out, e))
  print(
    'paper profile of %s on %s: %d gradients, %.1f MB, step %.2f ms'
    % (
      FLAGS.model,
      FLAGS.device_name,
      len(result.gradients),
      result.total_gradient_bytes / 1e6,
      result.compute.step_ms,
    )
  )
  print('notes: %s' % result.notes)
  print('profile written to %s' % FLAGS.out, flush=True)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))
