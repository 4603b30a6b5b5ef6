"""The link measured between a cluster's tasks for --variable_update=auto
(issue 31, item 4: "with --link_mbits if given, else measured between the
tasks").

Tasks run as threads on loopback here (the protocol, the figures every
task gets, the failures); a real launched cluster on shaped switch ports is
in test_link_limits.py.
"""

import json
import os
import socket
import threading

import jsonschema
import pytest

from tests.helpers import AUTO_RESNET20
from tests.helpers import ROOT
from tf_cnn_benchmarks.cluster import spec
from tf_cnn_benchmarks.scaling.auto import auto
from tf_cnn_benchmarks.scaling.auto import link_probe

SCHEMA = os.path.join(ROOT, 'results', 'schema.json')


def _free_port():
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def _run_tasks(workers, ps, tasks, timeout=30.0, payload_share=1.0):
  """{task: LinkFigures or the ProbeError} of `tasks`, each in a thread."""
  out = {}

  def one(job, index):
    cluster = spec.Cluster(job, index, tuple(workers), tuple(ps))
    try:
      out[(job, index)] = link_probe.measure_between_tasks(
        cluster, payload_share=payload_share, timeout=timeout
      )
    except link_probe.ProbeError as e:
      out[(job, index)] = e

  threads = [threading.Thread(target=one, args=t) for t in tasks]
  for t in threads:
    t.start()
  for t in threads:
    t.join(timeout + 30)
  return out


def test_every_task_gets_the_chiefs_figures_measured_with_another_host():
  # 127.0.0.1 and localhost are two hosts by name (both reach the chief):
  # the chief measures with worker 1, the first task on another host, not
  # ps 0 on its own, though ps sorts first.
  workers = ['127.0.0.1:%d' % _free_port(), 'localhost:%d' % _free_port()]
  ps = ['127.0.0.1:%d' % _free_port()]
  tasks = [('ps', 0), ('worker', 1), ('worker', 0)]
  out = _run_tasks(workers, ps, tasks, payload_share=0.5)
  figures = {out[t] for t in tasks}
  assert len(figures) == 1, out  # the same figures on every task
  link = figures.pop()
  assert link.between == ('worker:0', 'worker:1')
  assert link.payload_mbits > 0
  assert link.mbits == pytest.approx(link.payload_mbits / 0.5, rel=1e-3)
  assert link.round_trip_us > 0 and link.loopback_round_trip_us > 0
  assert link.one_way_latency_us == pytest.approx(
    max(0.0, (link.round_trip_us - link.loopback_round_trip_us) / 2), abs=0.1
  )
  # The chief's port is free again for its TensorFlow server.
  with socket.socket() as s:
    s.bind(('127.0.0.1', int(workers[0].rpartition(':')[2])))


def test_a_task_that_never_comes_is_named():
  workers = ['127.0.0.1:%d' % _free_port() for _ in range(3)]
  out = _run_tasks(workers, [], [('worker', 0), ('worker', 1)], timeout=1.5)
  assert isinstance(out[('worker', 0)], link_probe.ProbeError)
  text = str(out[('worker', 0)])
  assert 'worker:2 did not join worker 0' in text and '--link_mbits' in text
  # The peer that came is not left waiting: the chief's side closed.
  assert isinstance(out[('worker', 1)], link_probe.ProbeError)


def test_a_taken_chief_port_is_named():
  with socket.create_server(('', 0)) as taken:
    port = taken.getsockname()[1]
    workers = ['127.0.0.1:%d' % port, 'localhost:%d' % _free_port()]
    out = _run_tasks(workers, [], [('worker', 0)], timeout=1.0)
  assert 'cannot listen on port %d of worker 0' % port in str(
    out[('worker', 0)]
  )


def test_a_task_outside_the_spec_is_told_to_give_the_rate():
  cluster = spec.Cluster('evaluator', 0, ('a:1', 'b:2'))
  with pytest.raises(link_probe.ProbeError, match='--link_mbits=R'):
    link_probe.measure_between_tasks(cluster, timeout=1.0)


_FIGURES = link_probe.LinkFigures(
  payload_mbits=95.6,
  mbits=100.0,
  one_way_latency_us=250.0,
  round_trip_us=600.0,
  loopback_round_trip_us=100.0,
  between=('worker:0', 'worker:1'),
)


def _cluster_flags(**extra):
  return dict(
    AUTO_RESNET20,
    job_name='worker',
    task_index=1,
    worker_hosts='hosta:1,hostb:1',
    **extra,
  )


def test_auto_predicts_for_the_measured_link_and_records_it():
  calls = []

  def measure(cluster, payload_share):
    calls.append((cluster.me, payload_share))
    return _FIGURES

  values, choice = auto.choose(_cluster_flags(), measure_link=measure)
  assert calls == [(('worker', 1), pytest.approx(1448 / 1514))]
  target = choice.best.target
  assert (target.link_mbits, target.link_latency_us) == (100.0, 250.0)
  assert not target.colocated  # two hosts
  assert choice.lines()[0] == _FIGURES.text()
  record = choice.record()
  assert record['link'] == {
    'measured': True,
    'mbits': 100.0,
    'payload_mbits': 95.6,
    'one_way_latency_us': 250.0,
    'between': ['worker:0', 'worker:1'],
  }
  with open(SCHEMA) as f:
    schema = json.load(f)
  line = {'prediction': record}
  jsonschema.Draft202012Validator(schema['$defs']['prediction']).validate(line)
  # The same prediction as the link given by hand.
  given = auto.choose(_cluster_flags(link_mbits=100.0), measure_link=None)[1]
  assert given.link is None and 'link' not in given.record()
  assert given.best.strategy == choice.best.strategy


def _never(*args, **kwargs):
  raise AssertionError('measured where it should not')


@pytest.mark.parametrize(
  'flags',
  [
    dict(link_mbits=100.0),  # given
    dict(worker_hosts='hosta:1,hosta:2'),  # one host
  ],
)
def test_no_measurement_with_a_given_link_or_on_one_host(flags):
  overrides = dict(_cluster_flags(), **flags)
  _, choice = auto.choose(overrides, measure_link=_never)
  assert choice.link is None


def test_a_failed_measurement_is_an_auto_error():
  def measure(cluster, payload_share):
    raise link_probe.ProbeError('measuring the link: worker:1 did not join')

  with pytest.raises(auto.AutoError, match='^--variable_update=auto: meas'):
    auto.choose(_cluster_flags(), measure_link=measure)
