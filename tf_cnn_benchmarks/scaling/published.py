"""Published scaling tables (results/published/): read and check them.

Each `<source>.csv` in the folder holds rows copied from one published
source (columns `COLUMNS`); `hardware.csv` describes the machines the rows
name (columns `HARDWARE_COLUMNS`). results/published/README.md says where
every figure was read. `load_tables(folder)` returns one frozen `Row` per
line, its `Hardware` joined in, after checking every value; a bad file is
refused with a `PublishedTableError` naming file and line. No TensorFlow:
the predictor's checks read these tables without it (an import-linter
contract says so).

A table, for the checks and for `one_gpu_rows`, is the rows of one file
that share the publication (repo@commit, whichever files of it they were
read from, or the URL), hardware, model, batch per GPU, precision and data;
every table must hold a 1-GPU row, the figure a prediction starts from.
Two machine-readable words may appear in a row's notes: `num_ps=K` (ps
tasks) and `ps_placement=own_hosts|worker_hosts`.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import importlib.util
import os
import re
from typing import Dict, Iterable, List, Optional, Tuple

COLUMNS = (
  'source',
  'hardware',
  'gpu',
  'model',
  'batch_per_gpu',
  'precision',
  'data',
  'variable_update',
  'all_reduce_spec',
  'local_parameter_device',
  'num_gpus',
  'num_hosts',
  'images_per_sec',
  'notes',
)
HARDWARE_COLUMNS = (
  'hardware',
  'gpu',
  'gpus_per_host',
  'intra_link',
  'intra_link_source',
  'network',
  'link_mbits',
  'network_source',
  'host_cores',
  'peer_gpus',
  'peer_gpus_source',
  'gpus_per_host_link',
  'gpus_per_host_link_source',
  'notes',
)
HARDWARE_FILE = 'hardware.csv'

# fp32 includes A100's TF32 math (fp32 storage and gradients; the row's
# notes say so); fp16 is tf_cnn_benchmarks' --use_fp16; amp is automatic
# mixed precision (NVIDIA's --amp).
PRECISIONS = ('fp32', 'fp16', 'amp')
DATA = ('synthetic', 'real')
# This project's variable managers, and Horovod (the predictor's own name).
VARIABLE_UPDATES = (
  'replicated',
  'parameter_server',
  'distributed_replicated',
  'distributed_all_reduce',
  'collective_all_reduce',
  'independent',
  'horovod',
)
LOCAL_PARAMETER_DEVICES = ('', 'cpu', 'gpu')
# '' when no source read says; nvlink_bridge: a bridge between cards.
INTRA_LINKS = (
  '',
  'pcie',
  'pcie3',
  'pcie4',
  'nvlink1',
  'nvlink2',
  'nvlink_bridge',
  'nvswitch',
)
PS_PLACEMENTS = ('own_hosts', 'worker_hosts')

# repo@40-hex-commit:path#Lline (or #Lfirst-Llast), or a URL with a section.
_SOURCE_RE = re.compile(
  r'^([\w.-]+/[\w.-]+@[0-9a-f]{40}:\S+#L\d+(-L?\d+)?|https?://\S+#\S+)$'
)
_NUM_PS_RE = re.compile(r'(?:^|[;\s])num_ps=(\S+?)(?=[;\s]|$)')
_PLACEMENT_RE = re.compile(r'(?:^|[;\s])ps_placement=(\S+?)(?=[;\s]|$)')


class PublishedTableError(ValueError):
  """A published table that cannot be used; the message names file:line."""


@dataclasses.dataclass(frozen=True)
class Hardware:
  """One machine of hardware.csv; None/'' where no source read says."""

  hardware: str
  gpu: str
  gpus_per_host: int
  intra_link: str
  intra_link_source: str
  network: str
  link_mbits: Optional[float]
  network_source: str
  host_cores: Optional[int]
  notes: str
  peer_gpus: Optional[int] = None
  peer_gpus_source: str = ''
  gpus_per_host_link: Optional[int] = None
  gpus_per_host_link_source: str = ''


@dataclasses.dataclass(frozen=True)
class Row:
  """One published figure, where it was read, and the machine it ran on."""

  file: str
  line: int
  source: str
  hardware: Hardware
  gpu: str
  model: str
  batch_per_gpu: int
  precision: str
  data: str
  variable_update: str
  all_reduce_spec: str
  local_parameter_device: str
  num_gpus: int
  num_hosts: int
  images_per_sec: float
  notes: str
  num_ps: Optional[int]
  ps_placement: Optional[str]

  @property
  def publication(self) -> str:
    """One published state: repo@commit (all its files), or the URL."""
    if self.source.startswith(('http://', 'https://')):
      return self.source.split('#', 1)[0]
    return self.source.split(':', 1)[0]

  @property
  def table(self) -> Tuple:
    """The key of the table this row belongs to (see the module doc)."""
    return (
      self.file,
      self.publication,
      self.hardware.hardware,
      self.model,
      self.batch_per_gpu,
      self.precision,
      self.data,
    )

  @property
  def strategy(self) -> Tuple[str, str, str, Optional[int]]:
    """What a table may compare at one GPU count."""
    return (
      self.variable_update,
      self.all_reduce_spec,
      self.local_parameter_device,
      self.num_ps,
    )


def default_folder() -> str:
  """results/published in a checkout, or the installed wheel's copy."""
  root = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  )
  for folder in (
    os.path.join(root, 'results', 'published'),
    os.path.join(root, 'tf_cnn_benchmarks_results', 'published'),
  ):
    if os.path.isfile(os.path.join(folder, HARDWARE_FILE)):
      return folder
  raise PublishedTableError(
    '%s: no published tables (results/published/hardware.csv)' % root
  )


