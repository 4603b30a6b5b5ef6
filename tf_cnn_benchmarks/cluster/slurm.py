"""Which description makes the cluster (--cluster_resolver), and Slurm's.

Under Slurm each task of an `srun` step runs the same command line; it
learns its job and index from its Slurm rank (SLURM_PROCID) through
TensorFlow's public `tf.distribute.cluster_resolver.SlurmClusterResolver`,
which reads SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_STEP_NODELIST and
SLURM_STEP_TASKS_PER_NODE (TensorFlow 2.21's resolver runs no `scontrol`).
The node list is read here first, with a bound (slurm_nodes.py), and the
resolver is given the {host: tasks} it makes. The first --slurm_ps_tasks
ranks are the ps tasks, the others the workers (the resolver orders its
jobs by name, and 'ps' sorts before 'worker').

Ports: the resolver gives each task port_base + its index on its node, so
two node names that reach one machine would hand two tasks the same
address. Every task here gets port_base + its position in the whole
cluster instead (unique across the step, whatever the nodes resolve to).

GPUs (--slurm_gpu_binding=resolver): the resolver shares the node's GPUs
(CUDA_VISIBLE_DEVICES as Slurm set it for the step, else nvidia-smi's
list) among the node's tasks, --num_gpus each, and sets this task's
CUDA_VISIBLE_DEVICES; the indices it writes are mapped back through the
list Slurm had set. CUDA reads that variable once, so `bind_gpus` must run
before TensorFlow first lists its devices (the entry point calls it).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from typing import Any, Mapping, Optional

from tf_cnn_benchmarks.cluster import slurm_nodes
from tf_cnn_benchmarks.cluster import spec as spec_lib
from tf_cnn_benchmarks.platform import quiet

RESOLVERS = ('auto', 'flags', 'tf_config', 'slurm')
GPU_BINDINGS = ('resolver', 'slurm')
# The variables the resolver reads (SLURM_PROCID is this task's rank).
STEP_VARIABLES = (
  'SLURM_PROCID',
  'SLURM_STEP_NUM_TASKS',
  'SLURM_STEP_NODELIST',
  'SLURM_STEP_TASKS_PER_NODE',
)
# The classic flags that describe a cluster by hand.
CLUSTER_FLAGS = (
  'job_name',
  'task_index',
  'worker_hosts',
  'ps_hosts',
  'controller_host',
)


@dataclasses.dataclass(frozen=True)
class ClusterOptions:
  """The flag values that choose and build the cluster."""

  resolver: str = 'auto'
  job_name: Optional[str] = None
  task_index: Optional[int] = None
  worker_hosts: Optional[str] = None
  ps_hosts: Optional[str] = None
  controller_host: Optional[str] = None
  protocol: str = 'grpc'
  ps_tasks: int = 0
  port_base: int = 8888
  gpu_binding: str = 'resolver'
  device: Optional[str] = None  # 'cpu', 'gpu' or None (chosen later)
  num_gpus: int = 1

  @classmethod
  def of(cls, values: Any) -> ClusterOptions:
    """The options of a Params value or of the parsed absl flags."""
    return cls(
      resolver=values.cluster_resolver,
      job_name=values.job_name,
      task_index=values.task_index,
      worker_hosts=values.worker_hosts,
      ps_hosts=values.ps_hosts,
      controller_host=values.controller_host,
      protocol=values.server_protocol,
      ps_tasks=values.slurm_ps_tasks,
      port_base=values.slurm_port_base,
      gpu_binding=values.slurm_gpu_binding,
      device=values.device,
      num_gpus=values.num_gpus,
    )

  def explicit_flags(self) -> list:
    """The classic cluster flags given on the command line."""
    return [f for f in CLUSTER_FLAGS if getattr(self, f) is not None]


def in_slurm_step(env: Mapping[str, str]) -> bool:
  """Whether this process is one task of a Slurm step of several tasks.

  A one-task step (an sbatch script's own shell, `srun -n1`) is a local
  run: the Slurm cluster is taken only when there is a cluster to make.
  """
  if not env.get('SLURM_JOB_ID') or env.get('SLURM_PROCID') is None:
    return False
  count = env.get('SLURM_STEP_NUM_TASKS', '1')
  return not count.isdigit() or len(count) > 9 or int(count) > 1


def chosen_resolver(options: ClusterOptions, env: Mapping[str, str]) -> str:
  """'flags', 'tf_config' or 'slurm': what describes the cluster.

  auto: the classic flags when any is given (they win), else TF_CONFIG
  when set, else Slurm inside a step of several tasks, else a local run
  ('flags' with none given).
  """
  if options.resolver != 'auto':
    return options.resolver
  if options.explicit_flags():
    return 'flags'
  if env.get('TF_CONFIG'):
    return 'tf_config'
  return 'slurm' if in_slurm_step(env) else 'flags'


def resolve_cluster(
  options: ClusterOptions, env: Optional[Mapping[str, str]] = None
) -> Optional[spec_lib.Cluster]:
  """The Cluster this task belongs to, or None for a local run.

  Raises spec.ClusterError (one line naming the flag or variable).
  """
  env = os.environ if env is None else env
  if options.resolver not in RESOLVERS:
    raise spec_lib.ClusterError(
      '--cluster_resolver=%s: must be one of %s'
      % (options.resolver, ', '.join(RESOLVERS))
    )
  chosen = chosen_resolver(options, env)
  if chosen == 'slurm':
    return slurm_cluster(options, env)
  if chosen == 'tf_config' and not env.get('TF_CONFIG'):
    raise spec_lib.ClusterError(
      'TF_CONFIG: not set; --cluster_resolver=tf_config reads the cluster '
      'from it'
    )
  if chosen == 'tf_config' and options.job_name is not None:
    raise spec_lib.ClusterError(
      '--job_name: not with --cluster_resolver=tf_config (the task is '
      "TF_CONFIG's)"
    )
  return spec_lib.resolve(
    options.job_name,
    options.task_index,
    options.worker_hosts,
    options.ps_hosts,
    options.controller_host,
    options.protocol,
    # --cluster_resolver=flags: TF_CONFIG is not read.
    env={} if options.resolver == 'flags' else env,
  )


def bind_gpus(options: ClusterOptions, env=None) -> None:
  """Resolves the Slurm cluster early, so the resolver can bind GPUs.

  A no-op unless Slurm makes the cluster. Call it before TensorFlow lists
  its devices: CUDA reads CUDA_VISIBLE_DEVICES once.
  """
  env = os.environ if env is None else env
  if (
    options.device == 'cpu'
    or options.gpu_binding != 'resolver'
    or options.resolver not in RESOLVERS
    or chosen_resolver(options, env) != 'slurm'
  ):
    return
  with quiet.captured_stderr_fd():  # TensorFlow's import-time lines
    # TensorFlow only under Slurm's resolver: __main__ imports this module
    # before the flags parse, and --help answers without TensorFlow.
    import tensorflow  # noqa: F401  # pylint: disable=g-import-not-at-top,unused-import
  slurm_cluster(options, env)


def slurm_cluster(
  options: ClusterOptions, env: Mapping[str, str]
) -> spec_lib.Cluster:
  """This task's Cluster from the Slurm step (resolved once a process)."""
  # The device and GPU flags out of the key: the first resolution binds
  # (a later one may see --device chosen, or only this task's GPUs).
  key = (
    dataclasses.replace(
      options, device=None, num_gpus=1, gpu_binding='resolver'
    ),
    tuple(sorted(_slurm_items(env))),
  )
  if key not in _RESOLVED:
    _RESOLVED[key] = _resolve_slurm(options, env)
  return _RESOLVED[key]


# Resolved Slurm clusters by (options, SLURM_* variables): the resolver
# rewrites CUDA_VISIBLE_DEVICES, so a second resolution would see only this
# task's share of the node's GPUs.
_RESOLVED: dict = {}


def _slurm_items(env: Mapping[str, str]) -> list:
  return [(k, v) for k, v in env.items() if k.startswith('SLURM')]


def _resolve_slurm(
  options: ClusterOptions, env: Mapping[str, str]
) -> spec_lib.Cluster:
  """The resolver's cluster spec -> a validated Cluster (ports renumbered)."""
  num_tasks = _check_step(options, env)
  jobs = {'worker': num_tasks - options.ps_tasks}
  if options.ps_tasks:
    jobs['ps'] = options.ps_tasks
  nodes = slurm_nodes.step_nodes(env, num_tasks)
  addresses, job, index = _run_resolver(options, env, jobs, nodes)
  # Global positions: the resolver lists the ps tasks first, then workers.
  renumbered = {}
  position = 0
  for name in sorted(addresses):
    renumbered[name] = []
    for address in addresses[name]:
      host = address.rpartition(':')[0]
      renumbered[name].append('%s:%d' % (host, options.port_base + position))
      position += 1
  _check_placement(env, renumbered[job][index], job, index)
  return spec_lib.resolve(
    job,
    index,
    ','.join(renumbered['worker']),
    ','.join(renumbered.get('ps', [])) or None,
    None,
    options.protocol,
    env={},
  )


def _int_variable(env: Mapping[str, str], name: str) -> int:
  text = env.get(name)
  if text is None:
    raise spec_lib.ClusterError(
      '%s: not set; the Slurm cluster is read in an srun step (each task '
      'gets %s)' % (name, ', '.join(STEP_VARIABLES))
    )
  # A count of thousands of digits is no task count (and int() refuses it).
  if not text.strip().isdigit() or len(text.strip()) > 9:
    raise spec_lib.ClusterError(
      '%s=%s: must be a whole number in 0..999999999'
      % (name, spec_lib.shown(text[:40] + ('...' if len(text) > 40 else '')))
    )
  return int(text)


def _check_step(options: ClusterOptions, env: Mapping[str, str]) -> int:
  """The step's task count, after checking the variables and flags."""
  given = options.explicit_flags()
  if given:
    raise spec_lib.ClusterError(
      '--%s: not with --cluster_resolver=slurm (the tasks of the Slurm '
      'step make the cluster; use --cluster_resolver=flags to describe it '
      'by hand)' % given[0]
    )
  rank = _int_variable(env, 'SLURM_PROCID')
  num_tasks = _int_variable(env, 'SLURM_STEP_NUM_TASKS')
  for name in STEP_VARIABLES[2:]:
    if not env.get(name):
      raise spec_lib.ClusterError(
        '%s: not set; the Slurm cluster is read in an srun step' % name
      )
  if rank >= num_tasks:
    raise spec_lib.ClusterError(
      'SLURM_PROCID=%d: must be below SLURM_STEP_NUM_TASKS=%d'
      % (rank, num_tasks)
    )
  if not 0 <= options.ps_tasks < num_tasks:
    raise spec_lib.ClusterError(
      '--slurm_ps_tasks=%d: must be in 0..%d (SLURM_STEP_NUM_TASKS=%d, and '
      'at least one task must be a worker)'
      % (options.ps_tasks, num_tasks - 1, num_tasks)
    )
  last = options.port_base + num_tasks - 1
  if not 0 < options.port_base or last > 65535:
    raise spec_lib.ClusterError(
      '--slurm_port_base=%d: the %d tasks take ports base..base+%d, which '
      'must lie in 1..65535' % (options.port_base, num_tasks, num_tasks - 1)
    )
  return num_tasks


def _gpu_request(options: ClusterOptions, env: Mapping[str, str]) -> dict:
  """The resolver's GPU arguments: bind GPUs or not.

  Without binding the resolver still lays out one GPU slot a task (it
  cannot take 0 GPUs a task); auto_set_gpu=False leaves the slots unused.
  """
  listed = bool(env.get('CUDA_VISIBLE_DEVICES')) or bool(
    shutil.which('nvidia-smi')
  )
  if (
    options.device == 'cpu'
    or options.gpu_binding == 'slurm'
    or options.num_gpus < 1  # refused later, with the other flag checks
    or (options.device is None and not listed)
  ):
    slots = int(env['SLURM_STEP_NUM_TASKS'])
    return dict(gpus_per_node=slots, gpus_per_task=1, auto_set_gpu=False)
  return dict(
    gpus_per_node=None, gpus_per_task=options.num_gpus, auto_set_gpu=True
  )


def _run_resolver(options, env, jobs: dict, nodes: dict) -> tuple:
  """({job: [host:port]}, job, index) from TensorFlow's SlurmClusterResolver.

  nodes: the step's {host: tasks} (slurm_nodes.step_nodes), so that the
  resolver does not expand SLURM_STEP_NODELIST itself.
  """
  # TensorFlow only under Slurm's resolver (--help imports this module).
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  gpus = _gpu_request(options, env)
  slurm_gpus = os.environ.get('CUDA_VISIBLE_DEVICES')
  try:
    resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
      jobs=jobs,
      port_base=options.port_base,
      rpc_layer=options.protocol,
      tasks_per_node=nodes,
      **gpus,
    )
    addresses = resolver.cluster_spec().as_dict()
  except FileNotFoundError:
    raise spec_lib.ClusterError(
      "--device=gpu under Slurm: cannot count the node's GPUs (no "
      'CUDA_VISIBLE_DEVICES, no nvidia-smi on PATH); give the step GPUs '
      '(--gres=gpu:G) or use --slurm_gpu_binding=slurm'
    ) from None
  except (RuntimeError, ValueError, subprocess.CalledProcessError) as e:
    raise spec_lib.ClusterError(_resolver_message(e, options, env)) from None
  if gpus['auto_set_gpu']:
    _map_gpu_indices(slurm_gpus)
  job, index = resolver.get_task_info()
  return addresses, job, index


