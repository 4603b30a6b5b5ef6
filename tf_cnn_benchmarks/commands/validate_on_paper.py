#!/usr/bin/env python3
"""Score the hardware model on published scaling tables (results/published).

  python scripts/validate_on_paper.py [--tables=results/published]
      [--gradients=results/gradients] [--report=FILE.md]
      [--rows=FILE.jsonl]

For every row of every table: a paper profile made from the table's own
1-GPU figure (cost_model_paper.paper_profile, the function behind
`profile_host.py --paper`, with the model's gradient list read from
--gradients: no TensorFlow), the row's strategy predicted on the row's
hardware (hardware_model.py), and the error in scaling efficiency in
points: efficiency = images/sec / (N x the 1-GPU images/sec), predicted
against published. The same for the two naive baselines (baselines.py).
Where a table compares strategies at one GPU count, whether the predicted
order is the published one. Prints the summary; --report writes it as
Markdown, --rows one JSON line per scored row.

How a row becomes a target (each rule a fact of the hardware or of the
software that ran, not fitted): HARDWARE_RULES below.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from tf_cnn_benchmarks.reporting import outputs
from tf_cnn_benchmarks.scaling import published
from tf_cnn_benchmarks.scaling.model import baselines
from tf_cnn_benchmarks.scaling.model import cost_model
from tf_cnn_benchmarks.scaling.model import hardware as hw_lib
from tf_cnn_benchmarks.scaling.model import hardware_model
from tf_cnn_benchmarks.scaling.model import target as target_lib
from tf_cnn_benchmarks.scaling.profile import cost_model_paper

# Rules that turn a published row's hardware into a HardwareTarget.
HARDWARE_RULES = (
  'intra link: the table names it (pcie: PCIe 3.0, or 4.0 for Ampere '
  'cards, whose datasheets say PCIe 4.0 x16); not named: SXM3 V100 and '
  'SXM4 A100 are NVSwitch boards (HGX-2 / HGX A100), any other card PCIe '
  'of its generation; an NVLink bridge joins two cards only, so a ring '
  'over more crosses PCIe',
  "GPUs per PCIe link to host memory: hardware.csv's gpus_per_host_link "
  "(read in the GPUs' bus ids of the table's own logs); else 2 on K80 (two "
  'GPUs on one board behind its PCIe switch, K80 datasheet) and on DGX-1 '
  '(a PCIe switch per pair of GPUs, DGX-1 whitepaper), else 1',
  'network: InfiniBand and Cray Aries rdma, Ethernet tcp; rate from '
  'hardware.csv; unstated: 10 Gbit/s assumed (Piz Daint: no source read); '
  "the ps managers' bytes go by gRPC, TCP even on an RDMA network "
  '(tf_cnn_benchmarks --server_protocol defaults to grpc, and the CSCS '
  'scripts keep it: e-bug/distributed-tensorflow-benchmarks@a0d3d61 '
  'google-benchmarks/tf_cnn_benchmarks/tf_cnn_benchmarks.py#L179)',
  'gradients on the wire: fp16 for tf_cnn_benchmarks --use_fp16 with an '
  'all-reduce (--compact_gradient_transfer, on by default), else fp32 (AMP '
  'keeps fp32 gradients; Horovod compresses only when asked)',
  "ps tasks: the row's num_ps and ps_placement, else one per worker host "
  'on the worker hosts (the r1 page and the CSCS scripts ran them there); '
  'distributed_replicated has at least one, even on one GPU (the harness '
  'refuses it without a cluster: tensorflow/benchmarks@9165a70 '
  'tf_cnn_benchmarks.py#L830-833)',
  "local_parameter_device: the row's, else the harness's default, gpu "
  '(tensorflow/benchmarks@9165a70 tf_cnn_benchmarks.py#L91): replicated '
  'without a spec then sums each gradient on one GPU, distributed_replicated '
  "averages a host's towers on its GPUs",
  "peer access: hardware.csv's peer_gpus (the first GPUs that all reach "
  "each other, read in TensorFlow's device interconnect matrix of the "
  "table's own logs); a ring over more goes through host memory (NCCL "
  'SHM); not read: every GPU a peer',
)
_AMPERE = ('A100', 'RTX 30', 'A6000', 'A40')
_DUAL_BOARD = ('K80',)
_ASSUMED_MBITS = 10000.0
_RDMA_WORDS = ('infiniband', 'aries', 'roce')
# tf_cnn_benchmarks' --local_parameter_device default, for rows that leave
# it unset (tensorflow/benchmarks@9165a70 tf_cnn_benchmarks.py#L91, the
# harness the r1 page names): distributed_replicated then averages each
# host's gradients on its GPUs.
_CLASSIC_PARAMETER_DEVICE = 'gpu'
# Managers whose bytes between hosts go through TensorFlow's gRPC runtime.
_GRPC_MANAGERS = ('parameter_server', 'distributed_replicated')


class UsageError(Exception):
  """Bad input: one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
  def error(self, message):
    raise UsageError(message)


