"""The short profile --variable_update=auto measures when given no file.

Fewer steps and smaller transport messages than scripts/profile_host.py
(about 40 s for trivial on a loaded 2-core CPU): enough to rank the
strategies of this run, not a profile to keep.
"""

from __future__ import annotations

from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.config import resolve
from tf_cnn_benchmarks.scaling.profile import profile as profile_lib
from tf_cnn_benchmarks.scaling.profile import transport
from tf_cnn_benchmarks.scaling.profile import transport_bench

# Timed and traced steps of the local run (after its warm-up steps).
SHORT_STEPS = 10
SHORT_TRACED = 2
# Transport messages from 64 B to 1 MiB (the default goes to 64 MiB).
SHORT_SIZES = transport_bench.sizes_up_to(1 << 20)
# The benchmark flags the profile is measured with (beside model, data,
# batch and device), when the run sets them.
_PROFILE_FLAGS = ('data_format', 'use_fp16', 'optimizer', 'weight_decay')


class AutoError(ValueError):
  """Bad input to --variable_update=auto: one line, exit status 2."""


NOTE = (
  'measured by --variable_update=auto (%d timed + %d traced steps, '
  'messages up to 1 MiB)' % (SHORT_STEPS, SHORT_TRACED)
)


def measure_short(overrides: dict):
  """This host's profile of the run `overrides` describe, measured briefly.

  Raises:
    AutoError: the measurement refused a flag or its tasks failed.
  """
  defaults = params_lib.Params()
  given = {
    k: overrides[k]
    for k in ('model', 'data_name', 'batch_size')
    if overrides.get(k) not in (None, 0, '')
  }
  extra = {
    k: overrides[k]
    for k in _PROFILE_FLAGS
    if k in overrides and overrides[k] != getattr(defaults, k)
  }
  try:
    return profile_lib.measure_profile(
      device=overrides.get('device') or default_device(),
      num_steps=SHORT_STEPS,
      num_traced=SHORT_TRACED,
      transport_sizes=SHORT_SIZES,
      # Short: k copies at once would take as long as the rest together.
      concurrent_copies=(),
      notes=NOTE,
      **given,
      **extra,
    )
  except (params_lib.ParamsError, transport.TransportProfileError) as e:
    raise AutoError(
      '--variable_update=auto: measuring the profile: %s' % e
    ) from None


def default_device() -> str:
  """The device the run resolves to when --device is unset."""
  return 'gpu' if resolve.gpu_available() else 'cpu'
