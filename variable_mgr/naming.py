"""How replicas of a variable are named: the one place that knows the prefixes.

Every tower builds its model under a variable scope, so each variable's name
is a *replica prefix* followed by a *relative name* that is the same in every
mode:

  * 'v0/', 'v1/', ... : tower i's own copy (replicated, independent and the
    cluster modes that keep a copy per tower);
  * 'v/' : the shared copy every tower reads (parameter_server; the ps-held
    copy of distributed_replicated and hybrid).

So 'v0/conv0/kernel', 'v3/conv0/kernel' and 'v/conv0/kernel' are replicas of
the relative name 'conv0/kernel'. A name without a replica prefix (the global
step, the loss scale, optimizer state made outside the towers) belongs to no
replica.

Checkpoints store one copy per relative name under the relative name itself:
the copy that stands for every tower (tower 0's, or the shared one); other
replicas are not saved (see `checkpoint_name`). So a checkpoint written in one
mode loads in another.

Only strings here: no TensorFlow.
"""

from __future__ import annotations

import re

# Variable scope of the shared copy, and the prefix of its variables' names.
SHARED_SCOPE = 'v'
SHARED_PREFIX = SHARED_SCOPE + '/'

# 'v/', 'v0/', 'v12/': the prefix of a replica (a tower's or the shared copy).
_REPLICA_PREFIX = re.compile(r'^%s\d*/' % SHARED_SCOPE)


def tower_scope_name(index: int) -> str:
  """Variable scope of tower `index`'s own copy: 'v0', 'v1', ..."""
  return '%s%d' % (SHARED_SCOPE, index)


def tower_prefix(index: int) -> str:
  """Name prefix (with trailing '/') of tower `index`'s own copy: 'v0/'."""
  return tower_scope_name(index) + '/'


def tower_name(index: int, relative: str) -> str:
  """The name of tower `index`'s copy of `relative`: 'v2/conv0/kernel'."""
  return tower_prefix(index) + relative


def shared_name(relative: str) -> str:
  """The name of the shared copy of `relative`: 'v/conv0/kernel'."""
  return SHARED_PREFIX + relative


def is_replica_name(name: str) -> bool:
  """Whether `name` is a replica: it starts with 'v/' or 'vN/'."""
  return _REPLICA_PREFIX.match(name) is not None


def strip_replica_prefix(name: str) -> str:
  """The relative name of a replica ('vN/' or 'v/' dropped); others as given."""
  return _REPLICA_PREFIX.sub('', name, count=1)


def relative_name(name: str, prefix: str) -> str | None:
  """`name` without `prefix` if it starts with it, else None.

  E.g. relative_name('v0/conv0/kernel', tower_prefix(0)) == 'conv0/kernel'.
  """
  return name[len(prefix) :] if name.startswith(prefix) else None


def checkpoint_name(name: str, saved_prefix: str) -> str | None:
  """The name a checkpoint stores variable `name` under; None: not saved.

  Args:
    name: the variable's name in the graph.
    saved_prefix: the prefix of the copy that stands for every tower
      (tower 0's 'v0/', or the shared 'v/').

  Returns:
    The relative name for that copy; None for any other replica (the other
    towers' copies equal it after initialisation); the name itself for a
    variable of no replica.
  """
  relative = relative_name(name, saved_prefix)
  if relative is not None:
    return relative
  return None if is_replica_name(name) else name
