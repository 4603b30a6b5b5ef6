#!/usr/bin/env python3
"""Checks the scaling predictor against real clusters on this machine.

  python -m lab.scripts.validate_predictor [--models=trivial,lenet,resnet20]
      [--workers=2] [--ps=1] [--link_mbits=none,100,25]
      [--topologies=shared] [--strategies=parameter_server,...,auto]
      [--repeats=3] [--num_batches=20] [--out_prefix=results/...]
      [--profile_dir=results/profiles] [--dry_run] [--resume]
      [--report_only [--repredict | --pool=A.jsonl,B.jsonl,...]]

Runs every cell of the grid (model x workers x ps x link x topology x
strategy) as a real cluster of local processes through
scripts/launch_local_cluster.py, --repeats times in passes (every cell once,
then every cell again, so that a slow drift of the machine's speed spreads
over all cells instead of landing on a few), and predicts it from the
model's profile (PROFILE_DIR/<model>_<data>_b<batch>_cpu.json, measured
separately by scripts/profile_host.py) with the cost model (every task
colocated on this host's cores), the Paleo-style and the Daydream-style
baselines. Writes OUT_PREFIX.jsonl (one line per cell, after the last pass;
the runs so far are kept in OUT_PREFIX.partial.json, which --resume
continues) and OUT_PREFIX.md (the figures, from the whole jsonl).

ps: the strategies that need a ps task (parameter_server,
distributed_replicated, hybrid) run with each --ps value > 0; the all-reduce
ones (distributed_all_reduce, collective_all_reduce) with 0 ps only; `auto`
(--variable_update=auto) with the ps tasks the launcher picks, and is scored
by its pick's regret against the group's measured best (_validation_auto.py);
`auto_trials` the same with the launcher's --auto_trials (close calls
measured briefly first), counted apart.
Scored: a cell with >= 3 repeats whose spread (max - min) / median is at most
10%, and not a calibration cell (the rule is printed). --resume skips the
cells already in the jsonl. --report_only rewrites the md from the jsonl;
with --repredict it first predicts every record again from --profile_dir
with the current cost model (the measured figures stay as they are); with
--pool it first writes OUT_PREFIX.jsonl from several grids' jsonl files,
each record naming its file as its `set`, so that a cluster measured in
two grids (two sessions, two paces of the machine) is two groups.
Bad flags: one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from lab.scripts import validation_auto as va
from lab.scripts import validation_metrics as vm
from lab.scripts import validation_report as vr
from tf_cnn_benchmarks.platform import checkout
from tf_cnn_benchmarks.platform import json_input
from tf_cnn_benchmarks.reporting import result_lines

REPO_ROOT = checkout.ROOT

LAUNCHER = os.path.join(REPO_ROOT, 'scripts', 'launch_local_cluster.py')

DATA_NAME = {'lenet': 'imagenet', 'resnet50': 'imagenet'}  # else cifar10
NEEDS_PS = ('parameter_server', 'distributed_replicated', 'hybrid')
STRATEGIES = (
  'parameter_server',
  'distributed_replicated',
  'distributed_all_reduce',
  'collective_all_reduce',
  'hybrid',
  *va.KINDS,
)
TOPOLOGIES = ('shared', 'switch')
PROG = 'validate_predictor.py'


class UsageError(ValueError):
  """A bad flag: one line on stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
  def error(self, message):
    raise UsageError(message)


def _ints(text, flag, minimum):
  try:
    values = [int(v) for v in text.split(',')]
  except ValueError:
    raise UsageError(
      '--%s=%s: want integers, e.g. 2,3' % (flag, text)
    ) from None
  if any(v < minimum for v in values):
    raise UsageError('--%s=%s: want integers >= %d' % (flag, text, minimum))
  return values


def _links(text):
  out = []
  for v in text.split(','):
    if v.lower() in ('none', '0'):
      out.append(None)
      continue
    try:
      rate = float(v)
    except ValueError:
      rate = -1.0
    if not rate > 0:
      raise UsageError(
        "--link_mbits=%s: want Mbit/s > 0, or 0 or 'none' (unthrottled)" % text
      )
    out.append(rate)
  return out


