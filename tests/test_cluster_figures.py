"""Issue 28 item 8: a cluster's console says whose images/sec it prints.

Every worker keeps the classic 'total images/sec:' line (the cluster's
figure), then a label line naming it and the worker's own share; the
launcher closes with the cluster's figure once.
"""

import re
import sys

import pytest

from tf_cnn_benchmarks.commands import launch_local_cluster  # noqa: E402


def _task(text):
  return [sys.executable, '-c', 'print(%r)' % text]


def test_launcher_summary_prints_the_chiefs_figure_once(capsys):
  cluster = launch_local_cluster.Cluster(
    {
      'ps:0': _task('serving'),
      'worker:0': _task('total images/sec: 1828.40'),
      'worker:1': _task('total images/sec: 1828.37'),
    }
  )
  assert cluster.wait(['worker:0', 'worker:1'], 60) == 0
  out = capsys.readouterr().out.splitlines()
  summary = [ln for ln in out if ln.startswith('launcher: ')]
  assert summary == [
    "launcher: cluster of 2 workers: total images/sec: 1828.40 (worker:0's)"
  ]
  assert out[-1] == summary[0]  # the last line of the launch


def test_launcher_prints_no_figure_when_a_task_failed(capsys):
  cluster = launch_local_cluster.Cluster(
    {
      'worker:0': _task('total images/sec: 10.00'),
      'worker:1': [sys.executable, '-c', 'raise SystemExit(3)'],
    }
  )
  assert cluster.wait(['worker:0', 'worker:1'], 60) == 1
  out = capsys.readouterr().out
  assert 'launcher: failed: worker:1 (exit 3)' in out
  assert 'launcher: cluster of' not in out


@pytest.mark.slow
def test_each_worker_labels_the_clusters_figure(tmp_path):
  from tests import test_distributed  # pylint: disable=g-import-not-at-top

  out, records = test_distributed.launch_ok(
    tmp_path,
    2,
    test_distributed.LINEAR + ['--variable_update=parameter_server'],
    launcher_flags=test_distributed.TASKS['parameter_server'],
    every_worker_reports=True,
  )
  lines = out.splitlines()
  for worker in (0, 1):
    prefix = '[worker:%d] ' % worker
    own = [ln[len(prefix) :] for ln in lines if ln.startswith(prefix)]
    block = next(i for i, ln in enumerate(own) if ln.startswith('total '))
    total = float(own[block].split(': ')[1])
    label = re.fullmatch(
      r"\(cluster of 2 workers: total images/sec is the cluster's; "
      r'this worker: ([\d.]+) images/sec\)',
      own[block + 1],
    )
    assert label, own[block : block + 3]
    assert float(label.group(1)) == pytest.approx(total / 2, abs=0.06)
    assert own[block + 2].startswith('images/sec 95% CI: [')
  summary = [ln for ln in lines if ln.startswith('launcher: cluster of')]
  assert len(summary) == 1
  chief = next(r for r in records if r['task']['task_index'] == 0)
  assert summary[0] == (
    "launcher: cluster of 2 workers: total images/sec: %.2f (worker:0's)"
    % chief['images_per_sec']
  )
  assert len(chief['step_times_ms']) == 3
