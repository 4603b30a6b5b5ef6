"""Kubeflow TFJob manifests (scripts/kubeflow/): they parse as YAML, name
only flags the harness accepts, and their pods train when started as the
training operator starts them: each with the TF_CONFIG the operator gives
it, its host names mapped to 127.0.0.1 and free ports.

The operator's TF_CONFIG (kubeflow/training-operator, genClusterSpec):
{"cluster": {"chief": [...], "worker": [...], "ps": [...]}, "task": {"type":
"chief", "index": 0}, "environment": "cloud"}, one entry per replica type
(lower case) except Evaluator, hosts `<job>-<type>-<i>.<namespace>.svc:PORT`
with PORT the container port named tfjob-port (default 2222).
"""

import glob
import json
import os
import subprocess
import sys

import pytest
import yaml

from tests.helpers import ROOT
from tests.helpers import task_env

KUBEFLOW_DIR = os.path.join(ROOT, 'scripts', 'kubeflow')
TFJOBS = sorted(glob.glob(os.path.join(KUBEFLOW_DIR, 'tfjob_*.yaml')))
PS_JOB = os.path.join(KUBEFLOW_DIR, 'tfjob_parameter_server.yaml')
COLLECTIVE_JOB = os.path.join(KUBEFLOW_DIR, 'tfjob_collective_all_reduce.yaml')
PORT_NAME, DEFAULT_PORT = 'tfjob-port', 2222
CONTAINER = 'tensorflow'  # the container the operator configures
COMMAND = ['python', '-m', 'tf_cnn_benchmarks']
# The manifests' flags given small values: a CPU run of seconds. Only flags
# a pod's args name are changed; nothing is added.
SMALL = {
  'device': 'cpu',
  'num_gpus': '1',
  'model': 'trivial',
  'data_name': 'cifar10',
  'batch_size': '2',
  'num_batches': '6',
  'num_warmup_batches': '0',
  'save_model_steps': '2',
  'num_eval_batches': '2',
  'eval_interval_secs': '1',
  'eval_timeout_secs': '120',
}
# Added to every pod: a given peak skips the one-off peak probe (not tested).
EXTRA = ['--peak_tflops_per_device=1']


def load(path) -> dict:
  with open(path, encoding='utf-8') as f:
    return yaml.safe_load(f)


def replica_specs(tfjob) -> dict:
  return tfjob['spec']['tfReplicaSpecs']


def container(replica) -> dict:
  """The replica's `tensorflow` container."""
  (c,) = [
    c
    for c in replica['template']['spec']['containers']
    if c['name'] == CONTAINER
  ]
  return c


def operator_tf_configs(tfjob, namespace='default') -> dict:
  """{(type, index): TF_CONFIG dict} of every pod, as the operator sets it."""
  name = tfjob['metadata']['name']
  cluster = {}
  for rtype, replica in replica_specs(tfjob).items():
    if rtype == 'Evaluator':  # not part of the training cluster
      continue
    ports = [
      p['containerPort']
      for p in container(replica).get('ports', [])
      if p.get('name') == PORT_NAME
    ]
    port = ports[0] if ports else DEFAULT_PORT
    rt = rtype.lower()
    cluster[rt] = [
      '%s-%s-%d.%s.svc:%d' % (name, rt, i, namespace, port)
      for i in range(replica['replicas'])
    ]
  return {
    (rtype.lower(), i): {
      'cluster': cluster,
      'task': {'type': rtype.lower(), 'index': i},
      'environment': 'cloud',
    }
    for rtype, replica in replica_specs(tfjob).items()
    for i in range(replica['replicas'])
  }


def free_ports(n):
  from tf_cnn_benchmarks.commands import launch_local_cluster  # pylint: disable=g-import-not-at-top

  return launch_local_cluster.free_ports(n)


