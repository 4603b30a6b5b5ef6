"""Who is in the cluster: the flags (or TF_CONFIG) parsed into a `Cluster`."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Optional

from tf_cnn_benchmarks.platform import json_input

JOBS = ('ps', 'worker', 'controller')
PROTOCOLS = ('grpc', 'grpc+verbs', 'grpc+mpi', 'grpc+gdr')


class ClusterError(ValueError):
  """A bad cluster description; the message is one line naming the flag."""


@dataclasses.dataclass(frozen=True)
class Cluster:
  """Who is in the cluster and which task this process is.

  worker_hosts, ps_hosts, controller_host: the tasks' HOST:PORT addresses.
  """

  job_name: str
  task_index: int
  worker_hosts: tuple
  ps_hosts: tuple = ()
  controller_host: Optional[str] = None
  protocol: str = 'grpc'

  @property
  def num_workers(self) -> int:
    return len(self.worker_hosts)

  @property
  def num_ps(self) -> int:
    return len(self.ps_hosts)

  @property
  def me(self) -> tuple:
    """(job, index) of this task."""
    return (self.job_name, self.task_index)

  @property
  def task_name(self) -> str:
    """e.g. 'worker:0', as the launcher prefixes lines."""
    return '%s:%d' % self.me

  def workers_on_my_host(self) -> int:
    """Worker tasks whose address has this task's host (at least 1)."""
    host = self.address_of(*self.me).rpartition(':')[0]
    return max(
      1, sum(1 for a in self.worker_hosts if a.rpartition(':')[0] == host)
    )

  def spec_dict(self) -> dict:
    """The ClusterSpec as {job: [host:port, ...]}."""
    spec = {'worker': list(self.worker_hosts)}
    if self.ps_hosts:
      spec['ps'] = list(self.ps_hosts)
    if self.controller_host:
      spec['controller'] = [self.controller_host]
    return spec

  def address_of(self, job: str, index: int) -> str:
    return self.spec_dict()[job][index]

  def all_tasks(self) -> list:
    """(job, index) of every task."""
    return [
      (job, k)
      for job, hosts in sorted(self.spec_dict().items())
      for k in range(len(hosts))
    ]


def task_device(job: str, index: int) -> str:
  """Fully qualified device prefix of one task."""
  return '/job:%s/replica:0/task:%d' % (job, index)


# A host name (RFC 1123 labels; '_' too, as some clusters name nodes), an
# IPv4 address, or an IPv6 address in brackets ([::1]).
_HOST_NAME = re.compile(r'[A-Za-z0-9_]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?')
_IPV6_HOST = re.compile(r'\[[0-9A-Za-z:.%]{2,60}\]')
HOST_RULE = "letters, digits, '.', '-' and '_'"


def is_host(text: str) -> bool:
  """Whether `text` can name a host in a HOST:PORT address."""
  return bool(_HOST_NAME.fullmatch(text) or _IPV6_HOST.fullmatch(text))


def shown(text: str) -> str:
  """A value for an error line: as given, or escaped (repr) when it holds
  spaces, control characters or quotes (a tab must not reach the line)."""
  plain = text.isprintable() and not any(c in text for c in ' \'"\\')
  return text if plain else repr(text)


def _addresses(flag: str, text: Optional[str]) -> tuple:
  """'h:p,h:p' -> ('h:p', 'h:p'), validated."""
  if not text:
    return ()
  addresses = tuple(h.strip() for h in text.split(','))
  for address in addresses:
    name, _, port = address.rpartition(':')
    if not name or not port.isdigit() or not 0 < int(port) < 65536:
      raise ClusterError(
        '--%s=%s: each entry must be HOST:PORT with a port '
        'in 1..65535' % (flag, shown(text))
      )
    if not is_host(name):
      raise ClusterError(
        '--%s=%s: host %s: a host name is %s, or an IPv6 address in '
        'brackets' % (flag, shown(text), shown(name), HOST_RULE)
      )
  if len(set(addresses)) != len(addresses):
    raise ClusterError('--%s=%s: an address appears twice' % (flag, text))
  return addresses


