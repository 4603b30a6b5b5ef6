"""The ps-held strategies' step as jobs (see cost_model_strategies).

parameter_server, distributed_replicated and hybrid share the push: each
gradient's towers are averaged on the worker's CPU once it is ready on all
of them, and the means cross to each ps task (with sync and more than one
worker, the variables of one ps task travel as one packed message; a
variable alone on its task, or any without sync, crosses on its own as soon
as it is ready: variable_mgr/transfers.py packs groups of two or more), are
accumulated there, and applied once every worker pushed and every worker's
towers are done with the old values (sync), or per push once the pushing
worker's towers are done (async).

A packed message waits for every gradient of its worker, not only for its
members: the pack (a concat on the worker) is made inside the update's
control_dependencies(all_grads) (variable_mgr/distributed.py, hybrid.py).
So are hybrid's means (hybrid._reduce), when a worker has two or more
towers to average; with one, its "mean" is the gradient itself (base.mean_of
makes no op), which a lone variable's push carries as soon as it is ready.
"""

from __future__ import annotations

from tf_cnn_benchmarks.scaling.model import cost_model_allreduce as ar
from tf_cnn_benchmarks.scaling.model import cost_model_strategies as st


def _by_ps(b, indices):
  """{ps task: [gradient indices]} for the variables `indices` (greedy)."""
  grads = b.profile.gradients
  where = st.greedy_placement(
    [grads[i].bytes for i in indices], b.target.num_ps
  )
  out = {}
  for i, k in zip(indices, where):
    out.setdefault(k, []).append(i)
  return out


def _bytes(b, indices):
  return sum(b.profile.gradients[i].bytes for i in indices)


def _local_means(b, w, ready, indices, after=()):
  """Worker w's towers' gradients `indices` averaged on its CPU, once each
  of them is ready on every tower of the worker (and the jobs `after`)."""
  cpu, nbytes = ('cpu', w), _bytes(b, indices)
  mine = [p for p in ready if p[1] == w]
  flows = [(p, cpu) for p in mine]
  deps = [ready[p][i] for p in mine for i in indices] + list(after)
  moved = b.phase(flows, nbytes, deps, 'grpc', 'to cpu')
  adds = b.add_us(nbytes) * (len(mine) - 1)
  return b.work([cpu], adds, [moved], 'local means')


def push_and_apply(b, ready, last, indices, sync=True, means_after_all=False):
  """The push of `indices`' gradients to their ps tasks and the apply.

  ready, last: st.towers' gradient-ready and last jobs of every tower.
  means_after_all: the worker's means are made under the all-gradients
  barrier (hybrid's): with two or more towers they wait for all of them.
  Returns {worker: the job after which its step's update is done}.
  """
  grads, t = b.profile.gradients, b.target
  placed = _by_ps(b, indices)
  packed = sync and t.num_workers > 1
  averaged = means_after_all and t.devices_per_worker > 1
  accumulated = {k: [] for k in placed}
  for w in range(t.num_workers):
    all_mine = [j for p, j in last.items() if p[1] == w]
    after = all_mine if averaged else ()
    for k, members in placed.items():
      parts = [members] if packed else [[i] for i in members]
      for part in parts:
        nbytes = _bytes(b, part)
        mean = _local_means(b, w, ready, part, after)
        # A pack is made under the all-gradients barrier (module docstring).
        gate = all_mine if len(part) > 1 else []
        sent = b.message(('cpu', w), ('ps', k), nbytes, [mean] + gate)
        acc = b.work([('ps', k)], b.add_us(nbytes), [sent], 'accumulate')
        accumulated[k].append((w, part, acc))
  if not sync:
    return _async_applies(b, placed, accumulated, last)
  # In place updates wait for every tower's backward (ps_cluster.all_grads).
  done_reading = list(last.values())
  applies = [
    b.work(
      [('ps', k)],
      b.apply_ms('ps', [grads[i] for i in members]) * 1000.0,
      [j for _, _, j in accumulated[k]] + done_reading,
      'ps apply',
    )
    for k, members in placed.items()
  ]
  done = {0: b.graph.join(applies, 'update')}
  for w in range(1, t.num_workers):  # the token from ps 0 to each worker
    done[w] = b.message(('ps', 0), ('cpu', w), 4, applies, name='token')
  return done


def _async_applies(b, placed, accumulated, last):
  """Each worker's own gradients applied on the ps as they arrive, once
  that worker's towers are done with the old values."""
  grads, done = b.profile.gradients, {}
  for k in placed:
    for w, part, acc in accumulated[k]:
      us = b.apply_ms('ps', [grads[i] for i in part]) * 1000.0
      mine = [j for p, j in last.items() if p[1] == w]
      job = b.work([('ps', k)], us, [acc] + mine, 'ps apply')
      done.setdefault(w, []).append(job)
  return {w: b.graph.join(jobs, 'update') for w, jobs in done.items()}


