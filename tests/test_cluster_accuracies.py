"""Cluster runs: the results line's training accuracies cover every worker.

`top_1_accuracies` / `top_5_accuracies` are the cluster's (the mean over
every worker's towers, averaged with the step's own synchronisation, as
`losses`); the writing worker's own are `worker_top_1_accuracies` /
`worker_top_5_accuracies`, beside `worker_losses`. Each worker writes its
own line here, so the test sees both workers' own accuracies.
"""

import numpy as np
import pytest

from tests import test_distributed

# Few classes and small batches: the two workers' fractions differ at some
# step, so a line holding one worker's would not pass for the cluster's.
FLAGS = test_distributed.LINEAR + [
  '--print_training_accuracy',
  '--num_batches=6',
]


def _by_task(records):
  by_task = {r['task']['task_index']: r for r in records}
  assert sorted(by_task) == [0, 1], by_task
  return by_task[0], by_task[1]


# collective_all_reduce's case runs in the default suite, on the two-worker
# run of test_outputs_under_faults.py; these modes average the accuracies
# elsewhere (the ps's gradient accumulators, or a collective beside the ps).
@pytest.mark.slow
@pytest.mark.parametrize('variable_update', ['parameter_server', 'hybrid'])
def test_cluster_accuracies_are_the_mean_of_the_workers(
  tmp_path, variable_update
):
  _, records = test_distributed.launch_ok(
    tmp_path,
    2,
    FLAGS + ['--variable_update=%s' % variable_update],
    launcher_flags=test_distributed.TASKS[variable_update],
    every_worker_reports=True,
  )
  first, second = _by_task(records)
  for k in (1, 5):
    key = 'top_%d_accuracies' % k
    own = [np.array(r['worker_' + key]) for r in (first, second)]
    mean = (own[0] + own[1]) / 2
    np.testing.assert_allclose(first[key], mean, rtol=1e-6)
    if variable_update == 'hybrid':  # every worker averages
      np.testing.assert_allclose(second[key], mean, rtol=1e-6)
  # The test tells the scopes apart: the workers' batches differ.
  own_top_1 = [r['worker_top_1_accuracies'] for r in (first, second)]
  assert own_top_1[0] != own_top_1[1], own_top_1
  # The losses follow the same rule (worker_losses beside them).
  np.testing.assert_allclose(
    first['losses'],
    (np.array(first['worker_losses']) + np.array(second['worker_losses'])) / 2,
    rtol=1e-5,
  )