def _resolver_message(error, options: ClusterOptions, env) -> str:
  """One line for a failure of the resolver, naming what to change."""
  text = str(error).splitlines()[0] if str(error) else type(error).__name__
  if 'more GPUs per node' in text:
    return (
      '--num_gpus=%d: %d GPU(s) for each task of a node '
      '(SLURM_STEP_TASKS_PER_NODE=%s) is more than the node has '
      '(CUDA_VISIBLE_DEVICES=%s, else nvidia-smi); lower --num_gpus, or use '
      '--slurm_gpu_binding=slurm when srun binds GPUs per task'
      % (
        options.num_gpus,
        options.num_gpus,
        env.get('SLURM_STEP_TASKS_PER_NODE'),
        env.get('CUDA_VISIBLE_DEVICES', '(unset)'),
      )
    )
  return (
    'SLURM_STEP_NODELIST=%s, SLURM_STEP_TASKS_PER_NODE=%s, '
    "SLURM_STEP_NUM_TASKS=%s: TensorFlow's SlurmClusterResolver: %s"
    % (
      spec_lib.shown(env.get('SLURM_STEP_NODELIST', '')),
      spec_lib.shown(env.get('SLURM_STEP_TASKS_PER_NODE', '')),
      spec_lib.shown(env.get('SLURM_STEP_NUM_TASKS', '')),
      text,
    )
  )