def parse_args(argv):
  """The script's options."""
  p = _Parser(description=__doc__.splitlines()[0])
  p.add_argument(
    '--tables', help='the published tables (default: results/published)'
  )
  p.add_argument(
    '--gradients',
    default=None,
    help='gradient lists, <model>_<data>.json (default: the gradients '
    'folder beside the tables: results/gradients)',
  )
  p.add_argument('--report', help='write the summary as Markdown here')
  p.add_argument('--rows', help='write one JSON line per scored row here')
  return p.parse_args(argv)


def _intra(row) -> dict:
  """The target's intra-link fields for a row's hardware."""
  hw, gpu = row.hardware, row.gpu
  ampere = any(word in gpu for word in _AMPERE)
  link = hw.intra_link
  if link == 'nvlink_bridge' and row.num_gpus // row.num_hosts > 2:
    link = 'pcie'
  if link == 'nvlink_bridge':  # two Turing links: 2 x 25 GB/s each way
    return {'intra': 'custom', 'intra_gb_s': 50.0}
  if not link:
    if 'SXM4' in gpu:
      return {'intra': 'nvswitch3'}
    if 'SXM3' in gpu:
      return {'intra': 'nvswitch'}
    link = 'pcie'
  if link == 'pcie':
    link = 'pcie4' if ampere else 'pcie3'
  if link == 'nvswitch' and ampere:
    link = 'nvswitch3'
  return {'intra': link}


