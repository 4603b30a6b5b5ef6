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

sys.path.insert(0, os.path.join(ROOT, 'scripts'))
import _netshape  # noqa: E402
import launch_local_cluster  # noqa: E402
import measure_exchange  # noqa: E402

_WHY_NOT = _netshape.shaping_works(100.0)
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
    ('--exchange_kilobytes=0', '--exchange_kilobytes=0'),
    ('--exchange_kilobytes=-1', '--exchange_kilobytes=-1'),
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
    burst, limit = _netshape.tbf_sizes(mbits)
    assert burst > _netshape.LINK_MTU
    assert limit >= 2 * burst


def test_fast_buckets_hold_a_whole_segment():
  # 500 Mbit/s with a 62.5 KB bucket carried 380-450 Mbit/s: tbf cut each
  # 64 KiB segment into frames. Slow links keep a bucket of a few frames.
  assert _netshape.tbf_sizes(500)[0] > _netshape.GSO_BYTES
  assert _netshape.tbf_sizes(2000)[0] > _netshape.GSO_BYTES
  assert _netshape.tbf_sizes(25)[0] < 8 * 1024


def test_slow_links_queue_at_least_256_kib():
  # 20 ms at 25 Mbit/s (62.5 KB) dropped 3-6% of an all-reduce's packets.
  assert _netshape.tbf_sizes(25)[1] == 256 * 1024
  assert _netshape.tbf_sizes(1000)[1] == int(1000e6 / 8 * 0.02)


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


def test_exchange_patterns_move_the_same_bytes():
  # A ring and all-to-all load every host's link with the same bytes: the
  # ratio of their round times is the network's, not the bytes'.
  n, nbytes = 4, 300_000
  for pattern in measure_exchange.PATTERNS:
    for me in range(n):
      out = measure_exchange.destinations(pattern, me, n, nbytes)
      into = measure_exchange.sources(pattern, me, n, nbytes)
      assert me not in out and me not in into
      assert sum(out.values()) == sum(into.values()) == nbytes
  assert len(measure_exchange.destinations('ring', 0, n, nbytes)) == 1
  assert len(measure_exchange.destinations('all_to_all', 0, n, nbytes)) == 3


def test_exchange_summary_takes_each_round_slowest_host():
  hosts = [
    {'ring': [10.0, 12.0, 11.0], 'all_to_all': [20.0, 20.0, 30.0]},
    {'ring': [11.0, 10.0, 14.0], 'all_to_all': [25.0, 21.0, 20.0]},
  ]
  out = measure_exchange.summarise(hosts, 125_000, 100.0)
  assert out['ring_ms'] == 12.0  # rounds: 11, 12, 14
  assert out['all_to_all_ms'] == 25.0  # rounds: 25, 21, 30
  assert out['efficiency'] == 0.48
  # The means of the rounds: ring 37/3 ms, all-to-all 76/3 ms.
  assert out['ring_mean_ms'] == pytest.approx(37 / 3, abs=1e-3)
  assert out['all_to_all_mean_ms'] == pytest.approx(76 / 3, abs=1e-3)
  assert out['mean_efficiency'] == pytest.approx(37 / 76, abs=1e-3)
  # 125 kB at 100 Mbit/s of wire, 1448 payload bytes a 1514-byte frame.
  assert out['ideal_ms'] == pytest.approx(10 * 1514 / 1448, abs=1e-3)


def test_fan_out_figures_take_each_flows_median_end():
  # Host 0's rounds: each sorted list is one round's flow ends (ms).
  rounds = [[6.0, 9.0, 10.0], [8.0, 9.0, 12.0], [7.0, 10.0, 10.0]]
  hosts = [
    {'ring': [1.0], 'all_to_all': [1.0], 'fan_out': rounds},
    {'ring': [1.0], 'all_to_all': [1.0], 'fan_out': []},
  ]
  out = measure_exchange.summarise(hosts, 125_000, None)
  assert out['fan_out_ms'] == [7.0, 9.0, 10.0]
  assert out['fan_out_shares'] == [0.7, 0.9, 1.0]


@needs_shaping
def test_measure_exchange_is_held_to_the_link():
  proc = _launch(
    '--measure_exchange',
    '--topology=switch',
    '--link_mbits=100',
    '--exchange_kilobytes=128',
  )
  assert proc.returncode == 0, proc.stderr
  prefix = 'launcher: measure_exchange: '
  lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(prefix)]
  assert len(lines) == 1, proc.stdout
  figures = json.loads(lines[0][len(prefix) :])
  assert figures['hosts'] == 3 and figures['topology'] == 'switch'
  # A bucket's burst lets a little more through at first; no more than that.
  assert figures['ring_ms'] >= 0.85 * figures['ideal_ms'], figures
  assert figures['all_to_all_ms'] >= 0.85 * figures['ideal_ms'], figures
  assert figures['efficiency'] > 0
  # fan_out: host 0's flows to the 2 others, each no sooner than its bytes
  # at the link's rate, the last at 1.
  ends, shares = figures['fan_out_ms'], figures['fan_out_shares']
  assert len(ends) == 2 and ends == sorted(ends) and shares[-1] == 1.0
  assert ends[0] >= 0.85 * figures['ideal_ms'], figures


_PROBE_IN_A_SHAPED_NAMESPACE = r"""
import socket, sys, threading
sys.path[:0] = [sys.argv[1], sys.argv[1] + '/scripts']
import _netshape
from tf_cnn_benchmarks.cluster import spec
from tf_cnn_benchmarks.scaling import link_probe

_netshape.run(['ip', 'link', 'set', 'lo', 'up'])
_netshape.shape_loopback(float(sys.argv[2]))
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
  # several hosts (scaling/link_probe.py), on a link held to `mbits`: the
  # payload over the model's wire_payload share is the rate on the wire.
  from tf_cnn_benchmarks.scaling import cost_model_calibration

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
