"""Every gradient compressor by name, with what it is, as data (no TensorFlow).

Also what each puts on the wire and the compute it adds (wire_phases,
wire_bytes, work): the one statement of those rules.

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


# ---- what each compressor puts on the wire, and the work it adds ------------
# The one statement of the rule: PowerSGD (powersgd.py), the predictors
# (tf_cnn_benchmarks/scaling/model) and the compression benchmark read it
# here, so none keeps a second copy.

DTYPE_BYTES = {'float16': 2, 'bfloat16': 2, 'float32': 4, 'float64': 8}


def matrix_shape(shape, rank: int):
  """(n, m, r) of a gradient of `shape` PowerSGD compresses at `rank`; None:
  sent as it is (a vector, or a matrix too small to gain: r (n+m) >= n m).

  The last axis is the columns: a conv kernel [h, w, in, out] is
  [h*w*in, out].
  """
  dims = [int(d) for d in shape]
  if len(dims) < 2:
    return None
  n = 1
  for d in dims[:-1]:
    n *= d
  m = dims[-1]
  r = min(rank, n, m)
  if r * (n + m) >= n * m:
    return None
  return n, m, r


def _elements(shape) -> int:
  count = 1
  for d in shape:
    count *= int(d)
  return count


def wire_phases(name: str, shape, dtype: str, rank: int) -> tuple:
  """Bytes one replica hands the all-reduce for one gradient, per dependent
  reduction: (bytes,) for none and the casts; PowerSGD's (P, Q) bytes,
  r n and r m float32 elements, for a float32 matrix it compresses
  (matrix_shape), else (bytes, 0): the gradient travels with the P's.

  A cast sends a float32 gradient in its wire dtype, others as they are.
  """
  d = COMPRESSORS[name]
  size = DTYPE_BYTES[dtype]
  whole = _elements(shape) * size
  if d.two_phase:
    shaped = matrix_shape(shape, rank) if dtype == 'float32' else None
    if shaped is None:
      return (whole, 0)
    n, m, r = shaped
    return (r * n * size, r * m * size)
  if d.wire_dtype and dtype == 'float32':
    return (_elements(shape) * DTYPE_BYTES[d.wire_dtype],)
  return (whole,)


def wire_bytes(name: str, gradients, rank: int = DEFAULT_POWERSGD_RANK) -> int:
  """Bytes one replica hands its all-reduce per step (every phase).

  gradients: (shape, dtype name) of every gradient. What the reduction
  multiplies this by (a ring's 2 (N-1) / N) is the transport's, not the
  compressor's.
  """
  return sum(
    sum(wire_phases(name, shape, dtype, rank)) for shape, dtype in gradients
  )


@dataclasses.dataclass(frozen=True)
class Work:
  """The compute a compressor adds to one replica's step.

  elementwise: float32 elements read and written by its elementwise ops
    (casts, error-feedback adds), counted once per op;
  matmul_flops: PowerSGD's three matmuls per matrix (P = M Q, Q = M^T P^,
    P^ Q^T), 2 n m r flops each, plus orthogonalising P (2 n r^2);
  matmul_elements: the n x m elements those matmuls read or write (3 n m:
    with a thin rank-r factor each is one pass over the matrix).
  """

  elementwise: int = 0
  matmul_flops: int = 0
  matmul_elements: int = 0


# Elementwise ops per float32 element: a cast rounds (1) and the reduced
# value is cast back (1); error feedback adds the error, casts back its
# rounded value and subtracts (3 more). PowerSGD forms M = g + e and the new
# error M - P^ Q^T / N (3).
_ELEMENTWISE_OPS = {'cast': 2, 'cast_ef': 5, 'powersgd': 3}


def work(name: str, gradients, rank: int = DEFAULT_POWERSGD_RANK) -> Work:
  """The compute compressor `name` adds per replica per step (Work)."""
  d = COMPRESSORS[name]
  elementwise = flops = streamed = 0
  for shape, dtype in gradients:
    if dtype != 'float32':
      continue
    if d.two_phase:
      shaped = matrix_shape(shape, rank)
      if shaped:
        n, m, r = shaped
        elementwise += _ELEMENTWISE_OPS['powersgd'] * n * m
        flops += 3 * 2 * n * m * r + 2 * n * r * r
        streamed += 3 * n * m
    elif d.wire_dtype:
      ops = _ELEMENTWISE_OPS['cast_ef' if d.error_feedback else 'cast']
      elementwise += ops * _elements(shape)
  return Work(
    elementwise=elementwise, matmul_flops=flops, matmul_elements=streamed
  )