def _names(text, flag, choices):
  names = [v for v in text.split(',') if v]
  bad = [v for v in names if v not in choices]
  if bad or not names:
    raise UsageError(
      '--%s=%s: one or more of %s' % (flag, text, ', '.join(choices))
    )
  return names


# (name, default, help) of the flags with a value, then the switches.
_VALUE_FLAGS = (
  ('models', 'trivial,lenet,resnet20',
   'models, comma-separated (each needs its profile)'),
  ('workers', '2', 'worker counts (>= 2), e.g. 2,3'),
  ('ps', '1', 'ps task counts of the strategies that need ps tasks, e.g. 1,2'),
  ('link_mbits', 'none,100,25',
   "link rates in Mbit/s; 'none' or 0: unthrottled"),
  ('topologies', 'shared', 'shared, switch or both'),
  ('strategies', 'parameter_server,collective_all_reduce',
   'one or more of ' + ', '.join(STRATEGIES)),
  ('repeats', '3', 'runs of each cell (in passes)'),
  ('num_batches', '20', 'timed steps of each run'),
  ('num_warmup_batches', '5', 'untimed steps before them'),
  ('batch_size', '32', 'per tower; picks the profile file'),
  ('timeout', '900', 'seconds a run may take'),
  ('out_prefix', 'lab/results/validation/predictor_validation',
   'writes OUT_PREFIX.jsonl and OUT_PREFIX.md'),
  ('profile_dir', 'results/profiles',
   'where <model>_<data>_b<batch>_cpu.json are'),
  ('pool', '',
   'with --report_only: jsonl files of grids, comma-separated, pooled into '
   'OUT_PREFIX.jsonl (each record with its file as its set)'),
)  # fmt: skip
_SWITCHES = (
  ('dry_run', 'print the grid and its predictions; run nothing'),
  ('resume', 'keep the jsonl (and partial runs); run only what is missing'),
  ('report_only', 'rewrite the md from the jsonl; run nothing'),
  ('repredict', 'with --report_only: predict every record again first'),
)


def parse_args(argv):
  """The options, checked (UsageError names the flag)."""
  p = _Parser(prog=PROG, description=__doc__.splitlines()[0])
  for name, default, text in _VALUE_FLAGS:
    p.add_argument('--' + name, default=default, help=text)
  for name, text in _SWITCHES:
    p.add_argument('--' + name, action='store_true', help=text)
  args = p.parse_args(argv)
  if args.repredict and not args.report_only:
    raise UsageError('--repredict: only with --report_only')
  args.pool = [f for f in args.pool.split(',') if f]
  if args.pool and (args.repredict or not args.report_only):
    raise UsageError(
      '--pool: only with --report_only, without --repredict (re-predict '
      'each grid from its own profiles first)'
    )
  for name in args.pool:
    if not os.path.isfile(name):
      raise UsageError('--pool: no file %s' % name)
  args.models = [m for m in args.models.split(',') if m]
  if not args.models:
    raise UsageError('--models: want one or more model names')
  args.workers = _ints(args.workers, 'workers', 2)
  args.ps = _ints(args.ps, 'ps', 0)
  args.link_mbits = _links(args.link_mbits)
  args.topologies = _names(args.topologies, 'topologies', TOPOLOGIES)
  args.strategies = _names(args.strategies, 'strategies', STRATEGIES)
  for flag in ('repeats', 'num_batches', 'batch_size', 'timeout'):
    setattr(args, flag, _ints(getattr(args, flag), flag, 1)[0])
  args.num_warmup_batches = _ints(
    args.num_warmup_batches, 'num_warmup_batches', 0
  )[0]
  return args


def profile_path(args, model, batch_size=None) -> str:
  """The profile file of `model` at `batch_size` (default: the grid's)."""
  return os.path.join(
    args.profile_dir,
    '%s_%s_b%d_cpu.json'
    % (model, DATA_NAME.get(model, 'cifar10'), batch_size or args.batch_size),
  )


def _ps_values(args, strategy) -> list:
  """The ps counts `strategy` runs with: --ps values > 0, or 0 (all-reduce)."""
  if strategy in NEEDS_PS:
    return sorted({p for p in args.ps if p > 0})
  if strategy in va.KINDS:
    return [None]  # the launcher picks
  return [0]


