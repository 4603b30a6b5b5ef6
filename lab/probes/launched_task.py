"""What a module run on the launcher's tasks (--module) shares: the cluster
flags every task gets, and its own server.

read_stagger.py, link_cpu.py and port_duplex.py run so under
launch_local_cluster.py.
"""

from __future__ import annotations

import argparse


def parser(description: str) -> argparse.ArgumentParser:
  """A parser with the launcher's cluster flags (all required)."""
  p = argparse.ArgumentParser(description=description)
  for flag in ('--worker_hosts', '--ps_hosts', '--job_name'):
    p.add_argument(flag, required=True)
  p.add_argument('--task_index', type=int, required=True)
  return p


def spec(args) -> dict:
  """The cluster of the parsed flags: {'worker': [...], 'ps': [...]}."""
  return {
    'worker': args.worker_hosts.split(','),
    'ps': args.ps_hosts.split(','),
  }


def server(args, job: str | None = None, task: int | None = None):
  """This task's tf.distribute.Server (or `job`:`task`'s), started."""
  from tf_cnn_benchmarks.scaling.profile import transport_task

  return transport_task.server(
    spec(args),
    args.job_name if job is None else job,
    args.task_index if task is None else task,
  )
