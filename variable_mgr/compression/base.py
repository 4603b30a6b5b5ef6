"""The compressor contract (Compressor, Wire) and its state variables.

A manager hands a compressor every tower's gradients and a Wire: its own
plain reduction (the all-reduce spec with its packing, or the collectives)
and what the compressor needs to know about it. The compressor compresses on
each tower's device, calls the reduction once (a cast) or twice (PowerSGD's
P, then Q), decompresses on each tower's device, and returns the reduced
gradients in the reduction's own units (sums or means) and dtypes, so the
manager's unscaling, inf/nan check, clipping and update see them as they
would see uncompressed ones.

A parameter server's push has no reduction of its own to call: push()
compresses on the worker, pull() decompresses where the gradient lands.

State (error buffers, PowerSGD's Q) is made of global, non-trainable
variables, so checkpoints save them:
  * what each replica keeps for itself (an error buffer) is named
    'gradient_compression/replica_K/NAME/STATE', K the replica's index in
    the whole run; a checkpoint saves every one of this process (and in a
    cluster of a graph per worker, the chief's every worker's: see
    worker_state.py), and the v0 copy leaves it alone;
  * what the replicas share (PowerSGD's Q, equal on every replica after a
    step) is a tower copy 'vI/NAME/STATE': a checkpoint saves tower 0's,
    and the manager's v0 copy (or broadcast) makes every tower's equal.
A state update is written only when every new value of the step is finite:
an inf/nan step (fp16 loss scaling skips it) must not poison the buffers.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, ClassVar, Optional, Sequence

import tensorflow as tf

from variable_mgr import naming
from variable_mgr import worker_state
from variable_mgr.compression import catalog

tf1 = tf.compat.v1

# Scope of the per-replica state (see the module docstring).
REPLICA_STATE_SCOPE = 'gradient_compression'


@dataclasses.dataclass(frozen=True)
class Wire:
  """How one manager's gradients reach the other replicas.

  devices: this graph's tower devices; every list of tensors is per tower,
    in this order.
  reduce: fn(tower_tensors) -> reduced, reduced[i][k] on devices[i]: the
    manager's plain reduction of tensor k over every replica.
  mean: `reduce` returns the mean over the replicas (else the sum).
  num_replicas: how many replicas the reduction spans (every tower of
    every worker).
  first_replica: the run-wide index of this graph's tower 0.
  names: per gradient, its variable's relative name (naming.py); None:
    'grad_J'.
  tower_prefixes: per tower, the prefix of its copy of shared state
    (the manager's variable_prefix: 'v0/', 'v1/', ...); None: 'vI/'.
  """

  devices: tuple
  reduce: Callable
  mean: bool = False
  num_replicas: int = 1
  first_replica: int = 0
  names: Optional[tuple] = None
  tower_prefixes: Optional[tuple] = None

  def name(self, j: int) -> str:
    """The relative name gradient j's state is named after."""
    return self.names[j] if self.names else 'grad_%d' % j

  def tower_prefix(self, i: int) -> str:
    """The prefix of tower i's copy of shared state."""
    if self.tower_prefixes:
      return self.tower_prefixes[i]
    return naming.tower_prefix(i)

  @property
  def to_mean(self) -> float:
    """What turns `reduce`'s output into the mean over the replicas."""
    return 1.0 if self.mean else 1.0 / self.num_replicas


class Compressor:
  """Base of the compressors: how gradients travel, and back.

  Subclasses set `name` (a key of catalog.COMPRESSORS) and implement
  reduce(); those that are not two-phase implement push() and pull() too.
  """

  name: ClassVar[str] = ''

  def __init__(self, rank: int = catalog.DEFAULT_POWERSGD_RANK):
    del rank  # PowerSGD's; the others have no setting
    # Every state variable this compressor made, in creation order.
    self.state: list = []

  @property
  def declared(self) -> catalog.Declared:
    """The catalog's declaration of this compressor."""
    return catalog.declared(self.name)

  def describe(self) -> str:
    """The compressor and its settings, in words."""
    return catalog.describe(self.name, catalog.DEFAULT_POWERSGD_RANK)

  def reduce(
    self, tower_grads: Sequence[Sequence[tf.Tensor]], wire: Wire
  ) -> list:
    """out[i][j]: gradient j reduced over every replica, on wire.devices[i].

    tower_grads[i][j]: tower i's gradient j (every tower has the same
    shapes and dtypes). The output is in the units of wire.reduce (sums or
    means) and the gradients' own dtypes.
    """
    raise NotImplementedError

  def push(self, grads, device: str, replica: int, names=None) -> list:
    """What this replica sends of `grads` (compressed on `device`)."""
    raise NotImplementedError('%s has no one-way push' % self.name)

  def pull(self, sent: tf.Tensor, dtype, device: str) -> tf.Tensor:
    """A pushed tensor (or a reduction of pushed ones) as `dtype`."""
    del dtype, device
    return sent

  # ---- state ---------------------------------------------------------------

  def replica_variable(
    self, replica: int, name: str, state: str, like, device, per_worker=1
  ):
    """Replica `replica`'s own state for gradient `name` (zeros first).

    per_worker: how many replicas each worker has (replica = its worker's
    index x per_worker + its tower): the same state of worker W's replicas
    is named after W x per_worker + that tower (worker_state.py).
    """
    shape, dtype = like.shape, like.dtype.base_dtype

    def name_of(index):
      return '%s/replica_%d/%s/%s' % (REPLICA_STATE_SCOPE, index, name, state)

    var = self._variable(
      name_of(replica), lambda: tf.zeros(shape, dtype), device
    )
    tower = replica % per_worker
    worker_state.register(var, lambda w: name_of(w * per_worker + tower))
    return var

  def tower_variable(self, prefix: str, name: str, state: str, initial, device):
    """A tower's copy of state every replica shares: 'vI/NAME/STATE'.

    initial: its first value (a numpy array).
    """
    return self._variable(
      prefix + name + '/' + state, lambda: tf.constant(initial), device
    )

  def _variable(self, name: str, make_initial, device) -> tf.Variable:
    # Outside the caller's control scope (its initialiser runs at init) and
    # name scope (the name is the full checkpoint name).
    with tf.control_dependencies(None), tf1.name_scope(None):
      with tf.device(device):
        var = tf1.Variable(
          make_initial(),
          trainable=False,
          use_resource=True,
          name=name,
          collections=[tf1.GraphKeys.GLOBAL_VARIABLES],
        )
    self.state.append(var)
    return var


def guarded_updates(updates, device: str) -> list:
  """Assign ops for (variable, old value, new value) triples.

  Every variable takes its new value only if all new values are finite,
  else keeps the old one: a step whose gradients hold inf/nan (the loss
  scale's overflow) leaves the state as it was. Each new value is checked
  on its own variable's device and only the one-bit verdicts meet on
  `device`: checking them all there would send every tower's state (a
  gradient's size) to it each step, across the network when the towers
  are on other workers.
  """
  if not updates:
    return []
  verdicts = []
  for var, _, new in updates:
    with tf.device(var.device):
      verdicts.append(tf.reduce_all(tf.math.is_finite(new)))
  with tf.device(device):
    finite = tf.reduce_all(verdicts)
  ops = []
  for var, old, new in updates:
    with tf.device(var.device):
      ops.append(var.assign(tf.where(finite, new, old), read_value=False))
  return ops


def after(tower_tensors, ops, devices) -> list:
  """tower_tensors, each read only after `ops` ran (on its tower's device).

  The compressor's state updates ride on its outputs: whatever uses the
  reduced gradients runs them, with no hook in the manager.
  """
  if not ops:
    return [list(tensors) for tensors in tower_tensors]
  out = []
  for tensors, device in zip(tower_tensors, devices):
    with tf.device(device), tf.control_dependencies(ops):
      out.append([tf.identity(t) for t in tensors])
  return out
