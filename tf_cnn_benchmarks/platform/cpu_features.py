"""Whether this CPU runs 16-bit compute natively (a warning when it does not).

Without AVX512_BF16 or AMX_BF16, TensorFlow's CPU kernels emulate bfloat16
convolutions and matmuls (resnet20 ran at 0.05-0.07x float32 on an AVX2-only
CPU); without AVX512_FP16 or AMX_FP16 there are no fast float16 kernels
either. The run goes on; the header and one stderr line say so.
"""

from __future__ import annotations

import platform

# The /proc/cpuinfo flags that mean native kernels for each 16-bit type.
NATIVE_FLAGS = {
  'bfloat16': ('avx512_bf16', 'amx_bf16'),
  'float16': ('avx512_fp16', 'amx_fp16'),
}
_SHORT_NAMES = {'bfloat16': 'bf16', 'float16': 'fp16'}
# The /proc/cpuinfo flags that change a CPU's matmul peak: one model name
# (an AMD EPYC) comes with AVX2 only or with AVX-512, depending on the host.
PEAK_FLAGS = (
  'avx2',
  'avx512f',
  'avx512_bf16',
  'avx512_fp16',
  'amx_bf16',
  'amx_fp16',
  'amx_tile',
)


def cpu_flags(cpuinfo_text: str) -> frozenset:
  """The feature flags of the first processor in a /proc/cpuinfo text."""
  for line in cpuinfo_text.splitlines():
    key, _, value = line.partition(':')
    if key.strip() == 'flags':
      return frozenset(value.split())
  return frozenset()


def read_cpuinfo(path: str = '/proc/cpuinfo') -> str | None:
  """The text of /proc/cpuinfo, or None where there is none (not Linux)."""
  try:
    with open(path, encoding='utf-8', errors='replace') as f:
      return f.read()
  except OSError:
    return None


def slow_16bit_note(compute_dtype: str, cpuinfo_text: str | None) -> str | None:
  """The warning for 16-bit compute on a CPU without native kernels.

  Args:
    compute_dtype: the compute dtype's name ('float32', 'bfloat16', ...).
    cpuinfo_text: /proc/cpuinfo's text; None (unknown) gives no warning.

  Returns:
    One line, or None when there is nothing to say.
  """
  wanted = NATIVE_FLAGS.get(compute_dtype)
  if wanted is None or cpuinfo_text is None:
    return None
  if cpu_flags(cpuinfo_text) & set(wanted):
    return None
  short = _SHORT_NAMES[compute_dtype]
  return 'this CPU has no native %s (no %s); expect %s slower than float32' % (
    short,
    ' / '.join(wanted),
    short,
  )


def cpu_model(cpuinfo_text: str | None = None) -> str:
  """The CPU's model name ('model name' in /proc/cpuinfo, else platform's)."""
  text = read_cpuinfo() if cpuinfo_text is None else cpuinfo_text
  for line in (text or '').splitlines():
    if line.startswith('model name'):
      return line.split(':', 1)[1].strip()
  return platform.processor() or platform.machine()


def peak_flags(cpuinfo_text: str | None = None) -> tuple:
  """The PEAK_FLAGS this CPU has, in PEAK_FLAGS order (None: read it)."""
  text = read_cpuinfo() if cpuinfo_text is None else cpuinfo_text
  have = cpu_flags(text or '')
  return tuple(name for name in PEAK_FLAGS if name in have)
