#!/usr/bin/env python3
"""What each gradient compressor buys and costs on a throttled local cluster.

  python scripts/compression_benchmark.py [--compressors=none,fp16,...]
      [--models=alexnet,resnet20] [--data_name=cifar10]
      [--links=0,100,25] [--workers=3]
      [--variable_updates=collective_all_reduce] [--batch_size=32]
      [--num_warmup_batches=3] [--num_batches=8] [--powersgd_rank=4]
      [--timeout=900] [--output=FILE.jsonl] [--markdown=FILE.md] [--predict]
  python scripts/compression_benchmark.py --table_from=FILE.jsonl
      [--markdown=FILE.md] [--predict]

For each model, link, variable manager and compressor (default: every one
the catalog declares, variable_mgr/compression/catalog.py; the registry
builds each), runs one cluster of
--workers local processes (scripts/launch_local_cluster.py), each worker one
tower on the CPU; a link of 0 is the unthrottled loopback, R > 0 limits the
tasks' shared link to R Mbit/s (tc tbf). Every cell appends one JSON line to
--output as it ends: the cell, the cluster's images/sec (worker:0's results
line, its 95% interval) and the bytes one replica hands the all-reduce per
step (variable_mgr/compression/catalog.wire_bytes of the model's gradients,
read from its profile in --profile_dir). At the end (or with --table_from,
from such a file, running nothing) prints the markdown table: per model and
compressor, bytes and images/sec at each link, each against none; with
--predict, a second table: each cell against the test-bed model's
prediction (scaling/model/cost_model.py, from the model's profile of the
same batch in --profile_dir), then where each compressor's compute figure
comes from (measured in the profile, or assumed).

Exit status: 0 when every cell ran, 1 when some failed (each failure is one
stderr line, the others still run), 2 for bad input.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import sys
import tempfile

from tf_cnn_benchmarks.cluster import thread_pools
from tf_cnn_benchmarks.commands import results_io as rio
from tf_cnn_benchmarks.platform import checkout
from tf_cnn_benchmarks.platform import json_input
from tf_cnn_benchmarks.scaling.model import cost_model
from tf_cnn_benchmarks.scaling.model import cost_model_compression
from tf_cnn_benchmarks.scaling.model import profile_format
from tf_cnn_benchmarks.scaling.model import target as target_lib
from variable_mgr.compression import catalog

LAUNCHER = os.path.join(checkout.ROOT, 'scripts', 'launch_local_cluster.py')
PROFILE_DIR = os.path.join(checkout.ROOT, 'results', 'profiles')
# Managers whose reduction a compressor changes, and their launcher flags.
MANAGERS = {
  'collective_all_reduce': ['--num_ps=0'],
  'distributed_all_reduce': ['--num_ps=0', '--controller'],
}
PROG = 'compression_benchmark.py'


def _csv(text):
  return [t.strip() for t in text.split(',') if t.strip()]


def parse_args(argv):
  """The script's options (bad input: one line, exit 2)."""
  parser = rio.OneLineParser(prog=PROG, description=__doc__.splitlines()[0])
  parser.add_argument('--compressors', default=','.join(list(catalog.NAMES)))
  parser.add_argument('--models', default='alexnet,resnet20')
  parser.add_argument('--data_name', default='cifar10')
  parser.add_argument('--links', default='0,100,25')
  parser.add_argument('--workers', type=int, default=3)
  parser.add_argument('--variable_updates', default='collective_all_reduce')
  parser.add_argument('--batch_size', type=int, default=32)
  parser.add_argument('--num_warmup_batches', type=int, default=3)
  parser.add_argument('--num_batches', type=int, default=8)
  parser.add_argument(
    '--powersgd_rank', type=int, default=catalog.DEFAULT_POWERSGD_RANK
  )
  parser.add_argument('--timeout', type=int, default=900)
  parser.add_argument('--profile_dir', default=PROFILE_DIR)
  parser.add_argument('--output', default=None, help='JSON lines, appended')
  parser.add_argument('--markdown', default=None, help='the table, written')
  parser.add_argument(
    '--table_from', default=None, help='JSON lines: print their table only'
  )
  parser.add_argument(
    '--predict',
    action='store_true',
    help='also the test-bed model against every measured cell',
  )
  args = parser.parse_args(argv)
  _check(parser, args)
  return args


