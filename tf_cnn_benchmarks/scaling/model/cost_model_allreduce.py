"""What each all-reduce algorithm sends, as jobs (variable_mgr/allreduce.py).

Each builder takes the places holding one tensor of `nbytes` (one per
device, in the order the algorithm sees them), the jobs the tensor waits
for, and returns one job per place: when that place holds the sum.

  copy, pscpu, psgpu, shuffle   gather pieces on some places, add, scatter
  xring, collective, nccl       a ring: reduce-scatter then all-gather,
                                2(n-1) steps of nbytes/n (per ring)
  rechd                         recursive halving-doubling (folding the
                                devices past the largest power of two)
  hierarchical_copy             two halves reduce on their heads, the heads
                                swap partial sums, each broadcasts
  a/b                           a within each worker, b across the workers'
                                first devices, then a copy to every device
"""

from __future__ import annotations

from typing import List, Sequence


def _cpu_of(place):
  return ('cpu', place[1]) if place[0] == 'dev' else place


def _transport(alg: str, places) -> str:
  """collective ops use the collective transport across hosts; the rest gRPC."""
  del places
  return 'collective' if alg in ('collective', 'nccl') else 'grpc'


def gather_scatter(b, places, gathers, pieces, nbytes, deps, transport):
  """Piece s (of `pieces`) summed on gathers[s % g], then sent to all."""
  n, size = len(places), nbytes / pieces
  owners = [gathers[s % len(gathers)] for s in range(pieces)]
  flows = [(p, o) for o in owners for p in places]
  gathered = b.phase(flows, size, deps, transport, 'gather')
  adds = b.work(owners, b.add_us(size) * max(0, n - 1), [gathered], 'add')
  back = [(o, p) for o in owners for p in places]
  done = b.phase(back, size, [adds], transport, 'scatter')
  return [done] * n


def ring(b, places, nbytes, deps, transport, rings=1, both_ways=True):
  """R rings over `places` (odd rings backwards when both_ways)."""
  n = len(places)
  if n == 1:
    return [b.graph.join(deps, 'ring1')]
  chunk = nbytes / (rings * n)
  ends = []
  for r in range(rings):
    order = list(places)
    shift = (r // 2) % n
    order = order[shift:] + order[:shift]
    if both_ways and r % 2:
      order = order[::-1]
    flows = [(order[p], order[(p + 1) % n]) for p in range(n)]
    # The 2(n-1) steps move the same flows: one job (see phase's repeat),
    # then the n-1 adds of each position.
    moved = b.phase(flows, chunk, deps, transport, 'ring', 2 * (n - 1))
    ends.append(b.work(order, b.add_us(chunk) * (n - 1), [moved], 'adds'))
  return [b.graph.join(ends, 'rings')] * n


def rechd(b, places, nbytes, deps, transport):
  """Recursive halving-doubling; any n (extra devices fold in first)."""
  n = len(places)
  if n == 1:
    return [b.graph.join(deps, 'rechd1')]
  p = 1 << (n.bit_length() - 1)
  extra = n - p
  last = b.graph.join(deps, 'rechd start')
  if extra:
    fold = [(places[2 * i + 1], places[2 * i]) for i in range(extra)]
    last = b.phase(fold, nbytes, [last], transport, 'fold')
  ranks = [places[2 * i] for i in range(extra)] + list(places[2 * extra :])
  size, distance = nbytes / 2.0, p // 2
  sizes = []
  while distance >= 1:
    pairs = [(ranks[k], ranks[k ^ distance]) for k in range(p)]
    last = b.phase(pairs, size, [last], transport, 'halving')
    last = b.work(ranks, b.add_us(size), [last], 'rechd add')
    sizes.append((distance, size))
    size, distance = size / 2.0, distance // 2
  for distance, size in reversed(sizes):
    pairs = [(ranks[k], ranks[k ^ distance]) for k in range(p)]
    last = b.phase(pairs, size, [last], transport, 'doubling')
  if extra:
    unfold = [(places[2 * i], places[2 * i + 1]) for i in range(extra)]
    last = b.phase(unfold, nbytes, [last], transport, 'unfold')
  return [last] * n


def hierarchical_copy(b, places, nbytes, deps, transport):
  """Two halves sum on their heads, swap partials, broadcast."""
  n = len(places)
  if n == 1:
    return [b.graph.join(deps, 'hc1')]
  half = (n + 1) // 2
  heads = (places[0], places[half])
  flows = [(p, heads[0]) for p in places[:half]]
  flows += [(p, heads[1]) for p in places[half:]]
  gathered = b.phase(flows, nbytes, deps, transport, 'hc gather')
  adds = b.work(heads, b.add_us(nbytes) * max(1, half - 1), [gathered], 'add')
  swap = b.phase(
    [(heads[0], heads[1]), (heads[1], heads[0])], nbytes, [adds], transport
  )
  added = b.work(heads, b.add_us(nbytes), [swap], 'hc add')
  back = [(heads[0], p) for p in places[:half]]
  back += [(heads[1], p) for p in places[half:]]
  return [b.phase(back, nbytes, [added], transport, 'hc bcast')] * n


def one_level(b, name, shards, places, nbytes, deps) -> List[int]:
  """Algorithm `name` (with its #N) over `places`."""
  transport = _transport(name, places)
  n = len(places)
  if n == 1:
    return [b.graph.join(deps, name)]
  if name in ('copy', 'pscpu', 'psgpu', 'shuffle'):
    gathers = {
      'copy': [places[0]],
      'pscpu': [_cpu_of(places[0])],
      'psgpu': list(places),
      'shuffle': [
        places[(g * n) // min(shards, n)] for g in range(min(shards, n))
      ],
    }[name]
    pieces = {'psgpu': n * shards, 'shuffle': min(shards, n)}.get(name, shards)
    return gather_scatter(b, places, gathers, pieces, nbytes, deps, transport)
  if name in ('xring', 'collective', 'nccl'):
    both = name == 'xring'
    return ring(b, places, nbytes, deps, transport, max(1, shards), both)
  per_shard = nbytes / max(1, shards)
  outs = []
  for _ in range(max(1, shards)):
    if name == 'rechd':
      outs.append(rechd(b, places, per_shard, deps, transport)[0])
    elif name == 'hierarchical_copy':
      outs.append(hierarchical_copy(b, places, per_shard, deps, transport)[0])
    else:
      raise ValueError('no cost model for all-reduce algorithm %r' % name)
  return [b.graph.join(outs, name)] * n


def all_reduce(b, alg, places: Sequence, nbytes, deps) -> List[int]:
  """One tensor's all-reduce with a parsed AlgSpec (intra[/inter])."""
  workers = sorted({p[1] for p in places if p[0] == 'dev'})
  if alg.inter is None or len(workers) <= 1:
    return one_level(b, alg.intra, alg.shards, places, nbytes, deps)
  heads, intra_done = [], {}
  for w in workers:
    members = [p for p in places if p[1] == w]
    outs = one_level(b, alg.intra, alg.shards, members, nbytes, deps)
    intra_done[w] = (members, outs)
    heads.append((members[0], outs[0]))
  across = one_level(
    b,
    alg.inter,
    alg.inter_shards,
    [h for h, _ in heads],
    nbytes,
    [j for _, j in heads],
  )
  result = {}
  for (head, _), done in zip(heads, across):
    members, _ = intra_done[head[1]]
    flows = [(head, p) for p in members]
    copied = b.phase(flows, nbytes, [done], 'grpc', 'inter bcast')
    for p in members:
      result[p] = copied
  return [result[p] for p in places]
