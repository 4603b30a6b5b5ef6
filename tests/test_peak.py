"""The MFU peak: flag values, the probe, the per-machine cache."""

import json
import time
import types

import pytest
import tensorflow as tf

from tf_cnn_benchmarks.platform import peak


@pytest.mark.parametrize(
  'text, value',
  [('auto', 'auto'), ('NONE', 'none'), ('12.5', 12.5), (' 3 ', 3.0)],
)
def test_parse_flag_accepts(text, value):
  assert peak.parse_flag(text) == value


@pytest.mark.parametrize('text', ['-1', '0', 'nan', 'inf', 'fast', ''])
def test_parse_flag_refuses(text):
  with pytest.raises(ValueError, match='--peak_tflops_per_device'):
    peak.parse_flag(text)


def test_auto_measures_once_then_reads_the_cache(tmp_path):
  calls = []

  def fake(kind, dtype):
    calls.append((kind, dtype))
    return 8.0

  first = peak.resolve('auto', 'cpu', 'float32', 2, str(tmp_path), fake)
  again = peak.resolve('auto', 'cpu', 'float32', 4, str(tmp_path), fake)
  assert first == peak.Peak(4.0, 'measured')  # 8 TFLOP/s over 2 devices
  assert again == peak.Peak(2.0, 'cached')
  assert calls == [('cpu', 'float32')]
  cache = json.loads((tmp_path / 'peak_tflops.json').read_text())
  [(key, value)] = cache.items()
  assert value == 8.0 and 'float32' in key and tf.__version__ in key
  # Another dtype is another key: measured on its own.
  assert peak.resolve('auto', 'cpu', 'bfloat16', 1, str(tmp_path), fake)
  assert len(calls) == 2


def test_damaged_cache_is_measured_again(tmp_path):
  (tmp_path / 'peak_tflops.json').write_text('{not json')
  got = peak.resolve(
    'auto', 'cpu', 'float32', 1, str(tmp_path), lambda k, d: 3.0
  )
  assert got == peak.Peak(3.0, 'measured')


def test_given_and_none(tmp_path):
  def never(kind, dtype):
    raise AssertionError('no probe for a given peak')

  assert peak.resolve(2.5, 'cpu', 'float32', 4, str(tmp_path), never) == (
    peak.Peak(2.5, 'given')
  )
  assert peak.resolve('none', 'cpu', 'float32', 1, str(tmp_path), never) is None


def test_cache_dir_follows_the_environment(tmp_path):
  assert peak.cache_dir({'TF_CNN_BENCHMARKS_CACHE_DIR': 'x'}) == 'x'
  assert peak.cache_dir({'XDG_CACHE_HOME': '/c'}) == '/c/tf_cnn_benchmarks'


def _own_matmul_tflops(n=512, repeats=8):
  """TFLOP/s of the fastest of a few n x n matmuls, timed here."""
  graph = tf.Graph()
  with graph.as_default(), tf.device('/cpu:0'):
    a = tf.compat.v1.Variable(tf.random.stateless_uniform([n, n], [3, 4]))
    product = tf.matmul(a, a)[0, 0]
    init = tf.compat.v1.global_variables_initializer()
  with tf.compat.v1.Session(graph=graph) as sess:
    sess.run(init)
    sess.run(product)
    fastest = float('inf')
    for _ in range(repeats):
      start = time.perf_counter()
      sess.run(product)
      fastest = min(fastest, time.perf_counter() - start)
  return 2.0 * n**3 / fastest / 1e12


class _FakeClock:
  """perf_counter for peak's timing loop: each timed run takes `run_s`."""

  def __init__(self, run_s):
    self.now, self.run_s, self.runs = 0.0, run_s, 0

  def perf_counter(self):
    return self.now

  def run(self, op):
    del op
    self.runs += 1
    self.now += self.run_s


@pytest.mark.parametrize(
  'run_s,budget_s,timed_runs',
  [(0.125, 1.0, 8), (1.0, 0.5, 3), (0.0078125, 10.0, 50)],
)
def test_probe_keeps_to_its_budget(monkeypatch, run_s, budget_s, timed_runs):
  clock = _FakeClock(run_s)
  monkeypatch.setattr(peak.time, 'perf_counter', clock.perf_counter)
  sess = types.SimpleNamespace(run=clock.run)
  rate = peak._best_rate(sess, None, 100, budget_s)
  # One warm-up run, then timed runs until the budget is spent (3 at least,
  # 50 at most); the rate is that of one run.
  assert clock.runs == 1 + timed_runs
  assert rate == pytest.approx(2.0 * 100**3 / run_s / 1e12)


def test_probe_agrees_loosely_with_a_timed_matmul():
  probed = peak.measure('cpu', 'float32', sizes=(256, 512), budget_s=0.6)
  own = _own_matmul_tflops()
  # Loose: the probe takes the best size, so it may beat one 512 matmul, and
  # a shared 2-core machine is noisy.
  assert own / 3 < probed < own * 6, (probed, own)


def test_run_reports_mfu_against_its_peak(tmp_path, monkeypatch):
  import io

  from tf_cnn_benchmarks import benchmark_cnn
  from tf_cnn_benchmarks.config import params as params_lib

  monkeypatch.setenv('TF_CNN_BENCHMARKS_CACHE_DIR', str(tmp_path))
  (tmp_path / 'peak_tflops.json').write_text(
    json.dumps({peak.machine_key('cpu', 'float32'): 2.0})
  )

  def run(value):
    p = params_lib.make_params(
      device='cpu',
      model='trivial',
      data_name='cifar10',
      num_gpus=2,
      batch_size=4,
      num_batches=2,
      num_warmup_batches=0,
      peak_tflops_per_device=value,
    )
    out = io.StringIO()
    return benchmark_cnn.run_benchmark(p, out=out), out.getvalue()

  cached, console = run('auto')
  # The host's 2.0 TFLOP/s shared by the 2 logical CPU towers.
  assert cached.peak_tflops_per_device == 1.0
  assert cached.peak_tflops_origin == 'cached'
  assert cached.mfu == pytest.approx(cached.tflops_per_sec / 2.0)
  assert 'MFU:' in console
  given, _ = run('0.5')
  assert (given.peak_tflops_per_device, given.peak_tflops_origin) == (
    0.5,
    'given',
  )
  assert given.mfu == pytest.approx(given.tflops_per_sec / 1.0)
  none, _ = run('none')
  assert none.mfu is None and none.peak_tflops_origin is None
  record = none.to_record()
  assert record['mfu'] is None and 'peak_tflops_origin' in record


def test_a_probe_that_may_have_shared_the_cores_is_not_cached(tmp_path):
  calls = []

  def fake(kind, dtype):
    calls.append((kind, dtype))
    return 0.5

  args = ('auto', 'cpu', 'float32', 1, str(tmp_path), fake)
  first = peak.resolve(*args, write_cache=False)
  again = peak.resolve(*args, write_cache=False)
  assert first == again == peak.Peak(0.5, 'measured')
  assert len(calls) == 2 and not list(tmp_path.iterdir())