def _check(parser, args) -> None:
  """One error line for the first bad value."""
  unknown = set(_csv(args.compressors)) - set(list(catalog.NAMES))
  if unknown or not _csv(args.compressors):
    parser.error(
      '--compressors: unknown %s; one of %s'
      % (', '.join(sorted(unknown)) or '(none)', ', '.join(list(catalog.NAMES)))
    )
  unknown = set(_csv(args.variable_updates)) - set(MANAGERS)
  if unknown or not _csv(args.variable_updates):
    parser.error(
      '--variable_updates: unknown %s; one of %s'
      % (', '.join(sorted(unknown)) or '(none)', ', '.join(MANAGERS))
    )
  try:
    links = [float(x) for x in _csv(args.links)]
  except ValueError:
    links = [-1.0]
  if not links or min(links) < 0:
    parser.error(
      '--links: expected Mbit/s >= 0 (0: loopback), got %r' % (args.links,)
    )
  args.link_list = links
  for name in ('workers', 'batch_size', 'num_batches', 'powersgd_rank'):
    if getattr(args, name) < 1:
      parser.error('--%s: expected an integer >= 1' % name)
  if args.workers < 2:
    parser.error('--workers: expected >= 2 (a cluster), got %d' % args.workers)
  if args.num_warmup_batches < 0:
    parser.error('--num_warmup_batches: expected an integer >= 0')
  if args.table_from and not os.path.isfile(args.table_from):
    parser.error('--table_from: no such file %s' % args.table_from)


# ---- bytes ------------------------------------------------------------------


def model_profile(profile_dir: str, model: str, data_name: str, batch=None):
  """The model's profile in --profile_dir (of this per-tower batch, when
  given); None when there is none."""
  pattern = os.path.join(profile_dir, '%s_%s_*.json' % (model, data_name))
  for path in sorted(glob.glob(pattern)):
    profile = profile_format.load_profile(path)
    if batch is None or profile.run.batch_size == batch:
      return profile
  return None


def model_gradients(profile_dir: str, model: str, data_name: str):
  """(shape, dtype) of the model's gradients from its profile; None when
  --profile_dir holds no profile of the model and data set."""
  profile = model_profile(profile_dir, model, data_name)
  if profile is None:
    return None
  return [(g.shape, g.dtype) for g in profile.gradients]


# ---- the prediction ---------------------------------------------------------


def predicted(profile, line) -> float:
  """The test-bed model's images/sec of a cell: the launcher's cluster
  (one shared link, colocated tasks whose workers split the profiled
  host's cores: --cluster_threads=auto) with the cell's compressor."""
  workers = line['workers']
  cores = profile.host.cpu_cores
  pools = thread_pools.host_pools({'worker': workers}, 'worker', 'auto', cores)
  target = target_lib.make_target(
    num_workers=workers,
    link_mbits=line['link_mbits'] or None,
    topology='shared',
    colocated=True,
    worker_inter_op_threads=pools.inter_op,
  )
  strategy = cost_model.Strategy(
    line['variable_update'],
    gradient_compression=line['gradient_compression'],
    powersgd_rank=line.get('powersgd_rank') or catalog.DEFAULT_POWERSGD_RANK,
  )
  return cost_model.predict(profile, target, strategy).images_per_sec


def slowed(profile, k: float):
  """`profile` with every CPU time k times as long: the step, its ready
  times, the apply and the compressors' measured work (or, not measured,
  their work priced at the apply's rate)."""
  c = profile.compute
  compute = dataclasses.replace(
    c,
    step_ms=c.step_ms * k,
    step_ms_p10=c.step_ms_p10 * k,
    step_ms_p90=c.step_ms_p90 * k,
    forward_ms=c.forward_ms * k,
    backward_ms=c.backward_ms * k,
  )
  grads = tuple(
    dataclasses.replace(g, ready_ms=g.ready_ms * k) for g in profile.gradients
  )
  a = profile.apply
  apply = dataclasses.replace(
    a,
    worker=dataclasses.replace(a.worker, ms_per_mb=a.worker.ms_per_mb * k),
    ps=dataclasses.replace(a.ps, ms_per_mb=a.ps.ms_per_mb * k),
  )
  return dataclasses.replace(
    profile,
    compute=compute,
    gradients=grads,
    apply=apply,
    compressors=_slowed_compressors(profile.compressors, k),
  )


def _slowed_compressors(costs, k: float):
  """The measured compressors' figures k times as long (None: None)."""
  if costs is None:
    return None
  per_step = {
    name: profile_format.CompressorCost(c.ms * k, c.ms_p10 * k, c.ms_p90 * k)
    for name, c in costs.per_step.items()
  }
  return dataclasses.replace(
    costs, per_step=per_step, baseline_ms=costs.baseline_ms * k
  )


