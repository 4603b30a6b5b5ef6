"""--variable_update=auto for a launcher that starts every task itself.

A launcher (scripts/launch_local_cluster.py) resolves auto once, before it
starts the tasks: it measures one profile (or takes --scaling_profile),
picks the cluster shape (ps tasks, a controller) the best strategy needs,
then gives every task the same --scaling_profile, so each predicts the same
ranking and runs the same strategy (auto.py).
"""

from __future__ import annotations

from absl import flags as absl_flags

from tf_cnn_benchmarks.cluster import spec as cluster_spec
from tf_cnn_benchmarks.config import params_value
from tf_cnn_benchmarks.scaling.auto import auto
from tf_cnn_benchmarks.scaling.auto import auto_profile
from tf_cnn_benchmarks.scaling.auto import auto_trials
from tf_cnn_benchmarks.scaling.model import profile_format


def overrides_from_argv(argv: list) -> dict:
  """The benchmark flag values `argv` (--name=value ...) gives, typed as
  the benchmark's own flags (unknown flags are left to the tasks)."""
  values = absl_flags.FlagValues()
  params_value.define_flags(values)
  try:
    values(['benchmark'] + list(argv), known_only=True)
  except absl_flags.Error as e:
    raise auto.AutoError(str(e).splitlines()[0]) from None
  return {name: values[name].value for name in params_value.FIELDS}


def profile_for(overrides: dict, save_to: str) -> str:
  """The profile file every task reads: --scaling_profile, else one
  measured now (auto_profile.py) and saved at `save_to`."""
  if overrides.get('scaling_profile'):
    auto.load_profile(overrides)  # a bad file: one line here, not per task
    return overrides['scaling_profile']
  profile = auto_profile.measure_short(overrides)
  profile_format.save_profile(profile, save_to)
  return save_to


def link_flags(flags: list, link_mbits, topology: str) -> tuple:
  """(the topology flag, the rate flag) a launcher gives every task of its
  network: --link_topology always, unless `flags` set it (unthrottled too:
  the tasks share one loopback, or each has a port; left out, the tasks
  would predict for switch ports); --link_mbits when the network has a
  rate and `flags` do not set it. Each a list of 0 or 1 flag."""
  given = {f.split('=', 1)[0] for f in flags}
  shape = [] if '--link_topology' in given else ['--link_topology=' + topology]
  rate = []
  if link_mbits and '--link_mbits' not in given:
    rate = ['--link_mbits=%g' % link_mbits]
  return shape, rate


def stand_in_cluster(
  num_workers: int, num_ps: int, controller: bool, topology: str
):
  """A stand-in Cluster of the shape, its tasks on hosts as the launcher
  places them: on one shared link every task on one address (so they split
  its cores: cluster/thread_pools.py); on switch ports each on its own
  (they split the cores only when told --tasks_colocated=true, as the
  launcher's tasks are)."""

  def address(k):
    return 'localhost:%d' % k if topology == 'shared' else 'host%d:1' % k

  return cluster_spec.Cluster(
    job_name='worker',
    task_index=0,
    worker_hosts=tuple(address(k) for k in range(num_workers)),
    ps_hosts=tuple(address(100 + k) for k in range(num_ps)),
    controller_host=address(200) if controller else None,
  )


def shape_rankings(
  overrides: dict, num_workers: int, num_ps=None, controller=None
) -> list:
  """[(ps tasks, controller?, the ranked Predictions)] of each cluster
  shape the launcher may start: without ps tasks, with a controller, and
  with `num_ps` (default 1) ps tasks; a shape fixed by the caller is kept.
  Shapes on which nothing runs are left out."""
  profile = profile_format.load_profile(overrides['scaling_profile'])
  shapes = []
  for ps, ctrl in ((0, False), (0, True), (num_ps or 1, False)):
    if num_ps is not None and ps != num_ps:
      continue
    if controller is not None and ctrl != controller:
      continue
    shapes.append((ps, ctrl))
  out, topology = [], overrides.get('link_topology') or 'switch'
  for ps, ctrl in shapes:
    cluster = stand_in_cluster(num_workers, ps, ctrl, topology)
    target = auto.target_for(overrides, cluster, cores=profile.host.cpu_cores)
    strategies = auto.candidates(overrides, profile, target, cluster)
    if strategies:
      out.append((ps, ctrl, auto.rank(profile, target, strategies)))
  return out


def best_shape(
  overrides: dict, num_workers: int, num_ps=None, controller=None
) -> tuple:
  """(ps tasks, controller?, the best Prediction) over the cluster shapes
  of shape_rankings (the first of equal figures)."""
  rankings = shape_rankings(overrides, num_workers, num_ps, controller)
  return best_of(rankings, num_workers)


def best_of(rankings: list, num_workers: int) -> tuple:
  """(ps tasks, controller?, the best Prediction) of shape_rankings'
  list: the shape whose top figure is highest, the first of equals."""
  best = None
  for ps, ctrl, ranked in rankings:
    if best is None or ranked[0].images_per_sec > best[2].images_per_sec:
      best = (ps, ctrl, ranked[0])
  if best is None:
    raise auto.AutoError(
      '--variable_update=auto: no modelled strategy runs on %d workers '
      'with these --num_ps/--controller' % num_workers
    )
  return best


def trials_to_run(rankings: list, num_workers: int, limit: int) -> list:
  """The auto_trials.Trials a launcher with --auto_trials=`limit` runs,
  from shape_rankings' list: the best shape's best strategy and the close
  calls of every shape (their band reaching its band); [] when none is
  close (or limit < 2)."""
  if limit < 2:
    return []
  best = best_of(rankings, num_workers)
  others = [
    (ps, ctrl, p)
    for ps, ctrl, ranked in rankings
    for p in ranked
    if p is not best[2]
  ]
  return auto_trials.close_calls(best, others, limit)