def _fail(path: str, line: int, what: str) -> PublishedTableError:
  return PublishedTableError('%s:%d: %s' % (path, line, what))


def _read(path: str, columns: Tuple[str, ...]) -> List[Tuple[int, Dict]]:
  """(line, {column: text}) for each data line; the header must match."""
  try:
    with open(path, newline='', encoding='utf-8') as f:
      reader = csv.reader(f)
      header = next(reader, None)
      if header is None or tuple(header) != columns:
        raise _fail(
          path, 1, 'the header must be exactly: %s' % ','.join(columns)
        )
      out = []
      for cells in reader:
        if not cells:
          continue
        if len(cells) != len(columns):
          raise _fail(
            path,
            reader.line_num,
            '%d fields, %d columns' % (len(cells), len(columns)),
          )
        out.append((reader.line_num, dict(zip(columns, cells))))
      return out
  except (OSError, UnicodeDecodeError, csv.Error) as e:
    raise PublishedTableError('%s: cannot read: %s' % (path, e)) from None


def _choice(path, line, column, value, allowed: Iterable[str]) -> str:
  allowed = tuple(allowed)
  if value not in allowed:
    raise _fail(
      path,
      line,
      '%s %r is not one of: %s'
      % (column, value, ', '.join(a or "''" for a in allowed)),
    )
  return value


def _positive(path, line, column, value, kind=int, optional=False):
  """The value as a positive `kind`; None for '' when optional."""
  if optional and value == '':
    return None
  try:
    number = kind(value)
  except ValueError:
    number = None
  if number is None or not number > 0 or number != number:
    raise _fail(
      path,
      line,
      '%s must be a positive %s, not %r'
      % (column, 'integer' if kind is int else 'number', value),
    )
  return number


def _text(path, line, column, value) -> str:
  if not value.strip():
    raise _fail(path, line, '%s is empty' % column)
  return value