def _loopback_none(lines, ln):
  """The measured loopback cell without compression of ln's model, or None."""
  for other in lines:
    if (
      other['model'] == ln['model']
      and other['variable_update'] == ln['variable_update']
      and other['gradient_compression'] == 'none'
      and not other['link_mbits']
    ):
      return other
  return None


def prediction_table(lines, profile_dir) -> list:
  """Measured against predicted, per cell whose model has a profile of the
  cell's batch (error: predicted / measured - 1): from the profile as it
  is, and with its CPU times k times as long, k the loopback uncompressed
  cell's predicted / measured images/sec (the run's own share of a shared
  machine's cores)."""
  out = [
    '| model | compressor | link | measured img/s | predicted | error '
    '| k | predicted, CPU x k | error |',
    '|---|---|---|---:|---:|---:|---:|---:|---:|',
  ]
  profiles = {}
  for ln in lines:
    key = (ln['model'], ln['data_name'], ln['batch_size'])
    if key not in profiles:
      profiles[key] = model_profile(profile_dir, *key)
    profile = profiles[key]
    if profile is None:
      continue
    guess = predicted(profile, ln)
    cells = [
      ln['model'],
      ln['gradient_compression'],
      _link_name(ln['link_mbits']),
      '%.2f' % ln['images_per_sec'],
      '%.2f' % guess,
      '%+.0f%%' % ((guess / ln['images_per_sec'] - 1) * 100),
    ]
    ref = _loopback_none(lines, ln)
    if ref is None:
      cells += ['-', '-', '-']
    else:
      k = predicted(profile, ref) / ref['images_per_sec']
      scaled = predicted(slowed(profile, k), ln)
      cells += [
        '%.2f' % k,
        '%.2f' % scaled,
        '%+.0f%%' % ((scaled / ln['images_per_sec'] - 1) * 100),
      ]
    out.append('| %s |' % ' | '.join(cells))
  return out


def compute_sources(lines, profile_dir) -> list:
  """'- model: compressor compute: ...' per model and compressor of the
  cells with a profile: measured in the profile, or assumed (and why)."""
  out, seen = [], set()
  for ln in lines:
    compression = cost_model_compression.Compression(
      ln['gradient_compression'],
      ln.get('powersgd_rank') or catalog.DEFAULT_POWERSGD_RANK,
    )
    key = (ln['model'], ln['data_name'], ln['batch_size'], compression)
    if not compression.compresses or key in seen:
      continue
    seen.add(key)
    profile = model_profile(profile_dir, *key[:3])
    if profile is not None:
      out.append('- %s: %s' % (ln['model'], compression.source(profile)))
  return out


# ---- the runs ---------------------------------------------------------------


def cluster_argv(args, model, manager, compressor, link) -> list:
  """The launcher's command line of one cell."""
  argv = [
    sys.executable,
    LAUNCHER,
    '--num_workers=%d' % args.workers,
    '--timeout=%d' % args.timeout,
    *MANAGERS[manager],
  ]
  if link > 0:
    argv.append('--link_mbits=%g' % link)
  return argv + [
    '--',
    '--device=cpu',
    '--num_gpus=1',
    '--model=%s' % model,
    '--data_name=%s' % args.data_name,
    '--batch_size=%d' % args.batch_size,
    '--num_batches=%d' % args.num_batches,
    '--num_warmup_batches=%d' % args.num_warmup_batches,
    '--display_every=1000',
    '--peak_tflops_per_device=none',
    '--variable_update=%s' % manager,
    '--gradient_compression=%s' % compressor,
    '--powersgd_rank=%d' % args.powersgd_rank,
  ]


def run_cell(args, cell, gradients, result_file) -> dict:
  """One cell's JSON line (raises RuntimeError when the cluster failed)."""
  argv = cluster_argv(
    args,
    cell['model'],
    cell['variable_update'],
    cell['gradient_compression'],
    cell['link_mbits'],
  )
  label = '%(model)s %(variable_update)s %(gradient_compression)s ' % cell
  label += 'link %g' % cell['link_mbits']
  records = rio.run_for_records(argv, result_file, args.timeout + 60, label)
  record = records[0][1]
  spread = record.get('images_per_sec_spread') or {}
  line = dict(cell)
  line.update(
    images_per_sec=record['images_per_sec'],
    ci95_low=spread.get('ci95_low'),
    ci95_high=spread.get('ci95_high'),
    wire_bytes_per_replica=(
      catalog.wire_bytes(
        cell['gradient_compression'], gradients, args.powersgd_rank
      )
      if gradients
      else None
    ),
    cpu_model=record['env']['cpu_model'],
  )
  return line