def on_loopback(configs: dict) -> dict:
  """The TF_CONFIGs with every host:port a free port of 127.0.0.1."""
  hosts = sorted(
    {h for c in configs.values() for hs in c['cluster'].values() for h in hs}
  )
  to = dict(zip(hosts, ('127.0.0.1:%d' % p for p in free_ports(len(hosts)))))
  return {
    pod: dict(
      c, cluster={j: [to[h] for h in hs] for j, hs in c['cluster'].items()}
    )
    for pod, c in configs.items()
  }


def small_args(args, mount_path, local_dir) -> list:
  """A pod's args with SMALL values and its volume's paths under local_dir."""
  out = []
  for arg in args:
    name, _, value = arg[2:].partition('=')
    value = SMALL.get(name, value)
    if value.startswith(mount_path):
      value = str(local_dir) + value[len(mount_path) :]
    out.append('--%s=%s' % (name, value))
  return out


def start_task(argv, env_extra, log_path):
  """A task process of `python ARGV`, its output in log_path."""
  env = dict(task_env(), **env_extra)
  log = open(log_path, 'w', encoding='utf-8')  # noqa: SIM115 (the task's)
  return subprocess.Popen(
    [sys.executable, *argv],
    cwd=ROOT,
    env=env,
    stdout=log,
    stderr=subprocess.STDOUT,
    text=True,
  )


def wait_all(procs: dict, timeout=240) -> dict:
  """{name: exit status}; every process is killed if one overruns."""
  try:
    return {name: p.wait(timeout=timeout) for name, p in procs.items()}
  finally:
    for p in procs.values():
      if p.poll() is None:
        p.kill()
        p.wait()


def read_lines(path) -> list:
  """The JSON results lines of path ([] if it does not exist)."""
  if not os.path.exists(path):
    return []
  with open(path, encoding='utf-8') as f:
    return [json.loads(line) for line in f if line.strip()]


# ---- (a) the manifests ------------------------------------------------------


def test_manifests_exist_and_parse_as_tfjobs():
  names = [os.path.basename(p) for p in TFJOBS]
  assert names == [
    'tfjob_collective_all_reduce.yaml',
    'tfjob_parameter_server.yaml',
  ]
  for path in TFJOBS:
    tfjob = load(path)
    assert (tfjob['apiVersion'], tfjob['kind']) == ('kubeflow.org/v1', 'TFJob')
    for rtype, replica in replica_specs(tfjob).items():
      c = container(replica)
      assert c['command'] == COMMAND, (path, rtype)
      if rtype in ('Chief', 'Worker'):  # the GPU tasks
        gpus = c['resources']['limits']['nvidia.com/gpu']
        assert '--num_gpus=%d' % gpus in c['args'], (path, rtype)
  ps = replica_specs(load(PS_JOB))
  assert sorted(ps) == ['Chief', 'Evaluator', 'PS', 'Worker']
  collective = replica_specs(load(COLLECTIVE_JOB))
  assert sorted(collective) == ['Worker']


def _harness_flags():
  """absl FlagValues with the harness's own flags (its Params fields)."""
  from absl import flags  # pylint: disable=g-import-not-at-top

  from tf_cnn_benchmarks.config import params_value  # pylint: disable=g-import-not-at-top

  values = flags.FlagValues()
  params_value.define_flags(values)
  return values


def test_manifests_name_only_flags_the_harness_accepts():
  from tf_cnn_benchmarks.config import params as params_lib  # pylint: disable=g-import-not-at-top
  from tf_cnn_benchmarks.config import resolve  # pylint: disable=g-import-not-at-top

  for path in TFJOBS:
    for rtype, replica in replica_specs(load(path)).items():
      args = container(replica)['args']
      for arg in args:
        name = arg[2:].partition('=')[0]
        assert arg.startswith('--') and name in params_lib.FIELDS, (
          path,
          rtype,
          arg,
        )
      values = _harness_flags()
      values(['tf_cnn_benchmarks', *args])  # types: absl raises
      raw = params_lib.Params(
        **params_lib.classic_spellings(
          {n: values[n].value for n in params_lib.FIELDS}
        )
      )
      resolve.check_choices(raw)  # choices (e.g. --variable_update)


