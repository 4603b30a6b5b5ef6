"""A BenchmarkResult with plausible values, for tests of the results line."""

from tf_cnn_benchmarks.reporting import results


def make_result(**overrides) -> results.BenchmarkResult:
  """A two-device, two-worker result; `overrides` replace or add fields."""
  fields = dict(
    params={'model': 'x'},
    env={'hostname': 'h'},
    model='x',
    data_name='cifar10',
    variable_update='replicated',
    all_reduce_spec='copy',
    precision='float32',
    num_devices=2,
    num_workers=2,
    batch_size_per_device=4,
    global_batch_size=16,
    num_steps=3,
    num_warmup_steps=1,
    images_per_sec=10.0,
    images_per_sec_per_device=2.5,
    step_time_ms={'mean': 1.0, 'p50': 1.0, 'p90': 1.0},
    losses=[3.0, 2.0],
    flops_per_image=100,
    tflops_per_sec=1e-9,
    peak_tflops_per_device=None,
    mfu=None,
  )
  fields.update(overrides)
  return results.BenchmarkResult(**fields)
