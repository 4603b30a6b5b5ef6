"""The local launcher's throttled networks (issue 31, item 5).

`launch_local_cluster.py --link_mbits=R --topology=shared|switch` puts a
token bucket (tc tbf) on the tasks' links inside its private namespaces.
These tests check the rate the tc configuration gives (a measured TCP
transfer between two task places, --measure_link, within 10% of R), the
flags' validation and a real cluster on the switch topology. They are
skipped where `unshare -rn` + tc cannot shape a link (no user namespaces).
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.helpers import LAUNCHER
from tests.helpers import ROOT
from tests.helpers import TRIVIAL_FLAGS
from tests.helpers import FakeSwitch
from tests.helpers import task_env
from tf_cnn_benchmarks.commands import launch_local_cluster  # noqa: E402
from tf_cnn_benchmarks.commands import netshape  # noqa: E402

_WHY_NOT = netshape.shaping_works(100.0)
needs_shaping = pytest.mark.skipif(
  bool(_WHY_NOT), reason='cannot shape a link here: %s' % _WHY_NOT
)


def _launch(*argv, env=None, timeout=240):
  return subprocess.run(
    [sys.executable, LAUNCHER, *argv],
    cwd=ROOT,
    env=task_env() if env is None else env,
    capture_output=True,
    text=True,
    timeout=timeout,
  )


def _measured(topology, mbits, megabytes):
  """The figures --measure_link printed (its JSON line)."""
  proc = _launch(
    '--measure_link',
    '--topology=' + topology,
    '--link_mbits=%g' % mbits,
    '--measure_megabytes=%g' % megabytes,
  )
  assert proc.returncode == 0, proc.stderr
  prefix = 'launcher: measure_link: '
  lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(prefix)]
  assert len(lines) == 1, proc.stdout
  return json.loads(lines[0][len(prefix) :])


@needs_shaping
@pytest.mark.parametrize('topology', ['shared', 'switch'])
@pytest.mark.parametrize('mbits', [50.0, 200.0])
def test_measured_rate_is_the_asked_rate(topology, mbits):
  # About half a second of transfer at the rate: a check of the token
  # bucket's configuration, not a timing of the harness. The bucket sets a
  # ceiling; a machine whose cores are busy elsewhere can only carry less
  # (seen once: 151 of 200 Mbit/s at load 14 on 2 cores), so up to three
  # tries, none above the ceiling, one within 10%.
  tries = []
  for _ in range(3):
    figures = _measured(topology, mbits, max(3.0, mbits / 16))
    assert figures['topology'] == topology
    assert figures['asked_mbits'] == mbits
    assert figures['rtt_ms_median'] > 0
    tries.append(figures['mbits'])
    assert figures['mbits'] <= 1.1 * mbits, tries
    if figures['mbits'] >= 0.9 * mbits:
      break
  assert 0.9 * mbits <= tries[-1] <= 1.1 * mbits, tries


@pytest.mark.parametrize(
  'flag, named',
  [
    ('--link_mbits=0', '--link_mbits=0'),
    ('--link_mbits=-25', '--link_mbits=-25'),
    ('--link_mbits=fast', '--link_mbits=fast'),
    ('--link_mbits=nan', '--link_mbits=nan'),
    ('--link_mbits=inf', '--link_mbits=inf'),
    ('--topology=ring', '--topology=ring'),
    ('--topology=', '--topology='),
    ('--measure_megabytes=0.5', '--measure_megabytes=0.5'),
    ('--measure_megabytes=lots', '--measure_megabytes=lots'),
    ('--tasks_measure_link', '--tasks_measure_link'),  # shared, no auto
  ],
)
def test_bad_network_flags_are_one_line(flag, named):
  proc = _launch('--num_workers=2', flag, '--', *TRIVIAL_FLAGS, timeout=60)
  assert proc.returncode == 2
  lines = proc.stderr.splitlines()
  assert len(lines) == 1, proc.stderr
  assert lines[0].startswith('error: %s:' % named), lines


def test_shaping_without_the_private_network_is_refused():
  proc = _launch(
    '--num_workers=2',
    '--link_mbits=100',
    '--no-private_network',
    '--',
    *TRIVIAL_FLAGS,
    timeout=60,
  )
  assert proc.returncode == 2
  lines = proc.stderr.splitlines()
  assert len(lines) == 1, proc.stderr
  assert lines[0].startswith('error: --link_mbits=100:'), lines


@pytest.mark.skipif(
  any(shutil.which(t) is None for t in ('unshare', 'nsenter', 'ip', 'sh')),
  reason='needs unshare, nsenter, ip and sh to leave tc out',
)
def test_no_tc_is_one_line(tmp_path):
  # A PATH with the namespace tools but no tc.
  for tool in ('unshare', 'nsenter', 'ip', 'sh'):
    os.symlink(shutil.which(tool), tmp_path / tool)
  env = dict(task_env(), PATH=str(tmp_path))
  proc = _launch(
    '--num_workers=2',
    '--topology=switch',
    '--',
    *TRIVIAL_FLAGS,
    env=env,
    timeout=60,
  )
  assert proc.returncode == 2
  lines = proc.stderr.splitlines()
  assert lines == [
    'error: --topology=switch: cannot shape the network here: '
    'tc is not installed'
  ], proc.stderr


def test_burst_holds_a_frame_at_every_rate():
  # A bucket smaller than one frame drops every frame: no rate at all.
  for mbits in (1, 25, 100, 1000, 10000):
    burst, limit = netshape.tbf_sizes(mbits)
    assert burst > netshape.LINK_MTU
    assert limit >= 2 * burst


def test_fast_buckets_hold_a_whole_segment():
  # 500 Mbit/s with a 62.5 KB bucket carried 380-450 Mbit/s: tbf cut each
  # 64 KiB segment into frames. Slow links keep a bucket of a few frames.
  assert netshape.tbf_sizes(500)[0] > netshape.GSO_BYTES
  assert netshape.tbf_sizes(2000)[0] > netshape.GSO_BYTES
  assert netshape.tbf_sizes(25)[0] < 8 * 1024


def test_slow_links_queue_at_least_256_kib():
  # 20 ms at 25 Mbit/s (62.5 KB) dropped 3-6% of an all-reduce's packets.
  assert netshape.tbf_sizes(25)[1] == 256 * 1024
  assert netshape.tbf_sizes(1000)[1] == int(1000e6 / 8 * 0.02)


def test_switch_tasks_name_their_own_addresses():
  args, flags = launch_local_cluster.parse_args(
    ['--num_workers=2', '--topology=switch', '--', '--model=trivial']
  )
  commands = launch_local_cluster.task_commands(
    args, flags, 1, True, FakeSwitch()
  )
  assert list(commands) == ['ps:0', 'worker:0', 'worker:1', 'controller:0']
  hosts = {}
  for name, argv in commands.items():
    assert argv[:2] == [
      'nsenter',
      '--net=/proc/%d/ns/net' % (1000 + len(hosts)),
    ]
    values = dict(a[2:].split('=', 1) for a in argv if '_host' in a)
    hosts[name] = values
  lists = hosts['ps:0']
  assert all(h == lists for h in hosts.values())  # one cluster
  addresses = [
    lists['ps_hosts'],
    *lists['worker_hosts'].split(','),
    lists['controller_host'],
  ]
  assert [a.split(':')[0] for a in addresses] == [
    '10.31.0.1',
    '10.31.0.2',
    '10.31.0.3',
    '10.31.0.4',
  ]


@needs_shaping
@pytest.mark.slow
def test_switch_cluster_trains():
  # Three namespaces, each with its own loopback: the run only works if
  # every task reaches the others at their bridge addresses.
  proc = _launch(
    '--num_workers=2',
    '--num_ps=1',
    '--topology=switch',
    '--link_mbits=200',
    '--timeout=200',
    '--',
    *[f for f in TRIVIAL_FLAGS if not f.startswith('--display_every=')],
    '--display_every=5',
    '--num_batches=5',
    '--variable_update=parameter_server',
  )
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
  assert 'launcher: cluster of 2 workers: total images/sec:' in proc.stdout
  steps = [
    ln
    for ln in proc.stdout.splitlines()
    if ln.startswith('[worker:1] 5\timages/sec')
  ]
  assert len(steps) == 1, proc.stdout[-3000:]


_PROBE_IN_A_SHAPED_NAMESPACE = r"""
import socket, sys, threading
sys.path[:0] = [sys.argv[1]]
from tf_cnn_benchmarks.commands import netshape
from tf_cnn_benchmarks.cluster import spec
from tf_cnn_benchmarks.scaling.auto import link_probe

