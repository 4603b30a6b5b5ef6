"""PowerSGD (Vogels, Karimireddy and Jaggi, NeurIPS 2019): rank-R gradients.

Each float32 gradient of rank >= 2 is seen as an n x m matrix (its last
axis the columns: a conv kernel [h, w, in, out] is [h*w*in, out]); with
M_i = g_i + e_i (replica i's gradient plus its error buffer) and Q the
shared m x R matrix of the previous step (warm start), one step is:

  P_i = M_i Q;          P = all-reduce(P_i);     P^ = orthogonalise(P)
  Q_i = M_i^T P^;       Q = all-reduce(Q_i)
  reduced gradient = P^ Q^T;  e_i' = M_i - P^ Q^T (as a mean);  Q' = Q (mean)

Orthogonalisation is modified Gram-Schmidt over P's R columns, each divided
by (its norm + EPSILON). A matrix too small to gain (R (n + m) >= n m),
vectors and other dtypes travel uncompressed with the P's. The first Q is a
fixed normal draw per variable, the same in every process.
"""

from __future__ import annotations

import zlib

import numpy as np
import tensorflow as tf

from variable_mgr.compression import base
from variable_mgr.compression import catalog

ERROR_STATE = 'powersgd_error'
Q_STATE = 'powersgd_q'
EPSILON = 1e-8


def matrix_shape(shape, rank: int):
  """(n, m, r) of a gradient of `shape` compressed at `rank`; None: sent as
  it is (catalog.matrix_shape, the one statement of the rule)."""
  return catalog.matrix_shape(shape, rank)


def initial_q(name: str, m: int, r: int) -> np.ndarray:
  """The first Q of the variable named `name`: seeded by the name, so every
  process (and every run) draws the same."""
  rng = np.random.RandomState(zlib.crc32(name.encode()))
  return rng.standard_normal((m, r)).astype(np.float32)


def orthogonalise(p: tf.Tensor) -> tf.Tensor:
  """P's columns made orthonormal, in order (modified Gram-Schmidt)."""
  columns = []
  for c in tf.unstack(p, axis=1):
    for q in columns:
      c = c - tf.reduce_sum(q * c) * q
    columns.append(c / (tf.norm(c) + EPSILON))
  return tf.stack(columns, axis=1)


class PowerSGD(base.Compressor):
  """Rank-R approximations of the gradients, reduced in two phases."""

  name = 'powersgd'

  def __init__(self, rank: int = 4):
    super().__init__()
    if rank < 1:
      raise ValueError('PowerSGD rank must be >= 1, got %d' % rank)
    self.rank = rank

  def describe(self) -> str:
    return catalog.describe(self.name, self.rank)

  def reduce(self, tower_grads, wire):
    shapes = [matrix_shape(g.shape, self.rank) for g in tower_grads[0]]
    shapes = [
      s if s and g.dtype == tf.float32 else None
      for s, g in zip(shapes, tower_grads[0])
    ]
    towers = [
      self._tower(grads, shapes, wire, i) for i, grads in enumerate(tower_grads)
    ]
    # Phase 1: every P, and the gradients sent as they are.
    first = wire.reduce([t.first_phase() for t in towers])
    for t, reduced in zip(towers, first):
      t.receive_p(reduced)
    # Phase 2: every Q_i = M_i^T P^.
    second = wire.reduce([t.second_phase() for t in towers])
    out, updates = [], []
    for t, reduced in zip(towers, second):
      out.append(t.receive_q(reduced, wire.to_mean, updates))
    ops = base.guarded_updates(updates, wire.devices[0])
    return base.after(out, ops, wire.devices)

  def _tower(self, grads, shapes, wire, i) -> '_Tower':
    """Tower i's matrices M_i and state, read on its device."""
    device = wire.devices[i]
    tower = _Tower(device, grads, shapes)
    with tf.device(device):
      for j, shape in enumerate(shapes):
        if shape is None:
          continue
        n, m, r = shape
        g = tf.convert_to_tensor(grads[j])
        error = self.replica_variable(
          wire.first_replica + i,
          wire.name(j),
          ERROR_STATE,
          g,
          device,
          per_worker=len(wire.devices),
        )
        q = self.tower_variable(
          wire.tower_prefix(i),
          wire.name(j),
          Q_STATE,
          initial_q(wire.name(j), m, r),
          device,
        )
        tower.add_matrix(j, g, error, q, (n, m))
    return tower


class _Tower:
  """One tower's side of a PowerSGD step (every op on its device)."""

  def __init__(self, device, grads, shapes):
    self.device = device
    self.grads = list(grads)
    self.shapes = shapes
    self.matrices = {}  # j -> (M, error, error read, Q var, Q read)
    self.p_hat = {}

  def add_matrix(self, j, g, error, q, nm) -> None:
    old_error = error.read_value()
    old_q = q.read_value()
    m = tf.reshape(g + old_error, nm)
    self.matrices[j] = (m, error, old_error, q, old_q)

  def first_phase(self) -> list:
    with tf.device(self.device):
      ps = [tf.matmul(m, q) for m, _, _, _, q in self.matrices.values()]
    return ps + [g for j, g in enumerate(self.grads) if j not in self.matrices]

  def receive_p(self, reduced) -> None:
    count = len(self.matrices)
    self.plain = reduced[count:]
    with tf.device(self.device):
      for j, p in zip(self.matrices, reduced[:count]):
        self.p_hat[j] = orthogonalise(p)

  def second_phase(self) -> list:
    with tf.device(self.device):
      return [
        tf.matmul(m, self.p_hat[j], transpose_a=True)
        for j, (m, _, _, _, _) in self.matrices.items()
      ]

  def receive_q(self, reduced, to_mean, updates) -> list:
    """The tower's reduced gradients; appends its state updates."""
    out, plain = [], iter(self.plain)
    reduced_q = dict(zip(self.matrices, reduced))
    with tf.device(self.device):
      for j, g in enumerate(self.grads):
        if j not in self.matrices:
          out.append(next(plain))
          continue
        m, error, old_error, q, old_q = self.matrices[j]
        approx = tf.matmul(self.p_hat[j], reduced_q[j], transpose_b=True)
        mean = approx * to_mean
        updates.append((error, old_error, tf.reshape(m - mean, g.shape)))
        updates.append((q, old_q, reduced_q[j] * to_mean))
        out.append(tf.reshape(approx, g.shape))
    return out