def hardware_of(row, num_gpus=None, num_hosts=None):
  """The HardwareTarget of a row (at its own size, or another)."""
  n = num_gpus or row.num_gpus
  hosts = num_hosts or row.num_hosts
  hw = row.hardware
  rdma = any(w in hw.network.lower() for w in _RDMA_WORDS)
  if row.variable_update in _GRPC_MANAGERS:
    rdma = False
  compact = row.precision == 'fp16' and row.variable_update != (
    'parameter_server'
  )
  ps = 0
  if row.variable_update in ('parameter_server', 'distributed_replicated'):
    ps = row.num_ps or (hosts if hosts > 1 else 0)
  if row.variable_update == 'distributed_replicated':
    ps = max(1, ps)  # the harness refuses it without a cluster (ps tasks)
  shared = 2 if any(w in row.gpu for w in _DUAL_BOARD) else 1
  if hw.hardware.startswith('dgx1'):
    shared = 2
  shared = hw.gpus_per_host_link or shared
  return hw_lib.make_hardware(
    num_workers=hosts,
    gpus_per_host=max(1, n // hosts),
    link_mbits=hw.link_mbits or _ASSUMED_MBITS,
    network='rdma' if rdma else 'tcp',
    host_cores=hw.host_cores or 32,
    num_ps=min(ps, hosts) if row.ps_placement != 'own_hosts' else ps,
    ps_placement=row.ps_placement or 'worker_hosts',
    local_parameter_device=row.local_parameter_device
    or _CLASSIC_PARAMETER_DEVICE,
    gradient_precision='fp16' if compact else 'fp32',
    gpus_per_host_link=shared,
    peer_gpus=hw.peer_gpus,
    **_intra(row),
  )


def strategy_of(row):
  """The cost_model.Strategy a row ran."""
  spec = row.all_reduce_spec or None
  if row.variable_update in ('horovod', 'parameter_server'):
    spec = None
  if row.variable_update == 'distributed_replicated':
    spec = None
  return cost_model.Strategy(row.variable_update, spec)


def strategy_text(row) -> str:
  """'parameter_server cpu 4ps' for tables."""
  words = [row.variable_update, row.all_reduce_spec, row.local_parameter_device]
  if row.num_ps:
    words.append('%dps' % row.num_ps)
  if row.ps_placement:
    words.append(row.ps_placement)
  return ' '.join(w for w in words if w)


def _testbed_target(hw):
  """The baselines' target (they read the cost model's Target)."""
  return target_lib.Target(
    num_workers=hw.num_workers,
    devices_per_worker=hw.gpus_per_host,
    num_ps=hw.num_ps if hw.ps_placement == 'own_hosts' else 0,
    link_mbits=hw.link_mbits,
  )


class Scorer:
  """Profiles per table (cached) and each row's predicted efficiency."""

  def __init__(self, rows, gradient_dir):
    self.rows = rows
    self.gradient_dir = gradient_dir
    self._grads = {}

  def gradients(self, row):
    """The model's gradient list (read once)."""
    key = (row.model, 'imagenet')
    if key not in self._grads:
      path = os.path.join(self.gradient_dir, '%s_%s.json' % key)
      try:
        self._grads[key] = cost_model_paper.load_gradient_list(path)
      except (OSError, ValueError) as e:
        raise UsageError(
          '--gradients: no gradient list of %s (%s); write it with '
          'cost_model_paper.save_gradient_list' % (row.model, e)
        ) from None
    return self._grads[key]

  def profile(self, row, base):
    """The paper profile of the table's 1-GPU figure."""
    return cost_model_paper.paper_profile(
      self.gradients(row),
      model=row.model,
      data_name='imagenet',
      batch_size=row.batch_per_gpu,
      images_per_sec=base.images_per_sec,
      device_name=row.gpu,
      use_fp16=row.precision != 'fp32',
    )

  def score(self, row) -> dict:
    """Published and predicted efficiency of one row (model, baselines)."""
    base = published.baseline(self.rows, row)
    profile = self.profile(row, base)
    hw, one = hardware_of(row), hardware_of(base, 1, 1)
    n = row.num_gpus
    model = hardware_model.images_per_sec(profile, hw, strategy_of(row))
    model_one = hardware_model.images_per_sec(profile, one, strategy_of(base))
    out = {
      'file': os.path.basename(row.file),
      'line': row.line,
      'hardware': row.hardware.hardware,
      'model': row.model,
      'batch_per_gpu': row.batch_per_gpu,
      'precision': row.precision,
      'data': row.data,
      'strategy': strategy_text(row),
      'num_gpus': n,
      'num_hosts': row.num_hosts,
      'target': hw.shape_text(),
      'published': row.images_per_sec,
      'published_eff': row.images_per_sec / (n * base.images_per_sec),
      'predicted': model / model_one * base.images_per_sec,
      'predicted_eff': model / (n * model_one),
    }
    for name, fn in (
      ('paleo', baselines.paleo_images_per_sec),
      ('daydream', baselines.daydream_images_per_sec),
    ):
      s = strategy_of(row)
      rate = fn(profile, _testbed_target(hw), s)
      rate_one = fn(profile, _testbed_target(one), strategy_of(base))
      out[name + '_eff'] = rate / (n * rate_one)
    return out


def percentile(values, q):
  """Linear between ranks (q in 0..100)."""
  v = sorted(values)
  if not v:
    return float('nan')
  k = (len(v) - 1) * q / 100.0
  lo = int(k)
  hi = min(lo + 1, len(v) - 1)
  return v[lo] + (v[hi] - v[lo]) * (k - lo)


def errors(scored, key):
  """|predicted - published| efficiency in points, per row."""
  return [abs(r[key] - r['published_eff']) * 100 for r in scored]


def order_checks(scored):
  """[(table text, N, published order, predicted order, right)] wherever a
  table compares two or more strategies at one GPU count."""
  groups = {}
  for r in scored:
    key = (
      r['file'],
      r['hardware'],
      r['model'],
      r['batch_per_gpu'],
      r['precision'],
      r['data'],
      r['num_gpus'],
      r['num_hosts'],
    )
    groups.setdefault(key, []).append(r)
  out = []
  for key, rs in groups.items():
    if len({r['strategy'] for r in rs}) < 2:
      continue
    pub = [r['strategy'] for r in sorted(rs, key=lambda r: -r['published'])]
    pred = [r['strategy'] for r in sorted(rs, key=lambda r: -r['predicted'])]
    out.append((key, pub, pred, pub == pred))
  return out


def summary_lines(scored, orders) -> list:
  """The Markdown summary: overall, per source, the order checks."""
  lines = [
    '| predictor | rows | median abs error (points) | p90 | mean |',
    '|---|---|---|---|---|',
  ]
  for label, key in (
    ('hardware model', 'predicted_eff'),
    ('paleo (bandwidth only)', 'paleo_eff'),
    ('daydream (size / 0.85 bw)', 'daydream_eff'),
  ):
    e = errors(scored, key)
    lines.append(
      '| %s | %d | %.1f | %.1f | %.1f |'
      % (
        label,
        len(e),
        statistics.median(e),
        percentile(e, 90),
        sum(e) / len(e),
      )
    )
  return lines + [''] + _per_file_lines(scored) + [''] + _order_lines(orders)


def _per_file_lines(scored) -> list:
  lines = [
    '| table file | rows | model median | p90 | paleo median '
    '| daydream median |',
    '|---|---|---|---|---|---|',
  ]
  for name in sorted({r['file'] for r in scored}):
    rs = [r for r in scored if r['file'] == name]
    m, pa, dd = (
      errors(rs, k) for k in ('predicted_eff', 'paleo_eff', 'daydream_eff')
    )
    lines.append(
      '| %s | %d | %.1f | %.1f | %.1f | %.1f |'
      % (
        name,
        len(rs),
        statistics.median(m),
        percentile(m, 90),
        statistics.median(pa),
        statistics.median(dd),
      )
    )
  return lines


def _order_lines(orders) -> list:
  right = sum(1 for o in orders if o[3])
  lines = [
    'Strategy order, wherever a table compares strategies at one GPU '
    'count: %d of %d right.' % (right, len(orders)),
  ]
  wrong = [o for o in orders if not o[3]]
  if wrong:
    lines += [
      '',
      '| table (file, hardware, model, batch, precision, data, GPUs, hosts) '
      '| published order | predicted order |',
      '|---|---|---|',
    ]
    for key, pub, pred, _ in wrong:
      lines.append(
        '| %s | %s | %s |'
        % (' '.join(str(k) for k in key), ' > '.join(pub), ' > '.join(pred))
      )
  return lines


def worst_lines(scored, count=15) -> list:
  """The rows the model misses most."""
  lines = [
    '| file:line | hardware | model | batch | precision | strategy | GPUs '
    '| published eff | predicted | paleo | daydream |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
  ]
  worst = sorted(
    scored, key=lambda r: -abs(r['predicted_eff'] - r['published_eff'])
  )
  for r in worst[:count]:
    lines.append(
      '| %s:%d | %s | %s | %d | %s | %s | %d | %.1f | %.1f | %.1f | %.1f |'
      % (
        r['file'],
        r['line'],
        r['hardware'],
        r['model'],
        r['batch_per_gpu'],
        r['precision'],
        r['strategy'].strip(),
        r['num_gpus'],
        r['published_eff'] * 100,
        r['predicted_eff'] * 100,
        r['paleo_eff'] * 100,
        r['daydream_eff'] * 100,
      )
    )
  return lines


def report_text(scored, orders, command) -> str:
  """The committed report: the command, the rules, the tables."""
  parts = [
    '# The hardware model on published tables',
    '',
    'Made by `%s` (no TensorFlow; every row of results/published with '
    'more than one GPU, predicted from a paper profile of its own '
    "table's 1-GPU figure; efficiency in percent of linear scaling, errors "
    'in points).' % command,
    '',
  ]
  parts += summary_lines(scored, orders)
  parts += ['', '## How a row becomes a target', '']
  parts += ['- ' + rule for rule in HARDWARE_RULES]
  parts += ['', '## The rows it misses most', '']
  parts += worst_lines(scored)
  return '\n'.join(parts) + '\n'


def run(args):
  """Scores every multi-GPU row; prints and writes the report."""
  for name in ('report', 'rows'):
    outputs.check_file(name, getattr(args, name), creates_dirs=False)
  try:
    args.tables = args.tables or published.default_folder()
    rows = published.load_tables(args.tables)
  except (OSError, published.PublishedTableError) as e:
    raise UsageError('--tables: %s' % e) from None
  beside = os.path.join(
    os.path.dirname(os.path.abspath(args.tables)), 'gradients'
  )
  scorer = Scorer(rows, args.gradients or beside)
  scored = [scorer.score(r) for r in rows if r.num_gpus > 1]
  orders = order_checks(scored)
  for line in summary_lines(scored, orders):
    print(line)
  command = 'python scripts/validate_on_paper.py'
  if args.report:
    with open(args.report, 'w', encoding='utf-8') as f:
      f.write(report_text(scored, orders, command))
  if args.rows:
    with open(args.rows, 'w', encoding='utf-8') as f:
      for r in scored:
        f.write(json.dumps(r, sort_keys=True) + '\n')
  return scored, orders


def main(argv=None) -> int:
  """Entry point; bad input: one line on stderr, exit status 2."""
  try:
    run(parse_args(sys.argv[1:] if argv is None else argv))
  except (UsageError, outputs.OutputError, published.PublishedTableError) as e:
    print('validate_on_paper.py: error: %s' % e, file=sys.stderr)
    return 2
  return 0


if __name__ == '__main__':
  sys.exit(main())