def cells(args):
  """Every cell, none first in each group (the table's reference)."""
  names = _csv(args.compressors)
  names.sort(key=lambda n: n != 'none')
  for model in _csv(args.models):
    for manager in _csv(args.variable_updates):
      for link in args.link_list:
        for name in names:
          yield {
            'model': model,
            'data_name': args.data_name,
            'variable_update': manager,
            'link_mbits': link,
            'gradient_compression': name,
            'powersgd_rank': (
              args.powersgd_rank if name == 'powersgd' else None
            ),
            'workers': args.workers,
            'batch_size': args.batch_size,
            'num_warmup_batches': args.num_warmup_batches,
            'num_batches': args.num_batches,
          }


def run_grid(args) -> tuple:
  """(lines, failures) of every cell; each line appended to --output."""
  lines, failures = [], 0
  grads = {}
  with tempfile.TemporaryDirectory() as tmp:
    result_file = os.path.join(tmp, 'r.jsonl')
    for cell in cells(args):
      model = cell['model']
      if model not in grads:
        grads[model] = model_gradients(args.profile_dir, model, args.data_name)
      try:
        line = run_cell(args, cell, grads[model], result_file)
      except (RuntimeError, OSError) as e:
        print('%s: %s' % (PROG, e), file=sys.stderr, flush=True)
        failures += 1
        continue
      lines.append(line)
      print(json.dumps(line), flush=True)
      if args.output:
        with open(args.output, 'a') as f:
          f.write(json.dumps(line) + '\n')
  return lines, failures


# ---- the table --------------------------------------------------------------


def _link_name(link) -> str:
  return 'loopback' if not link else '%g Mbit/s' % link


def _ratio(value, reference) -> str:
  if value is None or not reference:
    return ''
  return ' (%.2fx)' % (value / reference)


def table(lines) -> list:
  """The markdown table: per model, manager and compressor, the bytes one
  replica sends per step and images/sec at each link, each against none."""
  links = sorted({ln['link_mbits'] for ln in lines}, key=lambda x: (x != 0, -x))
  groups = {}
  for ln in lines:
    key = (ln['model'], ln['variable_update'], ln['gradient_compression'])
    groups.setdefault(key, {})[ln['link_mbits']] = ln
  head = ['model', 'manager', 'compressor', 'MB/step/replica']
  head += ['img/s %s' % _link_name(x) for x in links]
  out = [
    '| %s |' % ' | '.join(head),
    '|---|---|---|%s' % ('---:|' * (1 + len(links))),
  ]
  for (model, manager, name), by_link in groups.items():
    none = groups.get((model, manager, 'none'), {})
    any_line = next(iter(by_link.values()))
    ref = next(iter(none.values()), {}).get('wire_bytes_per_replica')
    if name == 'none':  # the reference: no ratio
      none, ref = {}, None
    mb = any_line.get('wire_bytes_per_replica')
    cells_ = [
      model,
      manager,
      name,
      '-' if mb is None else '%.3f%s' % (mb / 1e6, _ratio(mb, ref)),
    ]
    for link in links:
      got = by_link.get(link)
      if got is None:
        cells_.append('-')
        continue
      ips = got['images_per_sec']
      ref_ips = none.get(link, {}).get('images_per_sec')
      cells_.append('%.2f%s' % (ips, _ratio(ips, ref_ips)))
    out.append('| %s |' % ' | '.join(cells_))
  return out


def read_lines(path) -> list:
  """The JSON lines of a --output file (InputError naming a bad line)."""
  lines = []
  with open(path) as f:
    for number, text in enumerate(f, 1):
      if not text.strip():
        continue
      where = '--table_from %s:%d' % (path, number)
      try:
        line = json_input.loads(text, where)
        line['model'], line['link_mbits'], line['images_per_sec']
      except json_input.JsonInputError as e:
        raise rio.InputError(str(e)) from None
      except (KeyError, TypeError):
        raise rio.InputError('%s: not a line of this script' % where) from None
      lines.append(line)
  return lines


def main(argv=None) -> int:
  """Runs the grid (or reads --table_from) and prints the table."""
  args = parse_args(sys.argv[1:] if argv is None else argv)
  failures = 0
  if args.table_from:
    lines = read_lines(args.table_from)
  else:
    lines, failures = run_grid(args)
  rows = table(lines)
  if args.predict:
    rows += [''] + prediction_table(lines, args.profile_dir)
    rows += [''] + compute_sources(lines, args.profile_dir)
  print('\n'.join(rows))
  if args.markdown:
    with open(args.markdown, 'w') as f:
      f.write('\n'.join(rows) + '\n')
  return 1 if failures or not lines else 0


if __name__ == '__main__':
  sys.exit(rio.run_main(main, PROG))