def test_flag_check_catches_a_flag_the_harness_lacks():
  # The check above would fail for a misspelt flag (fails before a fix).
  from absl import flags  # pylint: disable=g-import-not-at-top

  values = _harness_flags()
  with pytest.raises(flags.Error):
    values(['tf_cnn_benchmarks', '--num_batchs=10'])


def test_operator_tf_config_of_the_parameter_server_job():
  configs = operator_tf_configs(load(PS_JOB), namespace='bench')
  assert sorted(configs) == [
    ('chief', 0),
    ('evaluator', 0),
    ('ps', 0),
    ('worker', 0),
  ]
  assert configs['chief', 0] == {
    'cluster': {
      'chief': ['tf-cnn-ps-chief-0.bench.svc:2222'],
      'worker': ['tf-cnn-ps-worker-0.bench.svc:2222'],
      'ps': ['tf-cnn-ps-ps-0.bench.svc:2222'],
    },
    'task': {'type': 'chief', 'index': 0},
    'environment': 'cloud',
  }


# ---- (b) the pods of the parameter_server job, on loopback -----------------


def _run_job(tmp_path, manifest, task_type_of=lambda t: t):
  """Starts every pod of `manifest` as a process; {pod: (rc, log path)}."""
  tfjob = load(manifest)
  configs = on_loopback(operator_tf_configs(tfjob))
  procs, logs = {}, {}
  for (rt, i), tf_config in sorted(configs.items()):
    replica = {k.lower(): v for k, v in replica_specs(tfjob).items()}[rt]
    c = container(replica)
    mount = c.get('volumeMounts', [{'mountPath': '/results'}])[0]['mountPath']
    args = small_args(c['args'], mount, tmp_path / 'volume') + EXTRA
    tf_config = dict(
      tf_config, task=dict(tf_config['task'], type=task_type_of(rt))
    )
    name = '%s-%d' % (rt, i)
    logs[name] = tmp_path / ('%s.log' % name)
    procs[name] = start_task(
      c['command'][1:] + args,
      {'TF_CONFIG': json.dumps(tf_config)},
      logs[name],
    )
  status = wait_all(procs)
  return {name: (status[name], logs[name].read_text()) for name in procs}


def test_parameter_server_tfjob_pods_train_on_loopback(tmp_path):
  pods = _run_job(tmp_path, PS_JOB)
  for name, (rc, log) in pods.items():
    assert rc == 0, (name, log[-3000:])
  volume = tmp_path / 'volume' / 'tf-cnn-ps'
  (train,) = read_lines(volume / 'train.jsonl')
  assert train['task'] == {'job_name': 'worker', 'task_index': 0}
  assert (train['num_workers'], train['num_steps']) == (2, 6)
  # The chief's checkpoints, each evaluated once by the evaluator pod.
  written = sorted(
    int(n.split('-')[1].split('.')[0])
    for n in os.listdir(volume / 'train')
    if n.endswith('.index')
  )
  assert written == [2, 4, 6]
  evals = read_lines(volume / 'eval.jsonl')
  assert [e['mode'] for e in evals] == ['eval'] * 3
  assert [e['checkpoint_step'] for e in evals] == written
  assert 'Evaluator: training ended at step 6' in pods['evaluator-0'][1]


@pytest.mark.slow
def test_master_instead_of_chief_trains_the_same(tmp_path):
  # Kubeflow's replica type Master: task type "master", cluster.master.
  tfjob_path = tmp_path / 'master.yaml'
  text = open(PS_JOB, encoding='utf-8').read()
  tfjob_path.write_text(text.replace('    Chief:', '    Master:'))
  pods = _run_job(tmp_path, str(tfjob_path))
  for name, (rc, log) in pods.items():
    assert rc == 0, (name, log[-3000:])
  assert 'master-0' in pods
  volume = tmp_path / 'volume' / 'tf-cnn-ps'
  (train,) = read_lines(volume / 'train.jsonl')
  assert train['num_workers'] == 2