def grid(args) -> list:
  """Every cell of the grid, in run order (a list of dicts)."""
  cells = []
  for model in args.models:
    for workers in args.workers:
      for link in args.link_mbits:
        for topology in args.topologies:
          for strategy in args.strategies:
            for ps in _ps_values(args, strategy):
              cells.append(
                {
                  'model': model,
                  'num_workers': workers,
                  'num_ps': ps,
                  'link_mbits': link,
                  'topology': topology,
                  'strategy': strategy,
                  'batch_size': args.batch_size,
                  'num_batches': args.num_batches,
                  'num_warmup_batches': args.num_warmup_batches,
                  'split_cores': True,  # the launcher's tasks_colocated
                }
              )
  return cells


def cell_id(cell) -> str:
  """A stable key of a cell (what --resume compares)."""
  keys = ('model', 'num_workers', 'num_ps', 'link_mbits', 'topology')
  keys += ('strategy', 'batch_size')
  return json.dumps({k: cell[k] for k in keys}, sort_keys=True)


def cell_text(cell) -> str:
  """'lenet 2w+1ps 100Mbit/s shared parameter_server'."""
  link = cell['link_mbits']
  return '%s %dw+%sps %s %s %s' % (
    cell['model'],
    cell['num_workers'],
    '?' if cell['num_ps'] is None else cell['num_ps'],
    'unthrottled' if link is None else '%gMbit/s' % link,
    cell['topology'],
    cell['strategy'],
  )


def predict(args, profiles, cell) -> dict:
  """{'model': {...}, 'paleo': {...}, 'daydream': {...}} for one cell
  ({'auto': {...}}, the launcher's pick, for an `auto` cell)."""
  from tf_cnn_benchmarks.scaling.auto import auto
  from tf_cnn_benchmarks.scaling.auto import auto_launch
  from tf_cnn_benchmarks.scaling.model import baselines
  from tf_cnn_benchmarks.scaling.model import cost_model
  from tf_cnn_benchmarks.scaling.model import target as target_lib

  if va.is_auto(cell):
    path = profile_path(args, cell['model'], cell['batch_size'])
    return va.predict(path, task_flags(cell), cell)
  profile = profiles[cell['model'], cell['batch_size']]
  # The launcher's tasks: their servers' threads as it places them.
  cluster = auto_launch.stand_in_cluster(
    cell['num_workers'], cell['num_ps'], False, cell['topology']
  )
  target = target_lib.make_target(
    num_workers=cell['num_workers'],
    num_ps=cell['num_ps'],
    link_mbits=cell['link_mbits'],
    topology=cell['topology'],
    colocated=True,
    worker_inter_op_threads=auto.worker_inter_op_threads(
      va.pools_overrides(cell), cluster, profile.host.cpu_cores
    ),
  )
  strategy = cost_model.Strategy(cell['strategy'])
  pred = cost_model.predict(profile, target, strategy)
  return {
    'model': {
      'images_per_sec': round(pred.images_per_sec, 3),
      'low': round(pred.low, 3),
      'high': round(pred.high, 3),
    },
    'paleo': {
      'images_per_sec': round(
        baselines.paleo_images_per_sec(profile, target, strategy), 3
      )
    },
    'daydream': {
      'images_per_sec': round(
        baselines.daydream_images_per_sec(profile, target, strategy), 3
      )
    },
  }


def task_flags(cell) -> list:
  """The benchmark flags every task of `cell` gets (but --result_file)."""
  return [
    '--device=cpu',
    '--model=%s' % cell['model'],
    '--data_name=%s' % DATA_NAME.get(cell['model'], 'cifar10'),
    '--batch_size=%d' % cell['batch_size'],
    '--num_batches=%d' % cell['num_batches'],
    '--num_warmup_batches=%d' % cell.get('num_warmup_batches', 5),
    '--display_every=1000',
    '--peak_tflops_per_device=none',
    '--num_gpus=1',
    '--variable_update=%s' % ('auto' if va.is_auto(cell) else cell['strategy']),
  ]


