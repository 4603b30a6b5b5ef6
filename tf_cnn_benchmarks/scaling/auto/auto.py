"""--variable_update=auto: predict every strategy, then run the best.

`resolve_auto(overrides)` takes the flag values of a run whose
--variable_update is `auto` and returns them with a concrete
--variable_update and --all_reduce_spec, plus the `Choice` that picked them:
the ranked predictions (cost_model.predict) for the run's own shape (its
towers, and in a cluster its workers and ps tasks), from a profile read from
--scaling_profile or measured briefly here (auto_profile.py).

Every task of a cluster must make the same choice, so a cluster needs
--scaling_profile (one file, the same for every task): the prediction is
deterministic, and the concrete --variable_update is part of the cluster
fingerprint, so tasks that disagree are refused at start.
scripts/launch_local_cluster.py measures the profile once and passes the
file to every task.

This module imports no TensorFlow itself; measuring does.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from typing import Optional

import models
from tf_cnn_benchmarks.cluster import slurm
from tf_cnn_benchmarks.cluster import spec as cluster_spec
from tf_cnn_benchmarks.cluster import thread_pools
from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.config import resolve
from tf_cnn_benchmarks.scaling.auto import auto_profile
from tf_cnn_benchmarks.scaling.auto import auto_trials
from tf_cnn_benchmarks.scaling.auto import link_probe
from tf_cnn_benchmarks.scaling.model import cost_model
from tf_cnn_benchmarks.scaling.model import cost_model_calibration
from tf_cnn_benchmarks.scaling.model import cost_model_compression
from tf_cnn_benchmarks.scaling.model import profile_format
from tf_cnn_benchmarks.scaling.model import target as target_lib
from variable_mgr import allreduce_spec
from variable_mgr import catalog

AUTO = 'auto'


# Bad input to --variable_update=auto: one line, exit status 2.
AutoError = auto_profile.AutoError


@dataclasses.dataclass(frozen=True)
class Choice:
  """The ranked predictions of one run's shape and the one picked.

  ranked: cost_model.Prediction, best first.
  chosen: the index in `ranked` of the strategy that runs (the first the
    run's flags accept).
  profile: the profile file, or 'measured' (measured for this run).
  run: the profiled run (profile_format: model, data_name, batch_size).
  link: the link measured between the tasks (link_probe.LinkFigures), or
    None (given by --link_mbits, or no hosts apart).
  trials: the auto_trials.Trials a launcher ran (--auto_trials_measured);
    then `chosen` is the one that measured fastest.
  """

  ranked: tuple
  chosen: int
  profile: str
  run: object = None
  link: object = None
  trials: tuple = ()

  @property
  def best(self):
    """The Prediction of the strategy that runs."""
    return self.ranked[self.chosen]

  @property
  def runner_up(self):
    """The next Prediction in the ranking, or None."""
    rest = [p for i, p in enumerate(self.ranked) if i != self.chosen]
    return rest[0] if rest else None

  def margin_percent(self) -> Optional[float]:
    """How much faster the best is predicted than the runner-up, in %."""
    second = self.runner_up
    if second is None:
      return None
    return (self.best.images_per_sec / second.images_per_sec - 1) * 100

  def within_band(self) -> bool:
    """Whether the runner-up's band reaches the best's (too close to call)."""
    second = self.runner_up
    return second is not None and self.best.low <= second.high

  def record(self) -> dict:
    """The results line's `prediction` (results/schema.json)."""
    best, second = self.best, self.runner_up
    margin = self.margin_percent()
    extra = {} if self.link is None else {'link': self.link.record()}
    if self.trials:
      extra['trials'] = [t.record() for t in self.trials]
    return extra | {
      'variable_update': best.strategy.variable_update,
      'all_reduce_spec': best.strategy.all_reduce_spec,
      'predicted_images_per_sec': round(best.images_per_sec, 3),
      'band_low': round(best.low, 3),
      'band_high': round(best.high, 3),
      'runner_up': None
      if second is None
      else {
        'variable_update': second.strategy.variable_update,
        'all_reduce_spec': second.strategy.all_reduce_spec,
        'predicted_images_per_sec': round(second.images_per_sec, 3),
      },
      'margin_percent': None if margin is None else round(margin, 3),
      'within_band': self.within_band(),
      'cluster': best.target.shape_text(),
      'profile': self.profile,
    }

  def lines(self) -> list:
    """The ranked table, then the choice and its margin (console lines)."""
    run = self.run
    out = [] if self.link is None else [self.link.text()]
    out += [
      '--variable_update=auto: predicted for %s (profile: %s, %s %s batch '
      '%d)'
      % (
        self.best.target.shape_text(),
        self.profile,
        run.model,
        run.data_name,
        run.batch_size,
      ),
      '%4s %12s %21s  %s' % ('rank', 'images/sec', 'band', 'strategy'),
    ]
    for rank, p in enumerate(self.ranked, 1):
      out.append(
        '%4d %12.1f %21s  %s'
        % (
          rank,
          p.images_per_sec,
          '%.1f - %.1f' % (p.low, p.high),
          p.strategy.label(),
        )
      )
    out.append(self.verdict())
    return out

  def verdict(self) -> str:
    """The line saying what runs, by how much, and whether it is close."""
    best, second = self.best, self.runner_up
    text = '--variable_update=auto: running %s' % best.strategy.label()
    if self.trials:
      text += ' (%s)' % self.trials_text()
    elif self.chosen:
      text += ' (the first %d do not run with these flags)' % self.chosen
    if second is None:
      return text + ' (no runner-up)'
    text += ', predicted %.1f%% over %s' % (
      self.margin_percent(),
      second.strategy.label(),
    )
    if self.within_band():
      return text + (
        ': within the uncertainty (the bands overlap), either may be faster'
      )
    return text + ': outside the uncertainty'

  def trials_text(self) -> str:
    """'the fastest of 2 trials: hybrid 412.3, collective_all_reduce
    398.1 images/sec'."""
    return 'the fastest of %d trials: %s images/sec' % (
      len(self.trials),
      ', '.join(
        '%s %s'
        % (t.label(), 'failed' if t.measured is None else '%.1f' % t.measured)
        for t in self.trials
      ),
    )


def measured_line(prediction: dict, images_per_sec: float) -> str:
  """After the run: its measured images/sec against the prediction that
  chose it (`prediction`: Choice.record()), and whether the band held it."""
  predicted = prediction['predicted_images_per_sec']
  low, high = prediction['band_low'], prediction['band_high']
  if images_per_sec < low:
    where = 'below the band'
  elif images_per_sec > high:
    where = 'above the band'
  else:
    where = 'inside the band'
  off = (images_per_sec / predicted - 1) * 100 if predicted > 0 else 0.0
  return (
    '--variable_update=auto: measured %.1f images/sec, predicted %.1f '
    '(%+.1f%%), %s %.1f - %.1f'
    % (images_per_sec, predicted, off, where, low, high)
  )


def cluster_of(overrides: dict):
  """The Cluster the flags or TF_CONFIG describe, or None (a local run)."""
  raw = params_lib.Params(**params_lib.classic_spellings(overrides))
  try:
    return slurm.resolve_cluster(slurm.ClusterOptions.of(raw))
  except cluster_spec.ClusterError as e:
    raise AutoError(str(e)) from None


def hosts_of(cluster) -> set:
  """The hosts (addresses less ports) of a cluster's workers and ps tasks."""
  addresses = list(cluster.worker_hosts) + list(cluster.ps_hosts)
  return {a.rpartition(':')[0] for a in addresses}


def link_for(overrides: dict, cluster, measure=None, cal=None):
  """The link measured between the tasks (link_probe.LinkFigures): only in
  a cluster whose tasks are on several hosts, without --link_mbits; else
  None. `measure` stands in for link_probe.measure_between_tasks."""
  if cluster is None or overrides.get('link_mbits') is not None:
    return None
  if len(hosts_of(cluster)) < 2:
    return None  # one host: the profile's own loopback transport
  cal = cal or cost_model_calibration.default_calibration()
  try:
    return (measure or link_probe.measure_between_tasks)(
      cluster, payload_share=cal.value('wire_payload')
    )
  except link_probe.ProbeError as e:
    raise AutoError('--variable_update=auto: %s' % e) from None


def worker_inter_op_threads(overrides: dict, cluster, cores=None):
  """The inter-op threads of the cluster's workers' servers, None for
  TensorFlow's default: --num_inter_threads, else what --cluster_threads
  gives the first worker beside the tasks on its host, or all the tasks
  with --tasks_colocated=true (cores: that host's, None: this one's)."""
  if overrides.get('num_inter_threads'):
    return overrides['num_inter_threads']
  if cluster is None:
    return None
  host = cluster.worker_hosts[0].rpartition(':')[0]
  here = thread_pools.tasks_sharing_cores(
    cluster.spec_dict(), host, overrides.get('tasks_colocated')
  )
  mode = overrides.get('cluster_threads') or 'auto'
  return thread_pools.host_pools(here, 'worker', mode, cores).inter_op or None


def target_for(
  overrides: dict, cluster, link=None, cores=None
) -> target_lib.Target:
  """The cost model's target: this run's towers, workers, ps and links
  (link: the measured LinkFigures, when --link_mbits is not given; cores:
  worker_inter_op_threads')."""
  towers = overrides.get('num_gpus') or 1
  colocated = overrides.get('tasks_colocated')
  if cluster is None:
    workers, ps, colocated = 1, 0, False
  else:
    workers, ps = cluster.num_workers, cluster.num_ps
    if colocated is None:
      colocated = len(hosts_of(cluster)) == 1
  mbits = overrides.get('link_mbits')
  _check_link_mbits(mbits)
  try:
    return target_lib.make_target(
      num_workers=workers,
      devices_per_worker=towers,
      num_ps=ps,
      link_mbits=link.mbits if mbits is None and link else mbits,
      link_latency_us=link.one_way_latency_us if link else 0.0,
      topology=overrides.get('link_topology') or 'switch',
      colocated=bool(colocated),
      worker_inter_op_threads=worker_inter_op_threads(
        overrides, cluster, cores
      ),
    )
  except target_lib.TargetError as e:
    raise AutoError('--variable_update=auto: %s' % e) from None


def _check_link_mbits(mbits) -> None:
  """--link_mbits is None or a finite number > 0 (else AutoError)."""
  if mbits is None or (
    isinstance(mbits, (int, float))
    and not isinstance(mbits, bool)
    and math.isfinite(mbits)
    and mbits > 0
  ):
    return
  raise AutoError(
    '--link_mbits=%s: must be a number of Mbit/s > 0 (absent: measured '
    "between the tasks' hosts, or the profile's loopback on one host)"
    % target_lib.number_text(mbits)
  )


def runs_on(name: str, cluster) -> bool:
  """Whether manager `name` runs on `cluster` as its jobs are (ps tasks
  exactly when it needs them; a controller exactly when it is one graph)."""
  traits = catalog.traits_of(name, in_cluster=cluster is not None)
  if traits is None:
    return False
  if cluster is None:
    return True
  return traits.needs_ps == (cluster.num_ps > 0) and traits.one_graph == bool(
    cluster.controller_host
  )


def candidates(overrides: dict, profile, target, cluster) -> list:
  """Every modelled strategy that runs on this shape: each manager with its
  default reduction and, where it takes one, every registered spec (a/b
  pairs too when workers have several towers). independent is left out:
  its towers train separate models, not a faster run of the same one."""
  on_gpu = profile.host.device.lower() in ('gpu', 'cuda', 'rocm')
  algs = list(allreduce_spec.algorithm_names(cpu_only=not on_gpu))
  specs = [None] + algs
  if target.num_workers > 1 and target.devices_per_worker > 1:
    specs += ['%s/%s' % (a, b) for a in algs for b in algs if a != b]
  out = []
  for name in cost_model.MODELLED:
    if not runs_on(name, cluster):
      continue
    if catalog.any_of(name, catalog.collective_only):
      mine = [None]  # collective[#N] only; the default is that
    else:
      mine = specs if name in cost_model.WITH_SPEC else [None]
    for spec in mine:
      strategy = _strategy(overrides, name, spec)
      try:
        cost_model.check_strategy(strategy, target, profile)
      except (cost_model.StrategyError, ValueError):
        continue
      out.append(strategy)
  return out


def _strategy(overrides: dict, name: str, spec) -> cost_model.Strategy:
  """The strategy with the run's own packing flags and compressor where
  they apply. The compressor changes the numbers, so the run chooses it
  and auto weighs it: priced where the model prices it (the managers
  that all-reduce every gradient, unpacked), none elsewhere."""
  defaults = params_lib.Params()
  get = lambda key: overrides.get(key, getattr(defaults, key))  # noqa: E731
  packs = name in cost_model.PACKING
  compression = get('gradient_compression') or 'none'
  priced = (
    name in cost_model_compression.ALL_REDUCE_MANAGERS
    and not (packs and get('gradient_repacking'))
    and not (packs and get('agg_small_grads_max_bytes'))
  )
  return cost_model.Strategy(
    name,
    spec,
    gradient_repacking=get('gradient_repacking') if packs else 0,
    hybrid_threshold_bytes=get('hybrid_threshold_bytes'),
    agg_small_grads_max_bytes=(
      get('agg_small_grads_max_bytes') if packs else 0
    ),
    agg_small_grads_max_group=get('agg_small_grads_max_group'),
    gradient_compression=compression if priced else 'none',
    powersgd_rank=get('powersgd_rank'),
  )


def rank(profile, target, strategies, cal=None) -> tuple:
  """The predictions, fastest first (ties keep the candidates' order, so
  the ranking is the same on every task)."""
  preds = [cost_model.predict(profile, target, s, cal) for s in strategies]
  # Figures equal to 4 significant digits are a tie (float noise of the
  # simulation, not a difference): the earlier candidate, the simpler
  # reduction, wins.
  order = sorted(
    range(len(preds)),
    key=lambda i: (-float('%.4g' % preds[i].images_per_sec), i),
  )
  return tuple(preds[i] for i in order)


def concrete(overrides: dict, prediction) -> dict:
  """The flag values with the prediction's manager and spec in place of
  auto."""
  out = dict(overrides)
  out['variable_update'] = prediction.strategy.variable_update
  out['all_reduce_spec'] = prediction.strategy.all_reduce_spec
  return out


def load_profile(overrides: dict):
  """(the profile, what to call it): --scaling_profile, or measured.

  A profile of another --model is refused unless
  --scaling_profile_any_model.
  """
  path = overrides.get('scaling_profile')
  if not path:
    return auto_profile.measure_short(overrides), 'measured'
  try:
    profile = profile_format.load_profile(path)
  except profile_format.ProfileError as e:
    raise AutoError('--scaling_profile=%s' % e) from None
  other = profile_format.other_run_error(
    profile,
    path,
    profiled_run(overrides),
    '--scaling_profile',
    '--scaling_profile_any_model',
  )
  if other is not None and not overrides.get('scaling_profile_any_model'):
    raise AutoError(str(other))
  return profile, path


def run_model(overrides: dict) -> str:
  """The run's --model (its default when not given)."""
  return overrides.get('model') or params_lib.Params().model


def profiled_run(overrides: dict) -> dict:
  """The run's values of profile_format.RUN_FIELDS, as a profile of this
  run would record them (each default resolved as the run resolves it)."""
  defaults = params_lib.Params()
  get = lambda key: overrides.get(key, getattr(defaults, key))  # noqa: E731
  model = run_model(overrides)
  data_name = get('data_name') or resolve.guess_data_name(get('data_dir'))
  batch_size = get('batch_size')
  if not batch_size:
    try:
      batch_size = models.create_model(model, data_name).default_batch_size
    except ValueError:  # no such model: the run's own check names it
      batch_size = None
  device = get('device') or auto_profile.default_device()
  return {
    'model': model,
    'data_name': data_name,
    'batch_size': batch_size,
    'data_format': get('data_format')
    or ('NCHW' if device == 'gpu' else 'NHWC'),
    'use_fp16': bool(get('use_fp16')),
  }


def choose(overrides: dict, cal=None, measure_link=None) -> tuple:
  """(the concrete flag values, the Choice) of a run with auto.

  In a cluster of several hosts without --link_mbits, the tasks first
  measure the link between them (link_for; measure_link stands in for it).

  Raises:
    AutoError: a cluster without --scaling_profile, a bad profile file,
      a link that could not be measured, nothing that runs on this shape.
  """
  cluster = cluster_of(overrides)
  if cluster is not None and not overrides.get('scaling_profile'):
    raise AutoError(
      '--variable_update=auto in a cluster: give --scaling_profile=FILE, '
      'the same file to every task (scripts/profile_host.py makes one; '
      'scripts/launch_local_cluster.py measures one for its tasks)'
    )
  profile, profile_name = load_profile(overrides)
  link = link_for(overrides, cluster, measure_link, cal)
  target = target_for(overrides, cluster, link, profile.host.cpu_cores)
  strategies = candidates(overrides, profile, target, cluster)
  if not strategies:
    raise AutoError(
      '--variable_update=auto: no modelled strategy runs on %s'
      % target.shape_text()
    )
  ranked = rank(profile, target, strategies, cal)
  trials = trials_of(overrides)
  if trials:
    index = measured_pick(ranked, trials)
    values = concrete(overrides, ranked[index])
    params_lib.make_plan(**values)  # a pick the flags refuse: its error
    return values, Choice(
      ranked, index, profile_name, profile.run, link, trials
    )
  for index, prediction in enumerate(ranked):
    values = concrete(overrides, prediction)
    try:
      params_lib.make_plan(**values)
    except params_lib.ParamsError:
      continue  # the flags refuse it here (a spec this device lacks)
    choice = Choice(ranked, index, profile_name, profile.run, link)
    return values, choice
  raise AutoError(
    '--variable_update=auto: none of the %d predicted strategies runs with '
    'these flags' % len(ranked)
  )


def trials_of(overrides: dict) -> tuple:
  """The auto_trials.Trials of --auto_trials_measured, or () without it."""
  text = overrides.get('auto_trials_measured')
  if not text:
    return ()
  try:
    return auto_trials.decode(text)
  except auto_trials.TrialsError as e:
    raise AutoError(str(e)) from None


def measured_pick(ranked, trials) -> int:
  """The index in `ranked` of the trial that measured fastest.

  Raises:
    AutoError: no trial measured, or the fastest is not a strategy of this
      run's shape (the trials were run for another cluster).
  """
  best = auto_trials.fastest(trials)
  if best is None:
    raise AutoError(
      '--auto_trials_measured: no trial measured a figure (every one failed)'
    )
  index = auto_trials.index_of(ranked, best)
  if index is None:
    raise AutoError(
      '--auto_trials_measured: %s, the fastest trial, is not a strategy of '
      'this cluster' % best.label()
    )
  return index


def make_auto_plan(out=None, **overrides) -> tuple:
  """(the RunPlan, the Choice or None): make_plan, with auto resolved first.

  The Python API of --variable_update=auto: prints the ranking and the
  choice on `out` (default stdout) when auto is asked for.
  """
  if overrides.get('variable_update') != AUTO:
    return params_lib.make_plan(**overrides), None
  values, choice = choose(overrides)
  for line in choice.lines():
    print(line, file=out or sys.stdout)
  run = profiled_run(overrides)
  differences = []
  if choice.run is not None:
    differences = profile_format.run_differences(choice.run, run)
  if differences:
    # Asked for: --scaling_profile_any_model (else load_profile refused).
    print(
      'warning: --scaling_profile=%s profiles %s, this run is %s: the '
      'ranking is of that run (--scaling_profile_any_model)'
      % (
        choice.profile,
        profile_format.describe_run(choice.run.model, differences, 1),
        profile_format.describe_run(run['model'], differences, 2),
      ),
      file=sys.stderr,
      flush=True,
    )
  return params_lib.make_plan(**values), choice
