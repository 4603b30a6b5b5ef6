"""The task processes of one local cluster: started, echoed, waited for.

scripts/launch_local_cluster.py starts each task as its own process. A
Cluster runs them, prefixes each output line with its task ("[worker:0]
..."), keeps each task's `total images/sec` figure, and waits for the
clients (the workers, or the controller) and then the tasks serving them.
"""

import collections
import os
import re
import subprocess
import sys
import threading
import time

from tf_cnn_benchmarks.commands import lifetime

# TensorFlow's C++ log level the user chose, if any (tasks default to 3).
_USER_LOG_LEVEL = os.environ.get('TF_CPP_MIN_LOG_LEVEL')
# After the clients end, the serving tasks get this long to notice and exit.
SERVE_GRACE_S = 60.0
# A task's classic rate line (the cluster's figure in every worker).
_TOTAL_RE = re.compile(r'^total images/sec: (\S+)$')
# A quiet cluster keeps this many of each task's last lines, to show on
# failure.
TAIL_LINES = 20


def _pump(name, stream, cluster):
  """Prefixes a task's lines with its name (a quiet cluster keeps its last
  lines instead); keeps its 'total images/sec'."""
  tail = cluster.tails[name]
  for line in iter(stream.readline, ''):
    text = line.rstrip('\n')
    match = _TOTAL_RE.match(text)
    if match:
      cluster.totals[name] = match.group(1)
    if not cluster.echo:
      tail.append(text)
      continue
    with cluster.lock:
      sys.stdout.write('[%s] %s\n' % (name, text))
      sys.stdout.flush()
  stream.close()


class Cluster:
  """The running task processes.

  commands: {task name: argv}; cwd: where the tasks run (None: here).
  echo: False for a quiet cluster (a trial of --variable_update=auto):
    none of its lines, nor its summary, reach stdout; a task that fails
    shows its last TAIL_LINES lines.
  """

  def __init__(self, commands, cwd=None, echo=True):
    self.lock = threading.Lock()
    self.procs = {}
    self.pumps = []
    self.echo = echo
    self.totals = {}  # task name -> its 'total images/sec' figure (text)
    self.tails = {n: collections.deque(maxlen=TAIL_LINES) for n in commands}
    env = dict(os.environ, PYTHONUNBUFFERED='1')
    env.pop('TF_CONFIG', None)  # the flags describe the cluster
    # Errors too: a lost peer made TensorFlow log ~30 lines ("Aborting
    # RingReduce") before the task's own one line naming the lost task.
    env['TF_CPP_MIN_LOG_LEVEL'] = _USER_LOG_LEVEL or '3'
    for name, argv in commands.items():
      self.procs[name] = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # No task outlives the launcher, even one killed by SIGKILL.
        preexec_fn=lifetime.die_with_parent_preexec(),
      )
    # Pumps start after every fork: preexec_fn and threads do not mix.
    for name, proc in self.procs.items():
      pump = threading.Thread(
        target=_pump,
        args=(name, proc.stdout, self),
        daemon=True,
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
      self._say_tails(n for n, p in self.procs.items() if p.returncode)
      self._say('launcher: failed: %s' % ', '.join(failed))
      return 1
    if self.echo:
      self._say_total(clients)
    return 0

  def figure(self, clients):
    """The chief client's total images/sec, or None when it printed none."""
    text = self.totals.get(clients[0])
    try:
      return None if text is None else float(text)
    except ValueError:
      return None

  def _say_tails(self, names):
    """A quiet cluster's last lines of the tasks `names`, prefixed."""
    if self.echo:
      return  # every line was shown as it came
    for name in sorted(names):
      for text in self.tails[name]:
        self._say('[%s] %s' % (name, text))

  def _say_total(self, clients):
    """One summary line: the cluster's figure once, from the chief client."""
    chief = clients[0]
    if chief not in self.totals:
      return
    workers = sum(1 for name in self.procs if name.startswith('worker:'))
    self._say(
      "launcher: cluster of %d worker%s: total images/sec: %s (%s's)"
      % (workers, '' if workers == 1 else 's', self.totals[chief], chief)
    )

  def _join_pumps(self):
    for pump in self.pumps:
      pump.join(timeout=5)

  def _say(self, text):
    with self.lock:
      print(text, flush=True)
