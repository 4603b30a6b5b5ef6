#!/usr/bin/env python3
"""Predict images/sec of every strategy on a cluster, from one host's profile.

  python scripts/predict_scaling.py --profile=FILE --num_workers=2,4,8
      [--num_ps=1] [--devices_per_worker=1] [--link_mbits=25000]
      [--link_latency_us=0] [--topology=shared|switch] [--colocated]
      [--variable_update=all|NAME[,NAME]] [--all_reduce_spec=all|SPEC[,SPEC]]
      [--gradient_repacking=0] [--agg_small_grads_max_bytes=0]
      [--gradient_compression=none|all|NAME[,NAME]] [--powersgd_rank=4]
      [--calibration=FILE] [--json_out=FILE]
      [--intra_link=pcie3|pcie4|nvlink1|nvlink2|nvswitch|nvswitch3|GB/s]
      [--network=tcp|rdma] [--ps_placement=own_hosts|worker_hosts]
      [--local_parameter_device=cpu|gpu] [--gradient_precision=fp32|fp16|bf16]
      [--nccl_algorithm=ring|tree] [--cores_per_host=N] [--horovod_*]

Without --profile, --model/--data_name/--batch_size/--device measure the
profile first (scaling.profile). Two models: a hardware flag, horovod or a
GPU profile predict a GPU cluster from its hardware (hardware_model.py,
closed forms); otherwise the test-bed model simulates the repository's
loopback clusters with its calibration (cost_model.py). Prints, per cluster
shape, a ranked table of predicted images/sec with its band, the margin of
the best to the runner-up, and where the constants came from; --json_out
writes one JSON line per strategy and shape. docs/predicting.md.
--gradient_compression prices each compressor (bytes from its catalog,
compute as the profile measured it, else at the profile's streaming rate:
cost_model_compression.py, the printout says which) for the managers that
all-reduce every gradient; the others run uncompressed.
"""

from __future__ import annotations

import argparse
import json
import sys

from tf_cnn_benchmarks.commands import predict_hardware
from tf_cnn_benchmarks.platform import quiet
from tf_cnn_benchmarks.reporting import outputs
from tf_cnn_benchmarks.scaling.model import cost_model
from tf_cnn_benchmarks.scaling.model import cost_model_calibration as cal_lib
from tf_cnn_benchmarks.scaling.model import cost_model_compression as cmc
from tf_cnn_benchmarks.scaling.model import hardware as hw_lib
from tf_cnn_benchmarks.scaling.model import profile_format
from tf_cnn_benchmarks.scaling.model import target as target_lib
from variable_mgr import allreduce_spec
from variable_mgr import catalog

# Spec-less managers are listed once; these take every spec of `all`.
_MEASURE_FLAGS = ('model', 'data_name', 'batch_size', 'device')


class UsageError(Exception):
  """Bad input: one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
  def error(self, message):
    raise UsageError(message)


def parse_args(argv):
  """The script's options."""
  p = _Parser(description=__doc__.splitlines()[0])
  p.add_argument('--profile', help='profile JSON file (scaling.profile)')
  for name in _MEASURE_FLAGS:
    p.add_argument(
      '--' + name,
      type=int if name == 'batch_size' else str,
      help='measure the profile first: --%s' % name,
    )
  p.add_argument('--num_workers', default='1', help='worker hosts: N or N,M')
  p.add_argument('--num_ps', type=int, default=0, help='ps tasks')
  p.add_argument('--devices_per_worker', type=int, default=1)
  p.add_argument(
    '--link_mbits',
    type=float,
    default=None,
    help='link bandwidth between hosts (default: loopback)',
  )
  p.add_argument('--link_latency_us', type=float, default=0.0)
  p.add_argument('--topology', default='switch', help='shared or switch')
  p.add_argument(
    '--colocated',
    action='store_true',
    help="every task shares the profiled host's cores",
  )
  p.add_argument(
    '--cores_per_host', type=int, default=None, help='cores of each host'
  )
  p.add_argument(
    '--worker_inter_op_threads',
    type=int,
    default=None,
    help="inter-op threads of each worker's server (its "
    '--num_inter_threads; with 1 its all-reduce transfers wait for its '
    "compute). Default: TensorFlow's, one per core; the launcher's workers "
    'on one shared link get cores / workers (--cluster_threads=auto)',
  )
  p.add_argument('--variable_update', default='all')
  p.add_argument('--all_reduce_spec', default='all')
  p.add_argument('--gradient_repacking', type=int, default=0)
  p.add_argument('--agg_small_grads_max_bytes', type=int, default=0)
  p.add_argument('--agg_small_grads_max_group', type=int, default=10)
  p.add_argument('--hybrid_threshold_bytes', type=int, default=1 << 20)
  p.add_argument(
    '--gradient_compression',
    default='none',
    help='compressors to price: none, all, or a comma list of %s'
    % ', '.join(cmc.catalog.NAMES),
  )
  p.add_argument('--powersgd_rank', type=int, default=cmc.DEFAULT_RANK)
  p.add_argument('--calibration', help='JSON of fitted constants')
  p.add_argument('--json_out', help='write one JSON line per prediction')
  p.add_argument(
    '--profile_any_model',
    action='store_true',
    help='with --profile: use a profile of another --model, --data_name or '
    '--batch_size than the ones given',
  )
  predict_hardware.add_flags(p)
  return p.parse_args(argv)


