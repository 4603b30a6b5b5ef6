"""Group and instance keys for TensorFlow collective ops.

`CollectiveReduceV2` identifies who takes part in a reduction by two integer
keys: the *group key* names a fixed set of devices (same key => same devices,
same group size) and the *instance key* names one reduction within a step.
Two reductions that reuse an instance key in one graph would be matched with
each other by the runtime, so instance keys are counted by an allocator object
that lives as long as the graph it serves; group keys are derived from the
device names (see _group_key_of).
"""

import hashlib
import threading
import weakref

import tensorflow as tf

tf1 = tf.compat.v1

# One allocator per graph; weak keys so a discarded graph frees its entry.
_PER_GRAPH = weakref.WeakKeyDictionary()
_PER_GRAPH_LOCK = threading.Lock()


def _canonical_device(device):
  """Returns the fully spelled-out form of a device string."""
  return tf.DeviceSpec.from_string(device).to_string()


def _group_key_of(members):
  """A stable key for a sorted tuple of device names.

  Derived from the names rather than counted, because a server remembers
  group keys for its whole life: a later graph (eval after train, a second
  session on the same server) that counted from 1 again would hand an old
  key to a different device set, which the runtime rejects. A hash gives the
  same set the same key in every graph and every worker process.
  """
  digest = hashlib.sha256('|'.join(members).encode()).digest()
  # Stay in [2**20, 2**31): positive int32, and clear of small hand-picked
  # keys that other code may use.
  return 2**20 + int.from_bytes(digest[:4], 'big') % (2**31 - 2**20)


class CollectiveKeys:
  """Hands out collective group and instance keys for one graph.

  Group keys are stable per device set: asking twice for the same devices
  (in any order) returns the same key, as the runtime requires. Instance keys
  are fresh on every call, counted from `instance_key_start`.
  """

  def __init__(self, instance_key_start=1):
    self._next_instance_key = int(instance_key_start)
    self._group_keys = {}
    self._lock = threading.Lock()

  def get_group_key(self, devices):
    """Returns the group key for this set of devices."""
    members = tuple(sorted(_canonical_device(d) for d in devices))
    with self._lock:
      key = self._group_keys.get(members)
      if key is None:
        key = _group_key_of(members)
        if key in self._group_keys.values():
          raise ValueError(f'collective group key collision for {members}')
        self._group_keys[members] = key
      return key

  def get_instance_key(self):
    """Returns a new instance key, never handed out before by this object."""
    with self._lock:
      key = self._next_instance_key
      self._next_instance_key += 1
      return key


def keys_for_graph(graph=None):
  """Returns the allocator of `graph` (default: the current default graph).

  The allocator is created on first use, so every caller that does not bring
  its own allocator shares one counter per graph and never collides.
  """
  graph = graph if graph is not None else tf1.get_default_graph()
  with _PER_GRAPH_LOCK:
    keys = _PER_GRAPH.get(graph)
    if keys is None:
      keys = CollectiveKeys()
      _PER_GRAPH[graph] = keys
    return keys