TF_CONFIG_FORMAT = (
  'TF_CONFIG: must be JSON {"cluster": {"worker": [...], "ps": [...]}, '
  '"task": {"type": ..., "index": ...}}'
)
# tf.distribute's job names this harness maps onto its own.
TF_CONFIG_JOBS = ('chief', 'worker', 'ps', 'controller')
# Kubeflow's TFJob (replica type Master) and older launchers name the chief
# "master"; it is read as "chief".
CHIEF_ALIAS = 'master'
# A task that follows the chief's checkpoints; it is no member of the
# training cluster (tf.distribute and Kubeflow leave it out of the spec the
# training servers use).
EVALUATOR = 'evaluator'
# How often an evaluator looks for new checkpoints without
# --eval_interval_secs.
EVALUATOR_POLL_SECS = 5


def _tf_config_hosts(spec: dict, job: str) -> list:
  hosts = spec.get(job, [])
  if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
    raise ClusterError(
      'TF_CONFIG: cluster.%s must be a list of "HOST:PORT" strings, got %s'
      % (job, json.dumps(hosts)[:80])
    )
  return hosts


def _parsed_tf_config(text: str) -> tuple:
  """(cluster dict, task type, task index) of TF_CONFIG, shapes checked.

  "master" (task type or cluster job) is read as "chief"; the task type
  returned is the name TF_CONFIG gave.
  """
  try:
    config = json_input.loads(text, 'TF_CONFIG')
  except json_input.JsonInputError as e:
    raise ClusterError('%s (%s)' % (TF_CONFIG_FORMAT, e.problem)) from None
  try:
    spec, task = config['cluster'], config['task']
    job, index = task['type'], task.get('index', 0)
  except (ValueError, KeyError, TypeError, AttributeError) as e:
    raise ClusterError(
      '%s (%s)' % (TF_CONFIG_FORMAT, type(e).__name__)
    ) from None
  if not isinstance(spec, dict):
    raise ClusterError('%s (cluster is not an object)' % TF_CONFIG_FORMAT)
  if CHIEF_ALIAS in spec:
    if 'chief' in spec:
      raise ClusterError(
        'TF_CONFIG: cluster has both "chief" and "master", two names of the '
        'one chief task; give one of them'
      )
    spec = {('chief' if k == CHIEF_ALIAS else k): v for k, v in spec.items()}
  named = TF_CONFIG_JOBS + (CHIEF_ALIAS, EVALUATOR)
  if job not in named:
    raise ClusterError(
      'TF_CONFIG: task type %r: must be one of %s' % (job, ', '.join(named))
    )
  if not isinstance(index, int) or isinstance(index, bool) or index < 0:
    raise ClusterError(
      'TF_CONFIG: task index %s: must be a whole number >= 0'
      % json.dumps(index)
    )
  unknown = sorted(set(spec) - set(TF_CONFIG_JOBS) - {EVALUATOR})
  if unknown:
    raise ClusterError(
      'TF_CONFIG: cluster job %r: must be one of %s'
      % (unknown[0], ', '.join(named))
    )
  return spec, job, index


def is_evaluator(job_name: Optional[str], env=None) -> bool:
  """Whether this task is an evaluator: --job_name=evaluator, or (without
  --job_name) TF_CONFIG's task type "evaluator". A malformed TF_CONFIG is
  not one (resolve() names what is wrong with it)."""
  if job_name is not None:
    return job_name == EVALUATOR
  text = (os.environ if env is None else env).get('TF_CONFIG')
  if not text:
    return False
  try:
    return _parsed_tf_config(text)[1] == EVALUATOR
  except ClusterError:
    return False


def from_tf_config(text: str) -> dict:
  """Cluster flag values from a TF_CONFIG JSON string.

  tf.distribute's (and Kubeflow TFJob's) "chief" (or "master") is this
  harness's worker 0: the workers are the chief followed by cluster.worker,
  so worker k of TF_CONFIG is worker k + 1 here. An "evaluator" task gets
  job_name "evaluator" and the training cluster's hosts; it joins no
  cluster (see resolve).
  """
  spec, job, index = _parsed_tf_config(text)
  chief = _tf_config_hosts(spec, 'chief')
  if len(chief) > 1:
    raise ClusterError(
      'TF_CONFIG: cluster.%s: at most one task'
      % (CHIEF_ALIAS if job == CHIEF_ALIAS else 'chief')
    )
  workers = chief + _tf_config_hosts(spec, 'worker')
  if job != EVALUATOR or EVALUATOR in spec:
    # Kubeflow leaves the evaluator out of the cluster: its index is free.
    listed = 'chief' if job == CHIEF_ALIAS else job
    _check_tf_config_index(job, index, _tf_config_hosts(spec, listed))
  if job in ('chief', CHIEF_ALIAS):
    job, index = 'worker', 0  # worker 0
  elif job == 'worker':
    index += len(chief)
  values = {
    'job_name': job,
    'task_index': index,
    'worker_hosts': ','.join(workers),
    'ps_hosts': ','.join(_tf_config_hosts(spec, 'ps')) or None,
  }
  controller = _tf_config_hosts(spec, 'controller')
  if controller:
    values['controller_host'] = controller[0]
  return values