def cluster_command(args, cell, result_file) -> list:
  """The launcher command of one run of `cell`."""
  argv = [
    sys.executable,
    LAUNCHER,
    '--num_workers=%d' % cell['num_workers'],
    '--timeout=%d' % args.timeout,
    '--topology=%s' % cell['topology'],
  ]
  if cell['num_ps'] is not None:  # None: auto, the launcher picks
    argv.append('--num_ps=%d' % cell['num_ps'])
  if cell['link_mbits'] is not None:
    argv.append('--link_mbits=%g' % cell['link_mbits'])
  argv += va.launcher_flags(cell)
  flags = task_flags(cell)
  if va.is_auto(cell):
    path = profile_path(args, cell['model'], cell['batch_size'])
    flags.append('--scaling_profile=%s' % path)
  return argv + ['--'] + flags + ['--result_file=%s' % result_file]


def run_once(args, cell) -> dict:
  """Runs `cell` once as a real cluster: {'images_per_sec': total, and for
  an auto cell 'auto_pick': what it ran}."""
  from tf_cnn_benchmarks.reporting import result_lines

  result_file = '%s.run.jsonl' % args.out_prefix
  if os.path.exists(result_file):
    os.remove(result_file)
  argv = cluster_command(args, cell, os.path.abspath(result_file))
  proc = subprocess.run(
    argv,
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=args.timeout + 60,
  )
  if proc.returncode != 0 or not os.path.exists(result_file):
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
    raise RuntimeError('exit %d: %s' % (proc.returncode, tail))
  result = result_lines.read_json_lines(result_file)[0][1]
  os.remove(result_file)
  out = {'images_per_sec': float(result['images_per_sec'])}
  if va.is_auto(cell):
    out['auto_pick'] = va.pick_of(result)
  return out


def machine_text() -> str:
  """This CPU as figures must name it: the model, cores, and the flags that
  change its speed ('AMD EPYC, 2 cores, avx2'; one model name comes with
  AVX2 only or with AVX-512)."""
  from tf_cnn_benchmarks.platform import cpu_features

  return '%s, %d cores, %s' % (
    cpu_features.cpu_model(),
    os.cpu_count() or 0,
    ' '.join(cpu_features.peak_flags()) or 'no AVX2',
  )


def record_of(cell, runs, error=None) -> dict:
  """The cell's record from its runs ({'images_per_sec', 'load', ...}):
  repeats, median, scored or why not (no predictions yet)."""
  measured = [round(r['images_per_sec'], 3) for r in runs]
  loads = [x for r in runs for x in r['load']]
  record = {
    'cell': cell,
    'measured': measured,
    'measured_median': statistics.median(measured) if measured else None,
    'spread': round(vm.spread(measured), 4) if measured else None,
    'load_average': [min(loads), max(loads)] if loads else [],
    'machine': machine_text(),
  }
  picks = [r['auto_pick'] for r in runs if r.get('auto_pick')]
  if picks:
    record['auto_pick'] = picks[-1]
    record['auto_picks'] = [va.pick_text(p) for p in picks]
  if error:
    record['error'] = error
  reason = 'run failed: %s' % error if error else None
  reason = reason or vm.unscored_reason(cell, measured)
  record['scored'] = reason is None
  if reason:
    record['unscored_reason'] = reason
  return record


def run_and_time(args, cell, run) -> dict:
  """One run of `cell` with the load average before and after it."""
  before = os.getloadavg()[0]
  value = run(args, cell)
  out = value if isinstance(value, dict) else {'images_per_sec': value}
  out['load'] = [round(before, 2), round(os.getloadavg()[0], 2)]
  return out


def measure_in_passes(args, cells, run, partial, out) -> list:
  """Runs every cell once per pass, --repeats passes; a cell whose run
  fails runs no more. `partial` ({cell id: {'runs': [...], 'error'}}) holds
  runs already made (--resume) and is saved after each run. The records."""
  path = args.out_prefix + '.partial.json'
  for rep in range(args.repeats):
    for i, cell in enumerate(cells):
      state = partial.setdefault(cell_id(cell), {'runs': []})
      if state.get('error') or len(state['runs']) > rep:
        continue
      try:
        state['runs'].append(run_and_time(args, cell, run))
        note = '%.1f' % state['runs'][-1]['images_per_sec']
      except (RuntimeError, subprocess.TimeoutExpired) as e:
        state['error'] = str(e).splitlines()[0][:300]
        note = 'failed: ' + state['error']
      with open(path, 'w', encoding='utf-8') as f:
        json.dump(partial, f, sort_keys=True)
      print(
        '  pass %d/%d cell %d/%d %s: %s'
        % (rep + 1, args.repeats, i + 1, len(cells), cell_text(cell), note),
        file=out,
      )
      out.flush()
  states = [partial[cell_id(cell)] for cell in cells]
  return [
    record_of(cell, state['runs'], state.get('error'))
    for cell, state in zip(cells, states)
  ]


