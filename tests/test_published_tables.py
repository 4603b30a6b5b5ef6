"""results/published: the committed tables load, a bad file is refused.

The tables are read by tf_cnn_benchmarks.scaling.published without
TensorFlow; every refusal names the file and the line.
"""

import csv
import fnmatch
import os
import pathlib
import shutil
import subprocess
import sys
import tomllib

import pytest

from tf_cnn_benchmarks.scaling import published

ROOT = pathlib.Path(__file__).resolve().parent.parent
FOLDER = ROOT / 'results' / 'published'


@pytest.fixture(scope='module')
def rows():
  return published.load_tables(str(FOLDER))


def _copy(tmp_path) -> pathlib.Path:
  """A copy of the committed tables to break."""
  dest = tmp_path / 'published'
  shutil.copytree(FOLDER, dest)
  return dest


def _rewrite(path: pathlib.Path, line: int, column: str, value: str) -> None:
  """Sets one cell (1-based file line, column name) of a CSV file."""
  with open(path, newline='') as f:
    table = list(csv.reader(f))
  table[line - 1][table[0].index(column)] = value
  with open(path, 'w', newline='') as f:
    csv.writer(f, lineterminator='\n').writerows(table)


def _refused(folder, match):
  with pytest.raises(published.PublishedTableError, match=match):
    published.load_tables(str(folder))


def test_every_committed_table_loads(rows):
  files = {r.file for r in rows}
  on_disk = {
    p.name for p in FOLDER.glob('*.csv') if p.name != published.HARDWARE_FILE
  }
  assert files == on_disk
  assert len(files) >= 4
  # Each source gives multi-GPU rows, not only 1-GPU ones.
  for name in files:
    assert any(r.num_gpus > 1 for r in rows if r.file == name), name


def test_every_table_has_its_one_gpu_row(rows):
  for key, table in published.tables(rows).items():
    assert any(r.num_gpus == 1 for r in table), key
    for r in table:
      base = published.baseline(rows, r)
      assert base.num_gpus == 1 and base.table == r.table


def test_rows_say_where_they_were_read(rows):
  for r in rows:
    assert '#' in r.source, r.source
    assert r.hardware.gpu == r.gpu
    assert r.num_hosts <= r.num_gpus <= r.num_hosts * r.hardware.gpus_per_host


def test_the_dgx1_resnet50_row_issue_55_names(rows):
  """The page's own configuration: parameter_server with cpu, not NCCL."""
  (row,) = [
    r
    for r in rows
    if r.hardware.hardware == 'dgx1_p100'
    and r.model == 'resnet50'
    and r.batch_per_gpu == 64
    and r.data == 'synthetic'
    and r.num_gpus == 8
  ]
  assert (row.variable_update, row.local_parameter_device) == (
    'parameter_server',
    'cpu',
  )
  assert row.images_per_sec == 1734
  (vgg,) = [
    r
    for r in rows
    if r.hardware.hardware == 'dgx1_p100'
    and r.model == 'vgg16'
    and r.data == 'synthetic'
    and r.num_gpus == 1
    and r.batch_per_gpu == 64
  ]
  assert vgg.images_per_sec == 154


def test_distributed_rows_carry_their_ps_tasks(rows):
  dist = [r for r in rows if r.num_hosts > 1]
  assert dist
  for r in dist:
    if r.variable_update in ('parameter_server', 'distributed_replicated'):
      assert r.num_ps and r.ps_placement == 'worker_hosts', (r.file, r.line)


def test_hardware_figures_have_sources():
  hardware = published.load_hardware(str(FOLDER / published.HARDWARE_FILE))
  assert {'dgx1_p100', 'aws_p2_8xlarge', 'dgx_a100_40g'} <= set(hardware)
  for hw in hardware.values():
    if hw.intra_link:
      assert hw.intra_link_source
    if hw.link_mbits:
      assert hw.network_source
    if hw.peer_gpus:
      assert hw.peer_gpus_source and hw.peer_gpus <= hw.gpus_per_host
  # read in the tables' own logs: 2080 Tis without peers, Quadros with
  assert hardware['lambda_xeon6230_rtx2080ti'].peer_gpus == 1
  assert hardware['lambda_xeon6230_quadro_rtx8000'].peer_gpus == 8
  assert hardware['lambda_epyc7662_rtx3090'].gpus_per_host_link == 4
  for hw in hardware.values():
    if hw.gpus_per_host_link:
      assert hw.gpus_per_host_link_source


def test_a_bad_value_is_refused_with_file_and_line(tmp_path):
  folder = _copy(tmp_path)
  path = folder / 'cscs_distributed_tensorflow_2017.csv'
  _rewrite(path, 5, 'precision', 'fp8')
  _refused(folder, r'cscs_distributed_tensorflow_2017\.csv:5: precision')