def _worker_counts(text):
  try:
    counts = [int(x) for x in text.split(',')]
  except ValueError:
    counts = []
  if not counts or min(counts) < 1:
    raise UsageError(
      '--num_workers=%s: want N or a comma list of integers >= 1' % text
    )
  return counts


def load_or_measure(args):
  """The profile: read from --profile, or measured from the model flags."""
  if args.profile:
    profile = profile_format.load_profile(args.profile)
    # Compared where given: without --model the profile's run is the
    # question asked.
    given = {k: getattr(args, k) for k in _MEASURE_FLAGS if k != 'device'}
    other = profile_format.other_run_error(
      profile, args.profile, given, '--profile', '--profile_any_model'
    )
    if other and not args.profile_any_model:
      raise other
    return profile
  flags = {k: getattr(args, k) for k in _MEASURE_FLAGS if getattr(args, k)}
  if not flags.get('model'):
    raise UsageError('give --profile=FILE, or --model=... to measure one')
  # Imports TensorFlow: only to measure a profile; --help and the cost model
  # answer without it.
  from tf_cnn_benchmarks.scaling.profile import profile as profile_lib

  print('measuring the profile of %s first (a minute or more)' % flags['model'])
  sys.stdout.flush()
  # TensorFlow's device probes write to fd 2; replayed if measuring fails.
  try:
    with quiet.captured_stderr_fd():
      return profile_lib.measure_profile(**flags)
  except (ValueError, RuntimeError) as e:  # a bad flag; the tasks failed
    raise UsageError('measuring the profile: %s' % e) from None


def _names(text, choices, what):
  if text == 'all':
    return list(choices)
  names = [n for n in text.split(',') if n]
  bad = [n for n in names if n not in choices]
  if bad or not names:
    raise UsageError(
      '--%s=%s: one or a comma list of %s, or all'
      % (what, text, ', '.join(choices))
    )
  return names


def _registered_specs(profile, target):
  """Every registered algorithm (nccl on GPU profiles only), and a/b pairs
  when workers have several devices."""
  on_gpu = profile.host.device.lower() in ('gpu', 'cuda', 'rocm')
  algs = [a for a in allreduce_spec.algorithm_names(cpu_only=not on_gpu)]
  specs = list(algs)
  if target.num_workers > 1 and target.devices_per_worker > 1:
    specs += ['%s/%s' % (a, b) for a in algs for b in algs if a != b]
  return specs


def strategies_for(args, profile, target, hardware=False):
  """The strategies asked for that run on `target` (explicit ones must)."""
  cluster = target.num_workers > 1 or target.num_ps > 0
  # The declared names for the shape (variable_mgr/catalog.py, no
  # TensorFlow); a manager the model does not know (independent: its towers
  # never exchange gradients) is left out. Horovod: the hardware model's.
  modelled = cost_model.MODELLED + (('horovod',) if hardware else ())
  allowed = list(catalog.names(in_cluster=cluster)) + ['horovod'] * hardware
  names = _names(args.variable_update, modelled, 'variable_update')
  explicit = args.variable_update != 'all'
  if args.all_reduce_spec == 'all':
    specs = [None] + _registered_specs(profile, target)
  else:
    specs = [s for s in args.all_reduce_spec.split(',') if s]
  compressors = _names(
    args.gradient_compression, cmc.catalog.NAMES, 'gradient_compression'
  )
  if args.powersgd_rank < 1:
    raise UsageError(
      '--powersgd_rank=%d: want an integer >= 1' % (args.powersgd_rank)
    )
  out = []
  for name in names:
    if name not in allowed and not explicit:
      continue
    for spec in _specs_of(name, specs, args.all_reduce_spec == 'all'):
      for comp in _compressors_of(name, compressors):
        out.append(_strategy(args, name, spec, compression=comp))
    if name == 'parameter_server' and cluster and not hardware:
      out.append(_strategy(args, name, None, sync=False))
  check = predict_hardware.check if hardware else cost_model.check_strategy
  return [s for s in out if _usable(s, target, profile, explicit, check)]


def _specs_of(name, specs, every):
  """The specs `name` takes from the list (None: its default)."""
  if name not in cost_model.WITH_SPEC or name == 'horovod':
    return [None]
  if catalog.any_of(name, catalog.collective_only):  # collective[#N] only
    mine = [s for s in specs if s and s.split('#')[0] == 'collective']
    return [None] if every or not mine else mine
  return specs


def _compressors_of(name, compressors):
  """The compressors `name` is priced with: the asked ones for a manager
  that all-reduces every gradient, none for the others."""
  if name in cmc.ALL_REDUCE_MANAGERS:
    return compressors
  return ['none']