def read_records(path) -> list:
  """The records of the jsonl at `path` ([] if there is none)."""
  if not os.path.exists(path):
    return []
  try:
    return [record for _, record in result_lines.read_json_lines(path)]
  except result_lines.ResultsFileError as e:  # names the file and line
    raise UsageError(str(e)) from None


def pooled_records(paths) -> list:
  """The records of several grids' jsonl files, each with its `set`: the
  file's name without .jsonl (a record pooled before keeps its own)."""
  out = []
  for path in paths:
    name = os.path.basename(path).removesuffix('.jsonl')
    try:
      records = read_records(path)
    except UsageError as e:
      raise UsageError('--pool: %s' % e) from None
    out.extend(dict(r, set=r.get('set') or name) for r in records)
  return out


def load_profiles(args, cells=None) -> dict:
  """{(model, batch size): Profile} of every model of the grid (or of
  `cells`, e.g. the records a report is made of)."""
  from tf_cnn_benchmarks.scaling.model import profile_format

  keys = (
    {(m, args.batch_size) for m in args.models}
    if cells is None
    else {(c['model'], c['batch_size']) for c in cells}
  )
  out = {}
  for model, batch in sorted(keys):
    path = profile_path(args, model, batch)
    if not os.path.exists(path):
      raise UsageError(
        '--models=%s: no profile %s (measure it with scripts/profile_host.py, '
        'or give --profile_dir)' % (model, path)
      )
    try:
      out[model, batch] = profile_format.load_profile(path)
    except profile_format.ProfileError as e:
      raise UsageError(str(e)) from None
  return out


def header_lines(records, args) -> list:
  """What the md says before the tables: the machine, the rules."""
  loads = [x for r in records for x in r.get('load_average', [])]
  load = (
    'load average (1 min) during the runs: %.1f-%.1f, median %.1f'
    % (min(loads), max(loads), statistics.median(loads))
    if loads
    else 'no runs yet'
  )
  machines = sorted({r['machine'] for r in records if r.get('machine')})
  where = args.profile_dir
  if args.pool:  # each set was predicted from its own profiles
    where = "each pooled set's directory (its own md names it)"
  return [
    'Real clusters of local processes on this machine (2 cores, every task',
    'colocated), through scripts/launch_local_cluster.py, against the cost',
    'model (`colocated` target) and the two naive baselines, each predicted',
    'from the profiles in %s. Made by `lab/scripts/validate_predictor.py`.'
    % where,
    '',
    '- Machine: %s.'
    % ('; '.join(machines) or 'not in the records (before 2026-11-27)'),
    "- %s (2 cores; the cluster's own tasks count in it: a cluster alone"
    ' shows about its task count).' % load.capitalize(),
    '- Not scored: %s; cells whose repeats spread (max-min)/median over'
    ' %.0f%%; cells with fewer than %d repeats.'
    % (vm.CALIBRATION_RULE, 100 * vm.MAX_SPREAD, vm.MIN_REPEATS),
    '- Error: |predicted - measured median| / measured median. Regret: the'
    ' share of the measured best lost by running the predicted best, per'
    ' group of >= 2 scored strategies. tau: Kendall tau-b per group (an'
    ' all-tied prediction: undefined, "-", counted 0 in the mean); two'
    ' strategies whose repeats overlap ([min, max]) are tied in the measured'
    ' order, as the measurement does not order them, and a group whose'
    ' strategies all tie so is left out of the mean; "strict" orders every'
    ' measured median, however close.',
  ]


def write_report(args, records) -> str:
  """Writes OUT_PREFIX.md from `records`; returns its path."""
  path = args.out_prefix + '.md'
  with open(path, 'w', encoding='utf-8') as f:
    f.write(vr.markdown(records, header_lines(records, args)))
  return path