def _map_gpu_indices(slurm_gpus: Optional[str]) -> None:
  """The resolver's GPU indices -> the device IDs Slurm had made visible.

  The resolver writes indices 0..G-1 of the node's GPUs; where Slurm had
  set CUDA_VISIBLE_DEVICES (say 4,5,6,7), index i is its i-th entry.
  """
  if not slurm_gpus:
    return
  visible = [d.strip() for d in slurm_gpus.split(',')]
  chosen = os.environ.get('CUDA_VISIBLE_DEVICES', '')
  os.environ['CUDA_VISIBLE_DEVICES'] = ','.join(
    visible[int(i)] for i in chosen.split(',') if i
  )


def _check_placement(env, address: str, job: str, index: int) -> None:
  """This task runs on the node the resolver gave its address.

  The resolver orders the nodes by name and numbers the ranks block-wise
  over them; Slurm numbers ranks in its node order (node9 before node10)
  and, with --distribution=cyclic, round-robin. Where they differ, the
  other tasks would look for this one on another node.
  """
  node = env.get('SLURMD_NODENAME')
  host = address.rpartition(':')[0]
  if node and node != host:
    raise spec_lib.ClusterError(
      'SLURMD_NODENAME=%s: rank %s (%s:%d) runs here, but '
      "TensorFlow's SlurmClusterResolver puts it on %s (it orders the nodes "
      'by name and the ranks block-wise): use srun --distribution=block '
      'and node names that sort as Slurm lists them (node[01-16]), or '
      'describe the cluster with --cluster_resolver=flags'
      % (spec_lib.shown(node), env.get('SLURM_PROCID'), job, index, host)
    )