netshape.run(['ip', 'link', 'set', 'lo', 'up'])
netshape.shape_loopback(float(sys.argv[2]))
workers = ('127.0.0.1:7001', 'localhost:7002')  # two hosts by name
out = {}
def task(index):
  cluster = spec.Cluster('worker', index, workers)
  out[index] = link_probe.measure_between_tasks(
    cluster, payload_share=float(sys.argv[3]), timeout=60)
threads = [threading.Thread(target=task, args=(k,)) for k in (1, 0)]
for t in threads: t.start()
for t in threads: t.join()
assert out[0] == out[1]
print(out[0].mbits)
"""


@needs_shaping
@pytest.mark.parametrize('mbits', [50.0, 200.0])
def test_tasks_measure_the_asked_rate(mbits):
  # What --variable_update=auto measures between the tasks of a cluster on
  # several hosts (scaling/auto/link_probe.py), on a link held to `mbits`: the
  # payload over the model's wire_payload share is the rate on the wire.
  from tf_cnn_benchmarks.scaling.model import cost_model_calibration

  share = cost_model_calibration.default_calibration().value('wire_payload')
  tries = []
  for _ in range(3):  # a busy machine carries less (see above), never more
    proc = subprocess.run(
      ['unshare', '-rn', sys.executable, '-c', _PROBE_IN_A_SHAPED_NAMESPACE]
      + [ROOT, str(mbits), str(share)],
      capture_output=True,
      text=True,
      timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    tries.append(float(proc.stdout.split()[-1]))
    assert tries[-1] <= 1.1 * mbits, tries
    if tries[-1] >= 0.9 * mbits:
      break
  assert 0.9 * mbits <= tries[-1] <= 1.1 * mbits, tries


@needs_shaping
@pytest.mark.slow
def test_launched_tasks_measure_their_switch_ports(tmp_path):
  # --tasks_measure_link: the tasks are told no rate; on their own
  # addresses (switch ports held to 50 Mbit/s) they measure it before their
  # servers start, every task gets the same figure, and the results line
  # records it beside the prediction made with it.
  path = str(tmp_path / 'r.jsonl')
  proc = _launch(
    '--num_workers=2',
    '--topology=switch',
    '--link_mbits=50',
    '--tasks_measure_link',
    '--timeout=200',
    '--',
    *TRIVIAL_FLAGS,
    '--num_batches=3',
    '--variable_update=auto',
    '--scaling_profile='
    + os.path.join(ROOT, 'tests/data/profile_resnet20_cpu.json'),
    '--scaling_profile_any_model',  # resnet20's, for a trivial run
    '--result_file=' + path,
  )
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
  with open(path) as f:
    (line,) = [json.loads(x) for x in f if x.strip()]
  link = line['prediction']['link']
  assert 45 <= link['mbits'] <= 55, link
  measured = {
    ln.split('] ', 1)[1]
    for ln in proc.stdout.splitlines()
    if 'auto: link measured between' in ln
  }
  assert len(measured) == 1, proc.stdout  # one figure, printed by each task
  cluster = line['prediction']['cluster']
  assert cluster.startswith('2x1') and '%gMbit/s' % link['mbits'] in cluster