def _reads(b, indices, after=None):
  """{worker: job} when worker w's CPU holds the values (packed per ps)."""
  placed = _by_ps(b, indices)
  out = {}
  for w in range(b.target.num_workers):
    deps = [after[w]] if after else b.begin(w)
    jobs = [
      b.message(('ps', k), ('cpu', w), _bytes(b, members), deps, name='read')
      for k, members in placed.items()
    ]
    out[w] = b.graph.join(jobs or deps, 'reads')
  return out


def parameter_server_step(b, sync=True):
  """Reads, compute, push, apply (and the token)."""
  everything = list(range(len(b.profile.gradients)))
  reads = _reads(b, everything)
  start = {}
  for place in st.places(b.target):
    w = place[1]
    # Every tower of the worker reads the worker's one packed copy.
    copy = b.message(('cpu', w), place, _bytes(b, everything), [reads[w]])
    start.setdefault(w, []).append(copy)
  ready, last = st.towers(b, start)
  done = push_and_apply(b, ready, last, everything, sync)
  return st.step_end(b, {w: [j] for w, j in done.items()})


def distributed_replicated_step(b):
  """Compute, push, apply, read back, assign to every tower."""
  everything = list(range(len(b.profile.gradients)))
  ready, last = st.towers(b, {})
  done = push_and_apply(b, ready, last, everything, True)
  back = _reads(b, everything, done)
  nbytes, ends = _bytes(b, everything), {}
  for place in st.places(b.target):
    w = place[1]
    copied = b.message(('cpu', w), place, nbytes, [back[w]], name='assign')
    assign = b.work([place], b.add_us(nbytes), [copied], 'assign')
    ends.setdefault(w, []).append(assign)
  return st.step_end(b, ends)


def hybrid_step(b, threshold_bytes=1 << 20):
  """Big variables on the ps, small ones all-reduced with collectives."""
  grads = b.profile.gradients
  big = [i for i, g in enumerate(grads) if g.bytes > threshold_bytes]
  small = [i for i, g in enumerate(grads) if g.bytes <= threshold_bytes]
  order = st.places(b.target)
  ready, last = st.towers(b, {}, _tower_reads(b, big, order))
  barrier = list(last.values())
  updates = {p: [] for p in order}
  for i in small:
    outs = ar.one_level(b, 'collective', 1, order, grads[i].bytes, barrier)
    for p, j in zip(order, outs):
      updates[p].append(j)
  apply_us = b.apply_ms('worker', [grads[i] for i in small]) * 1000.0
  ends = [b.work([p], apply_us, updates[p] + barrier, 'apply') for p in order]
  if big:
    done = push_and_apply(b, ready, last, big, True, means_after_all=True)
    ends = ar.one_level(
      b, 'collective', 1, order, 4, ends + list(done.values())
    )
  loss = ar.one_level(b, 'collective', 1, order, 4, barrier)
  per_worker = {}
  for p, j, loss_job in zip(order, ends, loss):
    per_worker.setdefault(p[1], []).extend([j, loss_job])
  return st.step_end(b, per_worker)


def _tower_reads(b, big, order):
  """Every tower reads each ps-held variable itself (one message each, at
  step start), and its compute waits for the value where it first uses
  it: {place: {profiled ms: [read jobs]}} (st.towers' gates)."""
  gates = {}
  for place in order:
    for k, members in _by_ps(b, big).items():
      for i in members:
        nbytes = b.profile.gradients[i].bytes
        read = b.message(('ps', k), place, nbytes, b.begin(place[1]), 'read')
        at = gates.setdefault(place, {}).setdefault(b.forward_use_ms(i), [])
        at.append(read)
  return gates


def local_parameter_server_step(b):
  """One process: variables on its CPU; each gradient summed there.

  The mean of a gradient is taken next to its variable as soon as every
  tower has it (outside the update's barrier); the apply waits for all.
  """
  grads, order = b.profile.gradients, st.places(b.target)
  total = sum(g.bytes for g in grads)
  cpu = ('cpu', 0)
  reads = b.phase([(cpu, p) for p in order], total, b.begin(0), name='read')
  start = {0: [reads]}
  ready, last = st.towers(b, start)
  sums = []
  for i, g in enumerate(grads):
    deps = [ready[p][i] for p in order]
    moved = b.phase([(p, cpu) for p in order], g.bytes, deps, name='grad')
    sums.append(b.work([cpu], b.add_us(g.bytes) * (len(order) - 1), [moved]))
  apply_us = b.apply_ms('worker', grads) * 1000.0
  end = b.work([cpu], apply_us, sums + list(last.values()), 'apply')
  return st.step_end(b, {0: [end]})
