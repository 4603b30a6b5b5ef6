#!/usr/bin/env python3
"""Runs one multi-worker benchmark as a cluster of local processes.

  python scripts/launch_local_cluster.py --num_workers=N [--num_ps=M]
      [--[no-]controller] [--timeout=S] [--module=M] -- <benchmark flags>

Every task (ps:k, worker:w, controller:0) is its own
`python -m tf_cnn_benchmarks <flags> --job_name=... --task_index=...` process
with a server on 127.0.0.1 and a free port. Each output line is prefixed
with its task ("[worker:0] ..."). Without --num_ps/--controller, the
variable manager (--variable_update) decides whether the cluster gets one ps
task and a controller.

The launcher ends when the workers (or the controller) and the tasks serving
them have ended. Exit status: 0 when every task exited 0; 1 when some task
failed; 124 when --timeout passed (every task is killed); 2 for bad input.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST = '127.0.0.1'  # servers have no authentication: never listen wider
# After the clients end, the serving tasks get this long to notice and exit.
SERVE_GRACE_S = 60.0


def parse_args(argv):
  """(launcher options, benchmark flags) from argv."""
  if '--' in argv:
    split = argv.index('--')
    own, flags = argv[:split], argv[split + 1 :]
  else:
    own, flags = argv, []
  parser = argparse.ArgumentParser(
    description=__doc__.splitlines()[0],
    usage='%(prog)s --num_workers=N [--num_ps=M] [--[no-]controller] '
    '[--timeout=S] -- <benchmark flags>',
  )
  parser.add_argument('--num_workers', type=int, required=True)
  parser.add_argument(
    '--num_ps',
    type=int,
    default=None,
    help='ps tasks (default: 1 if the manager needs one)',
  )
  parser.add_argument(
    '--controller',
    action=argparse.BooleanOptionalAction,
    default=None,
    help='start a controller task (default: if the manager needs one)',
  )
  parser.add_argument(
    '--timeout',
    type=float,
    default=1800.0,
    help='kill every task after this many seconds',
  )
  parser.add_argument('--python', default=sys.executable)
  parser.add_argument(
    '--module',
    default='tf_cnn_benchmarks',
    help='module each task runs with python -m',
  )
  args = parser.parse_args(own)
  if args.num_workers < 1:
    parser.error('--num_workers=%d: must be >= 1' % args.num_workers)
  if args.num_ps is not None and args.num_ps < 0:
    parser.error('--num_ps=%d: must be >= 0' % args.num_ps)
  if args.timeout <= 0:
    parser.error('--timeout=%s: must be > 0' % args.timeout)
  for flag in flags:
    name = flag.lstrip('-').split('=')[0]
    if name in (
      'job_name',
      'task_index',
      'worker_hosts',
      'ps_hosts',
      'controller_host',
    ):
      parser.error('--%s: set by the launcher; do not pass it' % name)
  return args, flags


def _flag_value(flags, name, default=None):
  for flag in flags:
    if flag.startswith('--%s=' % name):
      return flag.split('=', 1)[1]
  return default


def manager_needs(flags):
  """(needs ps tasks, needs a controller) of `flags`' --variable_update."""
  sys.path.insert(0, REPO_ROOT)
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  import variable_mgr  # pylint: disable=g-import-not-at-top

  name = _flag_value(flags, 'variable_update', 'parameter_server')
  try:
    traits = variable_mgr.get(name, in_cluster=True).traits
  except ValueError:
    return False, False  # the tasks report the bad flag themselves
  return traits.needs_ps, traits.one_graph