def _hardware(path: str, line: int, c: Dict) -> Hardware:
  """One hardware.csv line checked: no figure without its source."""
  intra = _choice(path, line, 'intra_link', c['intra_link'], INTRA_LINKS)
  if intra and not c['intra_link_source'].strip():
    raise _fail(path, line, 'intra_link %r has no intra_link_source' % intra)
  if (c['network'] or c['link_mbits']) and not c['network_source'].strip():
    raise _fail(path, line, 'network/link_mbits have no network_source')
  for name in ('peer_gpus', 'gpus_per_host_link'):
    if c[name].strip() and not c[name + '_source'].strip():
      raise _fail(path, line, '%s has no %s_source' % (name, name))
  return Hardware(
    hardware=_text(path, line, 'hardware', c['hardware']),
    gpu=_text(path, line, 'gpu', c['gpu']),
    gpus_per_host=_positive(path, line, 'gpus_per_host', c['gpus_per_host']),
    intra_link=intra,
    intra_link_source=c['intra_link_source'],
    network=c['network'],
    link_mbits=_positive(
      path, line, 'link_mbits', c['link_mbits'], float, optional=True
    ),
    network_source=c['network_source'],
    host_cores=_positive(
      path, line, 'host_cores', c['host_cores'], optional=True
    ),
    notes=c['notes'],
    peer_gpus=_positive(path, line, 'peer_gpus', c['peer_gpus'], optional=True),
    peer_gpus_source=c['peer_gpus_source'],
    gpus_per_host_link=_positive(
      path, line, 'gpus_per_host_link', c['gpus_per_host_link'], optional=True
    ),
    gpus_per_host_link_source=c['gpus_per_host_link_source'],
  )


def load_hardware(path: str) -> Dict[str, Hardware]:
  """hardware.csv as {key: Hardware}, every line checked."""
  out: Dict[str, Hardware] = {}
  for line, cells in _read(path, HARDWARE_COLUMNS):
    hw = _hardware(path, line, cells)
    if hw.hardware in out:
      raise _fail(path, line, 'hardware %r listed twice' % hw.hardware)
    out[hw.hardware] = hw
  return out