def _strategy(args, name, spec, sync=True, compression='none'):
  packs = name in cost_model.PACKING
  return cost_model.Strategy(
    name,
    spec,
    args.gradient_repacking if packs else 0,
    sync,
    args.hybrid_threshold_bytes,
    args.agg_small_grads_max_bytes if packs else 0,
    args.agg_small_grads_max_group,
    gradient_compression=compression,
    powersgd_rank=args.powersgd_rank,
  )


def _usable(strategy, target, profile, explicit, check):
  try:
    check(strategy, target, profile)
  except (cost_model.StrategyError, ValueError) as e:
    if explicit and strategy.sync:
      raise UsageError(str(e)) from None
    return False
  return True


def _targets(args):
  try:
    return [
      target_lib.make_target(
        num_workers=n,
        devices_per_worker=args.devices_per_worker,
        num_ps=args.num_ps,
        link_mbits=args.link_mbits,
        link_latency_us=args.link_latency_us,
        topology=args.topology,
        colocated=args.colocated,
        cores_per_host=args.cores_per_host,
        worker_inter_op_threads=args.worker_inter_op_threads,
      )
      for n in _worker_counts(args.num_workers)
    ]
  except target_lib.TargetError as e:  # each field is a flag of this name
    raise UsageError('--%s' % e) from None


def print_table(profile, target, predictions, out=None):
  """The ranked table of one target and the margin to the runner-up."""
  out = out or sys.stdout
  run = profile.run
  print(
    'cluster %s (profile: %s %s batch %d on %s)'
    % (
      target.shape_text(),
      run.model,
      run.data_name,
      run.batch_size,
      profile.host.device,
    ),
    file=out,
  )
  print(
    '%4s %12s %21s  %s' % ('rank', 'images/sec', 'band', 'strategy'), file=out
  )
  ranked = sorted(predictions, key=lambda p: -p.images_per_sec)
  for rank, p in enumerate(ranked, 1):
    band = '%.1f - %.1f' % (p.low, p.high)
    print(
      '%4d %12.1f %21s  %s'
      % (rank, p.images_per_sec, band, p.strategy.label()),
      file=out,
    )
  print(margin_line(ranked), file=out)


def margin_line(ranked):
  """The best's margin over the runner-up, and whether the bands overlap."""
  if len(ranked) < 2:
    return 'best: %s (no runner-up)' % ranked[0].strategy.label()
  best, second = ranked[0], ranked[1]
  margin = (best.images_per_sec / second.images_per_sec - 1) * 100
  within = best.low <= second.high
  return 'best: %s, %.1f%% over %s (%s)' % (
    best.strategy.label(),
    margin,
    second.strategy.label(),
    'within the uncertainty: the bands overlap'
    if within
    else 'outside the uncertainty',
  )


def run(args):
  """Predicts every strategy on every target; returns the predictions."""
  outputs.check_file('json_out', args.json_out, creates_dirs=False)
  if args.topology not in target_lib.TOPOLOGIES:
    raise UsageError('--topology=%s: one of shared, switch' % args.topology)
  targets = _targets(args)
  cal = (
    cal_lib.load_calibration(args.calibration)
    if args.calibration
    else cal_lib.default_calibration()
  )
  profile = load_or_measure(args)
  hardware = predict_hardware.wanted(args, profile)
  if hardware:
    try:
      targets = predict_hardware.targets(args, [t.num_workers for t in targets])
    except hw_lib.HardwareError as e:  # each field is a flag of this name
      raise UsageError('--%s' % e) from None
  lines, compressions = [], {}
  for target in targets:
    strategies = strategies_for(args, profile, target, hardware)
    if not strategies:
      raise UsageError('no strategy asked for runs on %s' % target.shape_text())
    if hardware:
      preds = [predict_hardware.predict(profile, target, s) for s in strategies]
    else:
      preds = [cost_model.predict(profile, target, s, cal) for s in strategies]
    print_table(profile, target, preds)
    print()
    lines += [p.as_json() for p in preds]
    for p in preds:
      c = cmc.of_strategy(p.strategy)
      if c.compresses:
        compressions.setdefault(c, c.source(profile))
  if hardware:
    print('hardware model (closed forms); where its figures come from:')
    for line in targets[0].source_lines():
      print('  ' + line)
  else:
    print('test-bed model (loopback clusters); its calibration constants:')
    for line in cal.lines():
      print('  ' + line)
  if compressions:
    print("the compressors' compute:")
    for line in compressions.values():
      print('  ' + line)
  if args.json_out:
    with open(args.json_out, 'w', encoding='utf-8') as f:
      for line in lines:
        f.write(json.dumps(line, sort_keys=True) + '\n')
  return lines


def main(argv=None) -> int:
  """Entry point; bad input: one line on stderr, exit status 2."""
  try:
    run(parse_args(sys.argv[1:] if argv is None else argv))
  except (
    UsageError,
    target_lib.TargetError,
    profile_format.ProfileError,
    cal_lib.CalibrationError,
    cost_model.StrategyError,
    outputs.OutputError,
  ) as e:
    print('predict_scaling.py: error: %s' % e, file=sys.stderr)
    return 2
  except OSError as e:
    print('predict_scaling.py: error: %s' % e, file=sys.stderr)
    return 2
  return 0


if __name__ == '__main__':
  sys.exit(main())