def free_ports(count):
  """`count` distinct free TCP ports on HOST."""
  sockets = []
  try:
    for _ in range(count):
      s = socket.socket()
      s.bind((HOST, 0))
      sockets.append(s)
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def task_commands(args, flags, num_ps, controller):
  """{task name: argv} for every task of the cluster."""
  counts = [
    ('ps', num_ps),
    ('worker', args.num_workers),
    ('controller', 1 if controller else 0),
  ]
  ports = iter(free_ports(sum(n for _, n in counts)))
  hosts = {
    job: ['%s:%d' % (HOST, next(ports)) for _ in range(n)] for job, n in counts
  }
  cluster_flags = ['--worker_hosts=' + ','.join(hosts['worker'])]
  if hosts['ps']:
    cluster_flags.append('--ps_hosts=' + ','.join(hosts['ps']))
  if hosts['controller']:
    cluster_flags.append('--controller_host=' + hosts['controller'][0])
  commands = {}
  for job, n in counts:
    for k in range(n):
      commands['%s:%d' % (job, k)] = (
        [args.python, '-m', args.module]
        + flags
        + cluster_flags
        + ['--job_name=' + job, '--task_index=%d' % k]
      )
  return commands


def _pump(name, stream, lock):
  for line in iter(stream.readline, ''):
    with lock:
      sys.stdout.write(
        '[%s] %s' % (name, line if line.endswith('\n') else line + '\n')
      )
      sys.stdout.flush()
  stream.close()


class Cluster:
  """The running task processes."""

  def __init__(self, commands):
    self.lock = threading.Lock()
    self.procs = {}
    self.pumps = []
    env = dict(os.environ, PYTHONUNBUFFERED='1')
    env.pop('TF_CONFIG', None)  # the flags describe the cluster
    for name, argv in commands.items():
      proc = subprocess.Popen(
        argv,
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
      )
      self.procs[name] = proc
      pump = threading.Thread(
        target=_pump, args=(name, proc.stdout, self.lock), daemon=True
      )
      pump.start()
      self.pumps.append(pump)

  def kill_all(self):
    """Kills every task still running (each by its own pid)."""
    for proc in self.procs.values():
      if proc.poll() is None:
        proc.kill()
    for proc in self.procs.values():
      proc.wait()

  def wait(self, clients, timeout_s):
    """Waits for the clients, then the rest; returns the exit status."""
    deadline = time.monotonic() + timeout_s
    clients_done_at = None
    while True:
      codes = {n: p.poll() for n, p in self.procs.items()}
      if all(c is not None for c in codes.values()):
        break
      if clients_done_at is None and all(codes[c] is not None for c in clients):
        clients_done_at = time.monotonic()
      late = (
        clients_done_at is not None
        and time.monotonic() - clients_done_at > SERVE_GRACE_S
      )
      if time.monotonic() > deadline or late:
        running = sorted(n for n, c in codes.items() if c is None)
        self._say(
          'launcher: %s; killing %s'
          % (
            'timeout after %gs' % timeout_s
            if not late
            else 'tasks still running %gs after the clients ended'
            % SERVE_GRACE_S,
            ', '.join(running),
          )
        )
        self.kill_all()
        self._join_pumps()
        return 124 if not late else 1
      time.sleep(0.2)
    self._join_pumps()
    failed = sorted(
      '%s (exit %d)' % (n, p.returncode)
      for n, p in self.procs.items()
      if p.returncode
    )
    if failed:
      self._say('launcher: failed: %s' % ', '.join(failed))
      return 1
    return 0

  def _join_pumps(self):
    for pump in self.pumps:
      pump.join(timeout=5)

  def _say(self, text):
    with self.lock:
      print(text, flush=True)


def main(argv=None):
  """Entry point; returns the exit status."""
  args, flags = parse_args(sys.argv[1:] if argv is None else argv)
  num_ps, controller = args.num_ps, args.controller
  if num_ps is None or controller is None:
    needs_ps, needs_controller = manager_needs(flags)
    num_ps = (1 if needs_ps else 0) if num_ps is None else num_ps
    controller = needs_controller if controller is None else controller
  commands = task_commands(args, flags, num_ps, controller)
  cluster = Cluster(commands)

  def on_signal(signum, frame):
    del frame
    cluster.kill_all()
    sys.exit(128 + signum)

  signal.signal(signal.SIGTERM, on_signal)
  signal.signal(signal.SIGINT, on_signal)
  clients = (
    ['controller:0']
    if controller
    else ['worker:%d' % w for w in range(args.num_workers)]
  )
  return cluster.wait(clients, args.timeout)


if __name__ == '__main__':
  sys.exit(main())