@functools.lru_cache(maxsize=None)
def _model_names() -> Tuple[str, ...]:
  """The ImageNet models this project declares (models/declared.py).

  Loaded by path: importing the `models` package would import TensorFlow
  (reporting/model_table.py reads the file the same way).
  """
  package = importlib.util.find_spec('models')
  path = os.path.join(package.submodule_search_locations[0], 'declared.py')
  spec = importlib.util.spec_from_file_location('_published_declared', path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  names = {d.name for d in module.DECLARATIONS if d.dataset == 'imagenet'}
  return tuple(sorted(names))


def _notes_words(path, line, notes) -> Tuple[Optional[int], Optional[str]]:
  """The num_ps= and ps_placement= words of a row's notes, checked."""
  num_ps = placement = None
  found = _NUM_PS_RE.findall(notes)
  if len(found) > 1:
    raise _fail(path, line, 'notes give num_ps more than once')
  if found:
    num_ps = _positive(path, line, 'num_ps', found[0])
  found = _PLACEMENT_RE.findall(notes)
  if len(found) > 1:
    raise _fail(path, line, 'notes give ps_placement more than once')
  if found:
    placement = _choice(path, line, 'ps_placement', found[0], PS_PLACEMENTS)
  return num_ps, placement


def _source(path, line, value) -> str:
  if not _SOURCE_RE.match(value):
    raise _fail(
      path,
      line,
      'source %r is not repo@<40-hex commit>:path#Lline or a URL#section'
      % value,
    )
  return value


def _counts(path, line, c, hw: Hardware) -> Tuple[int, int]:
  """num_gpus and num_hosts, checked against the machine's GPUs per host."""
  gpus = _positive(path, line, 'num_gpus', c['num_gpus'])
  hosts = _positive(path, line, 'num_hosts', c['num_hosts'])
  if hosts > gpus or gpus > hosts * hw.gpus_per_host:
    raise _fail(
      path,
      line,
      '%d GPUs on %d hosts of %s (%d GPUs per host) is impossible'
      % (gpus, hosts, hw.hardware, hw.gpus_per_host),
    )
  return gpus, hosts


def _row(path, line, c, hardware: Dict[str, Hardware], models) -> Row:
  """One table line checked against the allowed values and its machine."""
  name = os.path.basename(path)
  hw = hardware.get(c['hardware'])
  if hw is None:
    raise _fail(
      path, line, 'hardware %r is not in hardware.csv' % c['hardware']
    )
  if c['gpu'] != hw.gpu:
    raise _fail(
      path, line, 'gpu %r, but hardware.csv says %r' % (c['gpu'], hw.gpu)
    )
  gpus, hosts = _counts(path, line, c, hw)
  num_ps, placement = _notes_words(path, line, c['notes'])
  return Row(
    file=name,
    line=line,
    source=_source(path, line, c['source']),
    hardware=hw,
    gpu=c['gpu'],
    model=_choice(path, line, 'model', c['model'], models),
    batch_per_gpu=_positive(path, line, 'batch_per_gpu', c['batch_per_gpu']),
    precision=_choice(path, line, 'precision', c['precision'], PRECISIONS),
    data=_choice(path, line, 'data', c['data'], DATA),
    variable_update=_choice(
      path, line, 'variable_update', c['variable_update'], VARIABLE_UPDATES
    ),
    all_reduce_spec=c['all_reduce_spec'],
    local_parameter_device=_choice(
      path,
      line,
      'local_parameter_device',
      c['local_parameter_device'],
      LOCAL_PARAMETER_DEVICES,
    ),
    num_gpus=gpus,
    num_hosts=hosts,
    images_per_sec=_positive(
      path, line, 'images_per_sec', c['images_per_sec'], float
    ),
    notes=c['notes'],
    num_ps=num_ps,
    ps_placement=placement,
  )


def _check_tables(path: str, rows: List[Row]) -> None:
  """No figure twice; every table has its 1-GPU row."""
  seen: Dict[Tuple, int] = {}
  firsts: Dict[Tuple, int] = {}
  ones = set()
  for r in rows:
    key = r.table + r.strategy + (r.num_gpus, r.num_hosts)
    if key in seen:
      raise _fail(path, r.line, 'the same configuration as line %d' % seen[key])
    seen[key] = r.line
    firsts.setdefault(r.table, r.line)
    if r.num_gpus == 1:
      ones.add(r.table)
  for table, line in sorted(firsts.items(), key=lambda kv: kv[1]):
    if table not in ones:
      raise _fail(
        path,
        line,
        'no 1-GPU row for %s %s batch %d %s %s (the table starting here)'
        % (table[2], table[3], table[4], table[5], table[6]),
      )


def load_table(path: str, hardware: Dict[str, Hardware]) -> List[Row]:
  """One source's rows, each checked; the file's tables checked whole."""
  models = _model_names()
  rows = [
    _row(path, line, cells, hardware, models)
    for line, cells in _read(path, COLUMNS)
  ]
  if not rows:
    raise _fail(path, 2, 'no rows')
  _check_tables(path, rows)
  return rows


def load_tables(folder: str) -> List[Row]:
  """Every table of `folder` (all *.csv but hardware.csv), hardware joined."""
  hw_path = os.path.join(folder, HARDWARE_FILE)
  if not os.path.isfile(hw_path):
    raise PublishedTableError('%s: missing' % hw_path)
  hardware = load_hardware(hw_path)
  rows: List[Row] = []
  names = sorted(
    n for n in os.listdir(folder) if n.endswith('.csv') and n != HARDWARE_FILE
  )
  if not names:
    raise PublishedTableError(
      '%s: no table (*.csv) besides hardware.csv' % folder
    )
  for name in names:
    rows.extend(load_table(os.path.join(folder, name), hardware))
  return rows


def tables(rows: Iterable[Row]) -> Dict[Tuple, List[Row]]:
  """The rows grouped by `Row.table`, in file order."""
  out: Dict[Tuple, List[Row]] = {}
  for r in rows:
    out.setdefault(r.table, []).append(r)
  return out


def one_gpu_rows(rows: Iterable[Row], row: Row) -> List[Row]:
  """The 1-GPU rows of `row`'s table: the figures a prediction starts from.

  Usually one; a table comparing strategies may give one per strategy.
  """
  return [r for r in rows if r.table == row.table and r.num_gpus == 1]


def baseline(rows: Iterable[Row], row: Row) -> Row:
  """The 1-GPU row to scale `row` from: its own manager's, else the only one.

  Raises PublishedTableError (naming the row) when the table has several
  1-GPU rows and none of `row`'s strategy.
  """
  ones = one_gpu_rows(rows, row)
  same = [r for r in ones if r.strategy[:3] == row.strategy[:3]]
  if same:
    return same[0]
  if len(ones) == 1:
    return ones[0]
  raise PublishedTableError(
    '%s:%d: %d 1-GPU rows in its table and none of its strategy'
    % (row.file, row.line, len(ones))
  )