def _prediction_line(cell, predicted, skip) -> str:
  if va.AUTO in predicted:
    a = predicted[va.AUTO]
    return '%-58s picks %s with %d ps: predicted %8.1f (%.1f-%.1f)%s' % (
      cell_text(cell),
      va.pick_text(a),
      a['num_ps'],
      a['images_per_sec'],
      a['low'],
      a['high'],
      skip,
    )
  m = predicted['model']
  return '%-58s predicted %8.1f (%.1f-%.1f) paleo %8.1f daydream %8.1f%s' % (
    cell_text(cell),
    m['images_per_sec'],
    m['low'],
    m['high'],
    predicted['paleo']['images_per_sec'],
    predicted['daydream']['images_per_sec'],
    skip,
  )


def repredict(args, profiles, records) -> list:
  """The records with every prediction made again (current model)."""
  return [
    dict(r, predicted=predict(args, profiles, r['cell'])) for r in records
  ]


def read_partial(args) -> dict:
  """The runs a stopped grid made (OUT_PREFIX.partial.json), or {}."""
  path = args.out_prefix + '.partial.json'
  if not os.path.exists(path):
    return {}
  try:
    return json_input.load_file(path)
  except (OSError, json_input.JsonInputError) as e:
    raise UsageError('--resume: %s' % e) from None


def run_grid(args, run=run_once, out=sys.stdout) -> list:
  """Runs (or with --dry_run prints) the grid; returns the records."""
  path = args.out_prefix + '.jsonl'
  if args.pool:  # --report_only's input: the grids' records, pooled
    records = pooled_records(args.pool)
    write_records(path, records)
  elif args.resume or args.report_only:
    records = read_records(path)
  else:
    records = []
  if args.report_only:
    if args.repredict:
      cells = [r['cell'] for r in records]
      records = repredict(args, load_profiles(args, cells), records)
      write_records(path, records)
    write_report(args, records)
    return records
  profiles = load_profiles(args)
  done = {cell_id(r['cell']) for r in records}
  cells = grid(args)
  print('rule: %s' % vm.CALIBRATION_RULE, file=out)
  print('grid: %d cells x %d repeats' % (len(cells), args.repeats), file=out)
  predicted = {}
  for i, cell in enumerate(cells):
    mine = predicted[cell_id(cell)] = predict(args, profiles, cell)
    skip = ' [calibration: not scored]' if vm.is_calibration_cell(cell) else ''
    if cell_id(cell) in done:
      skip += ' [done: skipped]'
    print(
      'cell %d/%d: %s'
      % (i + 1, len(cells), _prediction_line(cell, mine, skip)),
      file=out,
    )
  out.flush()
  if args.dry_run:
    return records
  partial = read_partial(args) if args.resume else {}
  todo = [c for c in cells if cell_id(c) not in done]
  for record in measure_in_passes(args, todo, run, partial, out):
    record['predicted'] = predicted[cell_id(record['cell'])]
    records.append(record)
    print(
      '%s: measured %s median %s %s'
      % (
        cell_text(record['cell']),
        record['measured'],
        record['measured_median'],
        'scored' if record['scored'] else record['unscored_reason'],
      ),
      file=out,
    )
  write_records(path, records)
  if os.path.exists(args.out_prefix + '.partial.json'):
    os.remove(args.out_prefix + '.partial.json')
  write_report(args, records)
  return records


def write_records(path, records) -> None:
  """Writes `records` as the jsonl at `path` (one line each)."""
  with open(path, 'w', encoding='utf-8') as f:
    for r in records:
      f.write(json.dumps(r, sort_keys=True) + '\n')


def main(argv=None) -> int:
  """Entry point; bad input: one line on stderr, exit status 2."""
  try:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from tf_cnn_benchmarks.platform import quiet

    with quiet.captured_stderr_fd():
      import variable_mgr  # noqa: F401

      variable_mgr.load_managers()  # TensorFlow loads here
    run_grid(args)
  except UsageError as e:
    print('%s: error: %s' % (PROG, e), file=sys.stderr)
    return 2
  return 0


if __name__ == '__main__':
  sys.exit(main())
