"""Every gradient compressor by name, with what it is, as data (no TensorFlow).

The flag (--gradient_compression) takes its choices from here, the flag
checks their rules (which managers a compressor fits), and the compressor
classes (registry.py) are checked against this table by
tests/test_compression.py, so a compressor is declared once, beside its name.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Tuple


@dataclasses.dataclass(frozen=True)
class Declared:
  """What one --gradient_compression name is.

  wire_dtype: the dtype float32 gradients travel in ('float16',
    'bfloat16'), or None (float32, or PowerSGD's float32 factors).
  error_feedback: each replica keeps what compression lost and adds it to
    its next gradient.
  two_phase: the reduction is two all-reduces that depend on each other
    (PowerSGD's P, then Q), so a manager must all-reduce every gradient
    itself; a parameter server's push (one cast on the way) cannot.
  exact: the reduced gradients equal the uncompressed reduction's.
  """

  wire_dtype: Optional[str] = None
  error_feedback: bool = False
  two_phase: bool = False
  exact: bool = False


COMPRESSORS: Dict[str, Declared] = {
  'none': Declared(exact=True),
  'fp16': Declared(wire_dtype='float16'),
  'bf16': Declared(wire_dtype='bfloat16'),
  'fp16_ef': Declared(wire_dtype='float16', error_feedback=True),
  'bf16_ef': Declared(wire_dtype='bfloat16', error_feedback=True),
  'powersgd': Declared(error_feedback=True, two_phase=True),
}

NAMES: Tuple[str, ...] = tuple(COMPRESSORS)
DEFAULT_POWERSGD_RANK = 4


def declared(name: str) -> Declared:
  """The declaration of `name` (KeyError: not a compressor)."""
  return COMPRESSORS[name]


def result_keys(name: str, rank: int) -> dict:
  """The compressor and its settings, as the results line and the header
  have them: `gradient_compression` and `powersgd_rank` (None unless
  powersgd)."""
  return {
    'gradient_compression': name,
    'powersgd_rank': rank if COMPRESSORS[name].two_phase else None,
  }


def describe(name: str, rank: int) -> str:
  """The header's Compression row: the name and its settings."""
  d = COMPRESSORS[name]
  if d.two_phase:
    return '%s (rank %d, warm start, error feedback)' % (name, rank)
  if d.wire_dtype:
    return '%s (float32 gradients sent as %s%s)' % (
      name,
      d.wire_dtype,
      ', error feedback' if d.error_feedback else '',
    )
  return name
