"""One step of each strategy as jobs, following what the managers send.

From variable_mgr/ (defaults: --pack_ps_transfers, --cross_replica_sync):

replicated, distributed_all_reduce: each gradient (or pack) is all-reduced
  as soon as every tower has it (the reduction is outside the update's
  barrier, so it overlaps the backward pass); every tower applies after all
  its sums. With --gradient_repacking the packs wait for every gradient
  (they are concatenations). Workers with one inter-op thread start them
  only after every worker's compute (StepBuilder.transfers_wait_for_compute).
collective_all_reduce: the same with CollectiveReduceV2 over every tower of
  every worker (a ring), one per gradient, plus one scalar for the loss
  (beside the update: the train op groups them).
parameter_server: the variables live on the ps tasks, placed greedily by
  bytes (least-loaded task first, in model order); each step a worker reads
  them in one packed message per ps task, computes, averages its towers,
  then (after every gradient: the push is under the all-gradients barrier)
  pushes one packed message per ps task; the chief applies once every
  worker pushed and releases the others with a token.
distributed_replicated: no reads at the start; the same push and apply,
  then each worker reads the updated shared copies back (one packed message
  per ps task) and assigns them to every tower.
hybrid: variables over the threshold on the ps (read by every tower,
  one message per variable), the rest all-reduced with collectives; both
  wait for every gradient (the push as cost_model_ps says); an end-of-step
  barrier (a scalar collective).
"""

from __future__ import annotations

from tf_cnn_benchmarks.scaling.model import cost_model_allreduce as ar
from tf_cnn_benchmarks.scaling.model import cost_model_compression
from tf_cnn_benchmarks.scaling.model import simulate
from variable_mgr import grouping


def places(target):
  """Every tower device, worker-major (the collective group's order)."""
  return [
    ('dev', w, d)
    for w in range(target.num_workers)
    for d in range(target.devices_per_worker)
  ]


def towers(b, start_deps, gates=None):
  """All towers' compute; start_deps[w] = jobs worker w's towers wait for;
  gates[place] = {profiled ms: jobs} that tower's compute from then on
  waits for (StepBuilder.tower).

  Returns (ready, last): ready[(w, d)][i] the job at which gradient i is
  ready on that tower, last[(w, d)] the tower's last compute job.
  """
  ready, last, gates = {}, {}, gates or {}
  for place in places(b.target):
    w = place[1]
    deps = list(start_deps.get(w, [])) + b.begin(w)
    ready[place], last[place] = b.tower(w, place[2], deps, gates.get(place))
  return ready, last


def greedy_placement(nbytes, num_ps):
  """The ps task of each variable: least loaded by bytes, ties to the lowest.

  As local.GreedyVariablePlacer places variables in model order.
  """
  load, where = [0] * num_ps, []
  for n in nbytes:
    k = min(range(num_ps), key=load.__getitem__)
    load[k] += n
    where.append(k)
  return where


def step_end(b, worker_ends):
  """Each worker's end with the profiled fixed per-step overhead after it."""
  delay = b.overhead_ms() * 1000.0 * b.compute_scale
  return {
    w: b.graph.add(_delay_job(delay, ends)) for w, ends in worker_ends.items()
  }


def _delay_job(delay, deps):
  return simulate.Job(0.0, delay_us=delay, deps=tuple(deps), name='overhead')


def _small_groups(b, ready, agg):
  """--agg_small_grads_*: the harness's own grouping of small gradients.

  A group travels as one concatenation, so it waits for all its members.
  """
  grads, places_ = b.profile.gradients, list(ready)
  groups = grouping.small_groups(
    [g.bytes for g in grads], [g.dtype for g in grads], agg[0], agg[1]
  )
  units = []
  for members in groups:
    nbytes = sum(grads[i].bytes for i in members)
    deps = [ready[p][i] for p in places_ for i in members]
    if len(members) > 1:  # the concat on every tower
      deps = [b.work([p], b.add_us(nbytes), deps, 'concat') for p in places_]
    units.append((nbytes, deps))
  return units


def _units(b, ready, last, repacking, agg=(0, 10)):
  """(bytes, deps) of each all-reduce unit: gradients, small-gradient
  groups (agg = (max bytes, max group)), or packs of all."""
  grads = b.profile.gradients
  all_places = list(ready)
  if agg[0] > 0 and agg[1] > 1 and repacking <= 0:
    return _small_groups(b, ready, agg)
  if repacking <= 0:
    return [
      (g.bytes, [ready[p][i] for p in all_places]) for i, g in enumerate(grads)
    ]
  sizes = b.profile.chunks.get('repacking=%d' % repacking)
  if not sizes:
    total, n = sum(g.bytes for g in grads), repacking
    sizes = [total // n + (1 if k < total % n else 0) for k in range(n)]
  total = sum(sizes)
  concat = [
    b.work([p], b.add_us(total), [last[p]], 'concat') for p in all_places
  ]
  return [(size, concat) for size in sizes]


def all_reduce_step(
  b, spec, repacking=0, *, collective=False, agg=(0, 10), compression=None
):
  """replicated / distributed_all_reduce / collective_all_reduce.

  spec: a parsed AllReduceSpec, or None for the classic default;
  compression: a cost_model_compression.Compression (None: none).
  """
  ready, last = towers(b, {})
  order = places(b.target)
  computed = list(last.values()) if b.transfers_wait_for_compute() else []
  if compression is not None and compression.compresses:
    done = cost_model_compression.reduce_all(
      b,
      order,
      ready,
      computed,
      compression,
      lambda nbytes, deps, k: _reduce_unit(b, spec, order, nbytes, deps, k),
    )
  else:
    done = _reduce_units(b, spec, order, ready, last, repacking, agg, computed)
  apply_us = b.apply_ms('worker', b.profile.gradients) * 1000.0
  barrier = list(last.values())  # updates wait for every gradient
  ends = {}
  for p in order:
    job = b.work([p], apply_us, done[p] + barrier, 'apply')
    ends.setdefault(p[1], []).append(job)
  if collective:
    # The cluster loss: one scalar collective per step, grouped with the
    # train op (_with_cluster_loss): beside the update, not before it.
    loss = ar.one_level(b, 'collective', 1, order, 4, barrier)
    for p, j in zip(order, loss):
      ends[p[1]].append(j)
  return step_end(b, ends)


def _reduce_units(b, spec, order, ready, last, repacking, agg, computed):
  """{place: [jobs]} of every uncompressed unit's all-reduce."""
  done = {p: [] for p in order}
  units = _units(b, ready, last, repacking, agg)
  if computed:
    units = [(nbytes, list(deps) + computed) for nbytes, deps in units]
  for k, (nbytes, deps) in enumerate(units):
    for p, j in zip(order, _reduce_unit(b, spec, order, nbytes, deps, k)):
      done[p].append(j)
  return done


def _reduce_unit(b, spec, order, nbytes, deps, index):
  """One unit's all-reduce; spec None is the classic default (topology.py):
  summed on the CPU, or (GPU towers) on tower index % n, then copied back."""
  if spec is not None:
    alg = spec.alg_for(max(1, int(nbytes // 4)))
    return ar.all_reduce(b, alg, order, nbytes, deps)
  if b.on_gpu:
    gather = [order[index % len(order)]]
  else:
    gather = [('cpu', order[0][1])]
  return ar.gather_scatter(b, order, gather, 1, nbytes, deps, 'grpc')
