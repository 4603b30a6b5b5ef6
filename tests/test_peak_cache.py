"""The peak cache is read bounded and checked; MFU over 100% warns.

Issue 29, items 11 and 21: a cached 1e-12 gave an MFU of 1e8, a deeply
nested file a RecursionError after the run, a device file at the cache path
was read without end; the key did not tell an AVX2 CPU from an AVX-512 one
of the same model name; a hand-given peak printed MFU 193.89% silently.
"""

import io
import json
import os

import pytest

from tf_cnn_benchmarks.platform import cpu_features
from tf_cnn_benchmarks.platform import peak

_EPYC = 'model name\t: AMD EPYC 9R14 96-Core Processor\n'
_AVX2 = _EPYC + 'flags\t\t: fpu sse2 avx avx2 fma\n'
_AVX512 = _EPYC + 'flags\t\t: fpu sse2 avx avx2 fma avx512f avx512_bf16\n'


def test_cache_key_tells_the_isa_apart():
  assert cpu_features.peak_flags(_AVX2) == ('avx2',)
  assert cpu_features.peak_flags(_AVX512) == ('avx2', 'avx512f', 'avx512_bf16')
  avx2 = peak.machine_key('cpu', 'float32', _AVX2)
  avx512 = peak.machine_key('cpu', 'float32', _AVX512)
  assert avx2 != avx512
  assert 'isa=avx2|' in avx2 and 'AMD EPYC 9R14' in avx2
  assert peak.machine_key('cpu', 'float32', _EPYC).count('isa=none') == 1


def _resolve(tmp_path):
  calls = []

  def fake(kind, dtype):
    calls.append(kind)
    return 3.0

  got = peak.resolve('auto', 'cpu', 'float32', 1, str(tmp_path), fake)
  return got, calls


def _write(tmp_path, text):
  (tmp_path / 'peak_tflops.json').write_text(text)


@pytest.mark.parametrize(
  'value', [1e-12, 0, -1.0, 1e9, True, 'fast', [2.0], None]
)
def test_an_implausible_cached_figure_is_measured_again(tmp_path, value):
  _write(tmp_path, json.dumps({peak.machine_key('cpu', 'float32'): value}))
  got, calls = _resolve(tmp_path)
  assert got == peak.Peak(3.0, 'measured') and calls == ['cpu']
  cache = json.loads((tmp_path / 'peak_tflops.json').read_text())
  assert list(cache.values()) == [3.0]


def test_a_plausible_cached_figure_is_used(tmp_path):
  _write(tmp_path, json.dumps({peak.machine_key('cpu', 'float32'): 0.25}))
  assert _resolve(tmp_path) == (peak.Peak(0.25, 'cached'), [])


@pytest.mark.parametrize(
  'text',
  [
    '[' * 200000 + ']' * 200000,  # RecursionError in json
    '{"a": ' * 100000 + '1' + '}' * 100000,
    '[1.0]',
    json.dumps({'k': 1.0, 'pad': 'x' * (peak.MAX_CACHE_BYTES + 10)}),
  ],
)
def test_a_cache_not_of_our_shape_is_measured_again(tmp_path, text):
  _write(tmp_path, text)
  got, calls = _resolve(tmp_path)
  assert got == peak.Peak(3.0, 'measured') and calls == ['cpu']


def test_a_device_file_or_fifo_at_the_cache_path_is_not_read(tmp_path):
  os.symlink('/dev/zero', tmp_path / 'peak_tflops.json')  # endless
  assert _resolve(tmp_path)[0].origin == 'measured'
  fifo_dir = tmp_path / 'fifo'
  fifo_dir.mkdir()
  os.mkfifo(fifo_dir / 'peak_tflops.json')  # no writer: would block
  assert _resolve(fifo_dir)[0].origin == 'measured'


def test_mfu_over_100_percent_warns():
  line = peak.over_peak_warning(1.9389, peak.Peak(0.05, 'given'))
  assert '193.89%' in line and '--peak_tflops_per_device' in line
  assert 'too low' in line and '\n' not in line
  assert peak.over_peak_warning(0.5, peak.Peak(0.05, 'given')) is None
  assert peak.over_peak_warning(None, None) is None


def _trivial_run(out, **flags):
  """The result of a two-step trivial run on the CPU with `flags`."""
  from tf_cnn_benchmarks import benchmark_cnn
  from tf_cnn_benchmarks.config import params as params_lib

  p = params_lib.make_params(
    device='cpu',
    model='trivial',
    data_name='cifar10',
    batch_size=4,
    num_batches=2,
    num_warmup_batches=0,
    **flags,
  )
  return benchmark_cnn.run_benchmark(p, out=out)


def test_a_run_over_its_given_peak_warns_and_reports(capsys):
  out = io.StringIO()
  result = _trivial_run(out, peak_tflops_per_device='0.0000001')
  assert result.mfu > 1.0
  assert 'total images/sec:' in out.getvalue()
  err = capsys.readouterr().err
  warnings = [ln for ln in err.splitlines() if 'over 100%' in ln]
  assert len(warnings) == 1, err


def test_forget_cached_drops_only_this_machines_entry(tmp_path):
  key = peak.machine_key('cpu', 'float32')
  _write(tmp_path, json.dumps({key: 0.25, 'other machine': 1.5}))
  peak.forget_cached('cpu', 'float32', str(tmp_path))
  cache = json.loads((tmp_path / 'peak_tflops.json').read_text())
  assert cache == {'other machine': 1.5}
  assert _resolve(tmp_path)[0] == peak.Peak(3.0, 'measured')


def test_a_run_over_its_cached_peak_drops_it(tmp_path, monkeypatch, capsys):
  # A cached figure a run beats was measured on busy cores: kept, it would
  # give every later run an MFU over 100%.
  monkeypatch.setenv('TF_CNN_BENCHMARKS_CACHE_DIR', str(tmp_path))
  # A cached figure far below any real run, so the run beats it however
  # busy the cores are (the lowest plausible figure, 1e-4 TFLOP/s, is not:
  # a trivial run on loaded cores stayed under it).
  monkeypatch.setattr(peak, 'PLAUSIBLE_TFLOPS', (1e-9, 1e4))
  key = peak.machine_key('cpu', 'float32')
  _write(tmp_path, json.dumps({key: 1e-9}))
  result = _trivial_run(io.StringIO())
  assert result.peak_tflops_origin == 'cached' and result.mfu > 1.0
  assert 'next run measures it again' in capsys.readouterr().err
  cache = json.loads((tmp_path / 'peak_tflops.json').read_text())
  assert key not in cache
