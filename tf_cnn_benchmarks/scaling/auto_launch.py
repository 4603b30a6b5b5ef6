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
from tf_cnn_benchmarks.scaling import auto
from tf_cnn_benchmarks.scaling import auto_profile
from tf_cnn_benchmarks.scaling import profile_format


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


def best_shape(
  overrides: dict, num_workers: int, num_ps=None, controller=None
) -> tuple:
  """(ps tasks, controller?, the best Prediction) over the cluster shapes
  the launcher may start: without ps tasks, with a controller, and with
  `num_ps` (default 1) ps tasks; a shape fixed by the caller is kept."""
  profile = profile_format.load_profile(overrides['scaling_profile'])
  shapes = []
  for ps, ctrl in ((0, False), (0, True), (num_ps or 1, False)):
    if num_ps is not None and ps != num_ps:
      continue
    if controller is not None and ctrl != controller:
      continue
    shapes.append((ps, ctrl))
  best, topology = None, overrides.get('link_topology') or 'switch'
  for ps, ctrl in shapes:
    cluster = stand_in_cluster(num_workers, ps, ctrl, topology)
    target = auto.target_for(overrides, cluster, cores=profile.host.cpu_cores)
    strategies = auto.candidates(overrides, profile, target, cluster)
    if not strategies:
      continue
    top = auto.rank(profile, target, strategies)[0]
    if best is None or top.images_per_sec > best[2].images_per_sec:
      best = (ps, ctrl, top)
  if best is None:
    raise auto.AutoError(
      '--variable_update=auto: no modelled strategy runs on %d workers '
      'with these --num_ps/--controller' % num_workers
    )
  return best