def _check_tf_config_index(job: str, index: int, hosts: list) -> None:
  """TF_CONFIG's task is one of its job's tasks in cluster.JOB."""
  if index < len(hosts):
    return
  allowed = (
    'cluster.%s has %d task(s): index must be in 0..%d'
    % (job, len(hosts), len(hosts) - 1)
    if hosts
    else 'cluster.%s lists no task' % job
  )
  raise ClusterError(
    'TF_CONFIG: task {"type": "%s", "index": %d} does not exist; %s'
    % (job, index, allowed)
  )


def resolve(
  job_name,
  task_index,
  worker_hosts,
  ps_hosts,
  controller_host,
  protocol,
  env=None,
) -> Optional[Cluster]:
  """The Cluster the flags (or, without --job_name, TF_CONFIG) describe.

  Returns None for a local run and for an evaluator (--job_name=evaluator
  or TF_CONFIG's task type "evaluator"). Flags win over TF_CONFIG.
  """
  env = os.environ if env is None else env
  if job_name is None and env.get('TF_CONFIG'):
    values = from_tf_config(env['TF_CONFIG'])
    job_name = values['job_name']
    task_index = values['task_index'] if task_index is None else task_index
    worker_hosts = worker_hosts or values['worker_hosts']
    ps_hosts = ps_hosts or values['ps_hosts']
    controller_host = controller_host or values.get('controller_host')
  task_index = 0 if task_index is None else task_index
  hosts = (
    ('worker_hosts', worker_hosts),
    ('ps_hosts', ps_hosts),
    ('controller_host', controller_host),
  )
  if job_name == EVALUATOR:
    # No member of the training cluster: a process of its own that reads
    # the chief's checkpoints. The cluster flags the other tasks get are
    # accepted (one command line for every task) and checked.
    for flag, value in hosts:
      _addresses(flag, value)
    return None
  if job_name is None:
    for flag, value in hosts:
      if value:
        raise ClusterError(
          '--%s: only with --job_name (one of %s)'
          % (flag, ', '.join(JOBS + (EVALUATOR,)))
        )
    return None
  return _checked(
    job_name, task_index, worker_hosts, ps_hosts, controller_host, protocol
  )


def _checked(
  job_name, task_index, worker_hosts, ps_hosts, controller_host, protocol
) -> Cluster:
  """The Cluster of a task's flag values, each validated."""
  if job_name not in JOBS:
    raise ClusterError(
      '--job_name=%s: must be one of %s' % (job_name, ', '.join(JOBS))
    )
  workers = _addresses('worker_hosts', worker_hosts)
  if not workers:
    raise ClusterError(
      '--worker_hosts: required with --job_name (HOST:PORT,...)'
    )
  ps = _addresses('ps_hosts', ps_hosts)
  controller = _addresses('controller_host', controller_host)
  if len(controller) > 1:
    raise ClusterError(
      '--controller_host=%s: exactly one HOST:PORT' % controller_host
    )
  if protocol not in PROTOCOLS:
    raise ClusterError(
      '--server_protocol=%s: must be grpc (or grpc+verbs, '
      'grpc+mpi, grpc+gdr where built in)' % protocol
    )
  count = {
    'worker': len(workers),
    'ps': len(ps),
    'controller': len(controller),
  }[job_name]
  if count == 0:
    raise ClusterError(
      '--job_name=%s: needs --%s'
      % (job_name, 'ps_hosts' if job_name == 'ps' else 'controller_host')
    )
  if not 0 <= task_index < count:
    raise ClusterError(
      '--task_index=%d: must be in 0..%d for --job_name=%s'
      % (task_index, count - 1, job_name)
    )
  everyone = workers + ps + controller
  if len(set(everyone)) != len(everyone):
    raise ClusterError(
      '--worker_hosts/--ps_hosts/--controller_host: an '
      'address is used by two tasks'
    )
  return Cluster(
    job_name,
    task_index,
    workers,
    ps,
    controller[0] if controller else None,
    protocol,
  )
