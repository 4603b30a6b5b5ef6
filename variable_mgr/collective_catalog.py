"""The collective flags as data: names, checks, header and results keys.

No TensorFlow here (the flag declarations, resolution and the results
readers import it); the ops themselves are built by collective_options.py,
which says what the flags do.
"""

from __future__ import annotations

from variable_mgr import allreduce_spec

IMPLEMENTATIONS = ('auto', 'ring', 'nccl')
RESULT_KEYS = (
  'collective_implementation',
  'collective_bytes_per_pack',
  'collective_merge_scope',
)


def resolved(implementation: str, device_kind: str) -> str:
  """The hint a run's tower collectives get ('ring' or 'nccl')."""
  if implementation == 'auto':
    return 'nccl' if device_kind == 'gpu' else 'ring'
  return implementation


# The managers whose gradients cross workers in collectives (collectives.py).
GRADIENT_COLLECTIVE_MANAGERS = ('collective_all_reduce', 'hybrid')


def runs_collectives(manager_name: str, all_reduce: bool, spec) -> bool:
  """Whether a run's gradients travel in collective ops.

  all_reduce: the manager takes an all-reduce spec; spec: the parsed
  --all_reduce_spec (None: unset).
  """
  if manager_name in GRADIENT_COLLECTIVE_MANAGERS:
    return True
  return all_reduce and spec is not None and 'collective' in spec.algorithms


def check_flags(p, *, uses_collectives: bool, device: str) -> None:
  """The collective flags of Params `p` fit the run.

  Raises ValueError, its message one line naming the flag and what is
  allowed.
  """
  impl, pack = p.collective_implementation, p.collective_bytes_per_pack
  if impl not in IMPLEMENTATIONS:
    raise ValueError(
      '--collective_implementation=%s: one of %s'
      % (impl, ', '.join(IMPLEMENTATIONS))
    )
  if impl == 'nccl' and device != 'gpu':
    raise ValueError(
      '--collective_implementation=nccl: NCCL runs on GPUs only, and this '
      'run is on --device=%s; use auto or ring' % device
    )
  if pack < 0:
    raise ValueError('--collective_bytes_per_pack=%d: must be >= 0' % pack)
  where = (
    'collective_all_reduce, hybrid, or an all-reduce manager with '
    '--all_reduce_spec=collective[#N]'
  )
  if not uses_collectives and (impl != 'auto' or pack):
    flag = '--collective_%s' % (
      'implementation' if impl != 'auto' else 'bytes_per_pack'
    )
    raise ValueError(
      '%s: only for runs whose gradients travel in '
      'collectives (%s)' % (flag, where)
    )
  if pack and (p.gradient_repacking or p.agg_small_grads_max_bytes):
    raise ValueError(
      '--collective_bytes_per_pack and --gradient_repacking / '
      '--agg_small_grads_max_bytes: use one packing, not both'
    )


def merges(p) -> bool:
  """Whether Params `p` merge collectives with the scoped allocator:
  --allreduce_merge_scope > 1 with collective_all_reduce or hybrid."""
  return (
    p.variable_update in GRADIENT_COLLECTIVE_MANAGERS
    and p.allreduce_merge_scope > 1
  )


def run_uses_collectives(p) -> bool:
  """Whether the gradients of (resolved) Params `p` travel in collectives.

  A spec naming `collective` is only accepted by the managers that take it,
  so the manager's all_reduce trait needs no asking here.
  """
  spec = (
    allreduce_spec.parse_all_reduce_spec(p.all_reduce_spec)
    if p.all_reduce_spec
    else None
  )
  return runs_collectives(p.variable_update, True, spec)


def wants_nccl_session(p) -> bool:
  """Whether a GPU run of Params `p` sets `experimental.collective_nccl`:
  its gradient collectives resolve to nccl. Never with ring: the session
  flag would make TensorFlow pick NCCL whatever the hint."""
  if p.device != 'gpu':
    return False
  nccl = resolved(p.collective_implementation, 'gpu') == 'nccl'
  return nccl and run_uses_collectives(p)


def result_keys(p) -> dict:
  """The collective implementation and its settings, as the results line
  has them (all None when the run's gradients use no collectives):
  collective_implementation ('ring' or 'nccl', resolved from auto),
  collective_bytes_per_pack (0: one collective per gradient) and
  collective_merge_scope (--allreduce_merge_scope where the scoped
  allocator merges: collective_all_reduce and hybrid)."""
  if not run_uses_collectives(p):
    return dict.fromkeys(RESULT_KEYS)
  return {
    'collective_implementation': resolved(
      p.collective_implementation, p.device
    ),
    'collective_bytes_per_pack': p.collective_bytes_per_pack,
    'collective_merge_scope': (
      p.allreduce_merge_scope
      if p.variable_update in GRADIENT_COLLECTIVE_MANAGERS
      else None
    ),
  }


def describe(p) -> str:
  """The header's Collectives row: the implementation and its settings."""
  keys = result_keys(p)
  if keys['collective_implementation'] is None:
    return 'none (no gradient collectives)'
  text = keys['collective_implementation']
  if p.collective_implementation == 'auto':
    text += ' (auto)'
  pack = keys['collective_bytes_per_pack']
  text += ', packs <= %d bytes' % pack if pack else ', one per gradient'
  merge = keys['collective_merge_scope']
  if merge and merge > 1:
    text += ', %d per scope merged by the scoped allocator' % merge
  return text