@pytest.mark.parametrize(
  'column, value, words',
  [
    ('images_per_sec', '-3', 'images_per_sec must be a positive'),
    ('batch_per_gpu', '6.5', 'batch_per_gpu must be a positive integer'),
    ('model', 'resnet51', "model 'resnet51' is not one of"),
    ('hardware', 'dgx9', "hardware 'dgx9' is not in hardware.csv"),
    ('variable_update', 'ring', "variable_update 'ring'"),
    ('num_hosts', '9', '1 GPUs on 9 hosts'),
    ('source', 'somewhere', "source 'somewhere' is not"),
  ],
)
def test_each_check_names_the_line(tmp_path, column, value, words):
  folder = _copy(tmp_path)
  path = folder / 'nvidia_dle_resnet50v1.5_tf.csv'
  _rewrite(path, 2, column, value)
  _refused(folder, r'nvidia_dle_resnet50v1\.5_tf\.csv:2: ' + words)


def test_a_table_without_its_one_gpu_row_is_refused(tmp_path):
  folder = _copy(tmp_path)
  path = folder / 'nvidia_dle_resnet50v1.5_tf.csv'
  # Line 2 is the DGX-1 FP32 1-GPU row; line 4 the same table at 8 GPUs.
  _rewrite(path, 2, 'num_gpus', '2')
  _refused(folder, r'nvidia_dle_resnet50v1\.5_tf\.csv:2: no 1-GPU row')


def test_a_figure_given_twice_is_refused(tmp_path):
  folder = _copy(tmp_path)
  path = folder / 'nvidia_dle_resnet50v1.5_tf.csv'
  with open(path) as f:
    lines = f.readlines()
  with open(path, 'a') as f:
    f.write(lines[1])
  _refused(
    folder,
    r'nvidia_dle_resnet50v1\.5_tf\.csv:%d: the same configuration as line 2'
    % (len(lines) + 1),
  )


def test_a_wrong_header_and_a_short_line_are_refused(tmp_path):
  folder = _copy(tmp_path)
  path = folder / 'nvidia_dle_resnet50v1.5_tf.csv'
  text = path.read_text().splitlines(keepends=True)
  path.write_text(text[0].replace('num_hosts', 'hosts') + ''.join(text[1:]))
  _refused(folder, r'nvidia_dle_resnet50v1\.5_tf\.csv:1: the header must be')
  path.write_text(''.join(text) + 'a,b\n')
  _refused(
    folder,
    r'nvidia_dle_resnet50v1\.5_tf\.csv:%d: 2 fields, 14 columns'
    % (len(text) + 1),
  )


def test_a_hardware_figure_without_a_source_is_refused(tmp_path):
  folder = _copy(tmp_path)
  path = folder / published.HARDWARE_FILE
  with open(path, newline='') as f:
    table = list(csv.reader(f))
  line = 1 + next(i for i, r in enumerate(table) if r[0] == 'aws_p2_8xlarge')
  _rewrite(path, line, 'network_source', '')
  _refused(folder, r'hardware\.csv:%d: network/link_mbits have no' % line)
  _rewrite(path, line, 'network_source', 'x')
  _rewrite(path, line, 'intra_link', 'nvlink9')
  _refused(folder, r"hardware\.csv:%d: intra_link 'nvlink9'" % line)
  _rewrite(path, line, 'intra_link', 'pcie')
  _rewrite(path, line, 'peer_gpus', '4')
  _refused(folder, r'hardware\.csv:%d: peer_gpus has no peer_gpus_' % line)
  _rewrite(path, line, 'peer_gpus_source', 'x')
  _rewrite(path, line, 'peer_gpus', '0')
  _refused(folder, r'hardware\.csv:%d: peer_gpus must be a positive' % line)
  _rewrite(path, line, 'peer_gpus', '')
  _rewrite(path, line, 'gpus_per_host_link', '2')
  _refused(folder, r'hardware\.csv:%d: gpus_per_host_link has no' % line)


def test_bad_notes_words_are_refused(tmp_path):
  folder = _copy(tmp_path)
  path = folder / 'cscs_distributed_tensorflow_2017.csv'
  _rewrite(path, 3, 'notes', 'num_ps=0; ps_placement=worker_hosts')
  _refused(folder, r'cscs_distributed_tensorflow_2017\.csv:3: num_ps must be')
  _rewrite(path, 3, 'notes', 'num_ps=2; ps_placement=somewhere')
  _refused(folder, r"csv:3: ps_placement 'somewhere' is not one of")


def test_the_reader_imports_no_tensorflow():
  code = (
    'import sys\n'
    'from tf_cnn_benchmarks.scaling import published\n'
    'published.load_tables(%r)\n'
    'print("tensorflow" in sys.modules)\n' % str(FOLDER)
  )
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  out = subprocess.run(
    [sys.executable, '-c', code],
    capture_output=True,
    text=True,
    cwd=ROOT,
    env=env,
    check=True,
  ).stdout
  assert out.strip() == 'False'


def test_the_wheel_ships_the_tables_beside_the_schema():
  """package-data takes every file of results/published (as schema.json)."""
  with open(ROOT / 'pyproject.toml', 'rb') as f:
    globs = tomllib.load(f)['tool']['setuptools']['package-data'][
      'tf_cnn_benchmarks_results'
    ]
  assert 'schema.json' in globs
  for p in FOLDER.iterdir():
    rel = 'published/' + p.name
    assert any(fnmatch.fnmatch(rel, g) for g in globs), rel
  assert published.default_folder() == str(FOLDER)
