#!/usr/bin/env python3
"""Runs one multi-worker benchmark as a cluster of local processes.

  python scripts/launch_local_cluster.py --num_workers=N [--num_ps=M]
      [--[no-]controller] [--timeout=S] [--module=M]
      [--link_mbits=R] [--topology=shared|switch] [--auto_trials=K]
      -- <benchmark flags>
  python scripts/launch_local_cluster.py --measure_link [--link_mbits=R]
      [--topology=shared|switch] [--measure_megabytes=MB]

Every task (ps:k, worker:w, controller:0) is its own
`python -m tf_cnn_benchmarks <flags> --job_name=... --task_index=...` process
with a server on 127.0.0.1 and a free port. Each output line is prefixed
with its task ("[worker:0] ..."). Without --num_ps/--controller, the
variable manager (--variable_update) decides whether the cluster gets one ps
task and a controller.

TensorFlow's servers listen on every interface (a server takes a port, not
an address), so the launcher runs itself and every task in a new network
namespace whose only interface is loopback (`unshare -rn`) when it can;
then no other host, and no process outside the namespace, reaches them.
--no-private_network turns that off.

--link_mbits=R limits the network between the tasks to R Mbit/s with a
token bucket (tc tbf, _netshape.py). --topology=shared (the default) puts
every task on the namespace's loopback with one bucket on it: one link all
flows share. --topology=switch gives each task a namespace of its own on a
port of a bridge (10.31.0.k, inside the private namespace only), with a
bucket on each direction of each task's link; the host lists name those
addresses. Every task gets --tasks_colocated=true (unless the flags say
otherwise): on either topology they share this machine's cores, which
--cluster_threads=auto then splits among them. --measure_link starts no
cluster: it times a TCP transfer and a 64-byte round trip between two
processes placed as worker:0 and worker:1 would be (measure_link.py). A
network that cannot be shaped here is one line on stderr and exit status 2.

With --variable_update=auto the launcher resolves it once: it measures a
short profile (or takes --scaling_profile), starts the cluster shape (ps
tasks, controller) of the predicted best strategy, and gives every task the
same --scaling_profile (and --link_mbits/--topology as --link_mbits/
--link_topology), so every task predicts and runs the same strategy.
--auto_trials=K: when other strategies are within the prediction's
uncertainty of the best, run up to K of them quietly for
--auto_trial_batches steps each and start the one that measured fastest
(the tasks get the figures as --auto_trials_measured).
--tasks_measure_link (with --topology=switch) keeps the link from the tasks:
they measure it between them before their servers start, as tasks on
separate hosts do (tf_cnn_benchmarks/scaling/auto/link_probe.py).

The launcher ends when the workers (or the controller) and the tasks serving
them have ended. Each worker prints the cluster's `total images/sec` (with a
label line saying so); when every task exited 0 the launcher closes with one
summary line holding the cluster's figure once, as the chief printed it:

  launcher: cluster of 2 workers: total images/sec: 1828.40 (worker:0's)
 Exit status: 0 when every task exited 0; 1 when some task
failed; 124 when --timeout passed (every task is killed); 2 for bad input.
"""

import argparse
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

from tf_cnn_benchmarks.commands import lifetime
from tf_cnn_benchmarks.commands import measure_link
from tf_cnn_benchmarks.commands import netshape
from tf_cnn_benchmarks.commands import task_cluster
from tf_cnn_benchmarks.platform import checkout
from tf_cnn_benchmarks.platform import quiet
from tf_cnn_benchmarks.scaling.auto import auto_trials
import variable_mgr

REPO_ROOT = checkout.ROOT
# Tasks run from a checkout's root, where `-m tf_cnn_benchmarks` finds the
# package; installed (tf-cnn-benchmarks-launch), from the caller's directory,
# so relative paths in the flags (--result_file=...) mean what they say there.
TASK_CWD = REPO_ROOT if checkout.IN_CHECKOUT else None
# What the launcher re-executes in its private network namespace.
MODULE = 'tf_cnn_benchmarks.commands.launch_local_cluster'
HOST = '127.0.0.1'  # servers have no authentication: never listen wider
# Set in the environment of a launcher that runs in its private namespace.
_IN_PRIVATE_NETWORK = 'LAUNCH_LOCAL_CLUSTER_PRIVATE_NETWORK'
# "SIGNAL,PARENT_PID": the parent-death signal to set again after the re-exec.
_DEATH_SIGNAL = 'LAUNCH_LOCAL_CLUSTER_DEATH_SIGNAL'


TOPOLOGIES = ('shared', 'switch')
Cluster = task_cluster.Cluster  # the running tasks of one launch

# Benchmark flags the launcher sets for each task.
_LAUNCHER_FLAGS = (
  'job_name',
  'task_index',
  'worker_hosts',
  'ps_hosts',
  'controller_host',
)


def build_parser() -> argparse.ArgumentParser:
  """The launcher's own options (a lab probe adds its own to them)."""
  parser = argparse.ArgumentParser(
    description=__doc__.splitlines()[0],
    usage='%(prog)s --num_workers=N [--num_ps=M] [--[no-]controller] '
    '[--timeout=S] [--link_mbits=R] [--topology=shared|switch] '
    '[--auto_trials=K [--auto_trial_batches=N]] '
    '-- <benchmark flags>',
  )
  parser.add_argument('--num_workers', type=int, default=None)
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
    default=1800.0,
    help='kill every task after this many seconds',
  )
  parser.add_argument(
    '--private_network',
    action=argparse.BooleanOptionalAction,
    default=None,
    help='run every task in a new network namespace that has only '
    'loopback (unshare -rn), so no other host can reach the servers '
    '(default: when unshare works here)',
  )
  _add_network_flags(parser)
  parser.add_argument('--python', default=sys.executable)
  parser.add_argument(
    '--module',
    default='tf_cnn_benchmarks',
    help='module each task runs with python -m',
  )
  return parser


def _add_network_flags(parser) -> None:
  """--link_mbits, --topology and --measure_link (validated by parse_args)."""
  parser.add_argument(
    '--link_mbits',
    default=None,
    metavar='R',
    help='limit the link between the tasks to R Mbit/s with a token bucket '
    '(tc tbf) in the private network (default: unthrottled)',
  )
  parser.add_argument(
    '--topology',
    default='shared',
    metavar='shared|switch',
    help='shared: every task on one loopback, one link all flows share '
    '(a hub); switch: each task in its own network namespace on a bridge '
    'port of its own, --link_mbits each way (default: shared)',
  )
  parser.add_argument(
    '--measure_link',
    action='store_true',
    help='start no cluster: time a TCP transfer and a 64-byte round trip '
    'between two processes placed as two tasks would be; print the figures',
  )
  parser.add_argument(
    '--auto_trials',
    type=int,
    default=0,
    metavar='K',
    help='with --variable_update=auto: when the predicted best and others '
    "are within the prediction's uncertainty, run up to K of them for "
    '--auto_trial_batches steps each, quietly, and run the one that '
    'measured fastest (default 0: run the predicted best)',
  )
  parser.add_argument(
    '--auto_trial_batches',
    type=int,
    default=10,
    metavar='N',
    help='measured steps of each --auto_trials trial, after 3 warm-up '
    'steps (default 10)',
  )
  parser.add_argument(
    '--tasks_measure_link',
    action='store_true',
    help='with --variable_update=auto and --topology=switch: tell the tasks '
    "neither --link_mbits nor the topology's rate; they measure the link "
    'between them before their servers start, as tasks on separate hosts do',
  )
  parser.add_argument(
    '--measure_megabytes',
    default=None,
    help='bytes of the --measure_link transfer, in MB (default: about 2 s '
    'at --link_mbits)',
  )


def parse_args(argv):
  """(launcher options, benchmark flags) from argv."""
  if '--' in argv:
    split = argv.index('--')
    own, flags = argv[:split], argv[split + 1 :]
  else:
    own, flags = argv, []
  parser = build_parser()
  args = parser.parse_args(own)
  check_link_flags(args)
  # --measure_link is bounded by it too (the sender's run).
  number_at_least(args, 'timeout', 0, True, 'a number of seconds > 0')
  if args.measure_link:
    return args, flags
  if args.num_workers is None:
    parser.error('the following arguments are required: --num_workers')
  if args.num_workers < 1:
    parser.error('--num_workers=%d: must be >= 1' % args.num_workers)
  if args.num_ps is not None and args.num_ps < 0:
    parser.error('--num_ps=%d: must be >= 0' % args.num_ps)
  if args.auto_trials < 0:
    _bad_flag('--auto_trials=%d: must be >= 0' % args.auto_trials)
  if args.auto_trial_batches < 1:
    _bad_flag('--auto_trial_batches=%d: must be >= 1' % args.auto_trial_batches)
  for flag in flags:
    name = flag.lstrip('-').split('=')[0]
    if name in _LAUNCHER_FLAGS:
      parser.error('--%s: set by the launcher; do not pass it' % name)
  if args.tasks_measure_link and (
    args.topology != 'switch' or _flag_value(flags, 'variable_update') != 'auto'
  ):
    _bad_flag(
      '--tasks_measure_link: needs --topology=switch (a host address per '
      'task) and --variable_update=auto among the benchmark flags'
    )
  if args.auto_trials and _flag_value(flags, 'variable_update') != 'auto':
    _bad_flag(
      '--auto_trials=%d: needs --variable_update=auto among the benchmark '
      'flags' % args.auto_trials
    )
  return args, flags


def _bad_flag(text):
  """One line on stderr, exit status 2."""
  print('error: %s' % text, file=sys.stderr)
  sys.exit(2)


def number_at_least(args, name, low, strictly, what, high=float('inf')):
  """args.<name> as a float (None stays None); bad: one line, exit 2."""
  text = getattr(args, name)
  if text is None:
    return
  try:
    value = float(text)
  except ValueError:
    value = float('nan')
  big_enough = value > low if strictly else value >= low
  if not (big_enough and value < float('inf') and value <= high):
    _bad_flag('--%s=%s: must be %s' % (name, text, what))
  setattr(args, name, value)


def check_link_flags(args):
  """Validates --link_mbits, --topology and --measure_megabytes in place."""
  number_at_least(
    args,
    'link_mbits',
    netshape.MIN_MBITS,
    False,
    'a number of Mbit/s from %.6f (1 byte/s) to %d, the rates tc tbf can '
    'shape (absent: unthrottled)' % (netshape.MIN_MBITS, netshape.MAX_MBITS),
    high=netshape.MAX_MBITS,
  )
  if args.topology not in TOPOLOGIES:
    _bad_flag(
      '--topology=%s: must be one of %s' % (args.topology, '|'.join(TOPOLOGIES))
    )
  # Less than a megabyte fits in the sockets' buffers: no rate to see.
  number_at_least(args, 'measure_megabytes', 1, False, 'a number >= 1')


def private_network_works() -> bool:
  """Whether `unshare -rn` can make a network namespace here."""
  if not (shutil.which('unshare') and shutil.which('ip')):
    return False
  try:
    return (
      subprocess.run(
        ['unshare', '-rn', 'ip', 'link', 'set', 'lo', 'up'],
        capture_output=True,
        timeout=10,
      ).returncode
      == 0
    )
  except (OSError, subprocess.SubprocessError):
    return False


def reexec_in_private_network(argv, module=MODULE) -> None:
  """Replaces this process by itself in a new network namespace.

  TensorFlow's gRPC server listens on every interface whatever host its
  cluster entry names (tf.distribute.Server takes a port, never an address),
  so binding 127.0.0.1 is not possible; a namespace whose only interface is
  loopback gives the same guarantee. exec keeps this pid, so signals sent to
  the launcher still reach it.
  """
  # Entering a user namespace clears the parent-death signal (a sweep's);
  # the new launcher sets it again.
  env = dict(
    os.environ,
    **{
      _IN_PRIVATE_NETWORK: '1',
      _DEATH_SIGNAL: '%d,%d' % (lifetime.parent_death_signal(), os.getppid()),
    },
  )
  os.execvpe(
    'unshare',
    [
      'unshare',
      '-rn',
      '--',
      'sh',
      '-c',
      'ip link set lo up && exec "$0" "$@"',
      *checkout.module_argv(module, *argv),
    ],
    checkout.child_env(env),
  )


def _flag_value(flags, name, default=None):
  for flag in flags:
    if flag.startswith('--%s=' % name):
      return flag.split('=', 1)[1]
  return default


def manager_needs(flags):
  """(needs ps tasks, needs a controller) of `flags`' --variable_update."""
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  with quiet.captured_stderr_fd():  # TensorFlow's load-time lines
    variable_mgr.load_managers()  # TensorFlow loads here

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


def colocated_flag(flags):
  """['--tasks_colocated=true'] unless `flags` say it: every task runs on
  this machine's cores, on switch ports too (each in a namespace of its
  own), so --cluster_threads=auto splits the cores among them all rather
  than giving each task TensorFlow's pools for every core."""
  given = ('--tasks_colocated', '--notasks_colocated')
  if any(f == g or f.startswith(g + '=') for f in flags for g in given):
    return []
  return ['--tasks_colocated=true']


def task_commands(args, flags, num_ps, controller, switch=None):
  """{task name: argv} for every task of the cluster.

  With `switch` (a netshape.SwitchNetwork), each task gets a host of its
  own on it: its address in the host lists, its namespace around its argv.
  """
  counts = [
    ('ps', num_ps),
    ('worker', args.num_workers),
    ('controller', 1 if controller else 0),
  ]
  names = ['%s:%d' % (job, k) for job, n in counts for k in range(n)]
  ports = free_ports(len(names))
  prefixes, addresses = {}, {}
  for index, name in enumerate(names):
    addresses[name] = switch.host(index) if switch else HOST
    prefixes[name] = switch.prefix(index) if switch else []
  hosts = {job: [] for job, _ in counts}
  for name, port in zip(names, ports):
    hosts[name.split(':')[0]].append('%s:%d' % (addresses[name], port))
  cluster_flags = ['--worker_hosts=' + ','.join(hosts['worker'])]
  if hosts['ps']:
    cluster_flags.append('--ps_hosts=' + ','.join(hosts['ps']))
  if hosts['controller']:
    cluster_flags.append('--controller_host=' + hosts['controller'][0])
  commands = {}
  for name in names:
    job, k = name.split(':')
    commands[name] = (
      prefixes[name]
      + [args.python, '-m', args.module]
      + flags
      + colocated_flag(flags)
      + cluster_flags
      + ['--job_name=' + job, '--task_index=%s' % k]
    )
  return commands


def _network_flag(args):
  """The flag that asks for a shaped network, as the user wrote it."""
  if args.link_mbits is not None:
    return '--link_mbits=%g' % args.link_mbits
  if args.topology != 'shared':
    return '--topology=%s' % args.topology
  return None


def enter_private_network(args, argv, module=MODULE):
  """Re-executes in the private namespace when asked and possible.

  Returns (only when it does not re-execute) an exit status, or None to go
  on here. A shaped network (--link_mbits, --topology=switch) needs the
  namespace: without it the launcher says why in one line (status 2).
  """
  if os.environ.get(_IN_PRIVATE_NETWORK):
    return None
  shaped = _network_flag(args)
  if shaped and args.private_network is False:
    print(
      'error: %s: needs the private network; drop --no-private_network'
      % shaped,
      file=sys.stderr,
    )
    return 2
  if shaped:
    why = netshape.shaping_works(args.link_mbits or 1000.0)
    if why:
      print(
        'error: %s: cannot shape the network here: %s' % (shaped, why),
        file=sys.stderr,
      )
      return 2
  if args.private_network is not False:
    if private_network_works():
      reexec_in_private_network(argv, module)
    if args.private_network:
      print(
        'error: --private_network: unshare -rn does not work here '
        '(no user namespaces?)',
        file=sys.stderr,
      )
      return 2
    print(
      'launcher: no private network namespace (unshare -rn unavailable): '
      'the servers listen on every interface',
      flush=True,
    )
  return None


def shape_network(args):
  """Applies --link_mbits/--topology here; the SwitchNetwork or None."""
  if args.topology == 'switch':
    return netshape.SwitchNetwork(args.link_mbits)
  if args.link_mbits is not None:
    netshape.shape_loopback(args.link_mbits)
  return None


def run_in_network(args, argv, work, module=MODULE):
  """Runs work(args, switch) in the private, shaped network: re-executes
  `module` with `argv` in the namespace first (when asked and possible),
  applies --link_mbits/--topology, and undoes them after. A lab probe passes
  its own module and work. Returns the exit status."""
  sig, parent = map(int, os.environ.pop(_DEATH_SIGNAL, '0,0').split(','))
  if sig:
    lifetime.die_with(parent, sig)
  status = enter_private_network(args, argv, module)
  if status is not None:
    return status
  switch = None
  try:
    switch = shape_network(args)
    return work(args, switch)
  except netshape.ShapingError as e:
    print(
      'error: %s: %s' % (_network_flag(args) or '--measure_link', e),
      file=sys.stderr,
    )
    return 2
  finally:
    if switch:
      switch.close()


def main(argv=None):
  """Entry point; returns the exit status."""
  argv = sys.argv[1:] if argv is None else argv
  args, flags = parse_args(argv)
  if args.measure_link:
    return run_in_network(args, argv, measure_link.between_tasks)
  return run_in_network(
    args, argv, lambda a, switch: run_cluster(a, flags, switch)
  )


def resolve_auto(args, flags, workdir, run_trial=None):
  """--variable_update=auto, once for every task: (the tasks' flags, ps
  tasks, controller?). The tasks get one --scaling_profile (measured here
  when not given) and this launcher's link, so each predicts the same
  ranking (tf_cnn_benchmarks/scaling/auto/auto_launch.py). With --auto_trials
  and `run_trial` (run_trials), close calls are measured first and the
  tasks run the fastest."""
  quiet.load_tensorflow()
  # Imports TensorFlow: late and quiet, only for --variable_update=auto.
  from tf_cnn_benchmarks.scaling.auto import auto_launch  # pylint: disable=g-import-not-at-top

  overrides = auto_launch.overrides_from_argv(flags)
  path = auto_launch.profile_for(
    overrides, os.path.join(workdir, 'scaling_profile.json')
  )
  extra = ['--scaling_profile=' + path] + colocated_flag(flags)
  shape, told = auto_launch.link_flags(flags, args.link_mbits, args.topology)
  extra += shape
  kept = [f for f in flags if not f.startswith('--scaling_profile=')]
  overrides = auto_launch.overrides_from_argv(kept + extra + told)
  rankings = auto_launch.shape_rankings(
    overrides, args.num_workers, args.num_ps, args.controller
  )
  num_ps, controller, best = auto_launch.best_of(rankings, args.num_workers)
  if not args.tasks_measure_link:  # else the shape is chosen; they measure
    extra += told
  limit = args.auto_trials if run_trial else 0
  trials = auto_launch.trials_to_run(rankings, args.num_workers, limit)
  said = '%s predicted best (%.1f images/sec)' % (
    best.strategy.label(),
    best.images_per_sec,
  )
  if trials:
    print(
      'launcher: --variable_update=auto: %s; %d within its uncertainty: '
      'trying each for %d steps'
      % (said, len(trials) - 1, args.auto_trial_batches),
      flush=True,
    )
    pick, value = run_trials(args, kept, trials, run_trial)
    if pick is not None:
      extra.append('--auto_trials_measured=' + value)
      num_ps, controller = pick.num_ps, pick.controller
      said = '%s measured fastest of %d trials' % (pick.label(), len(trials))
    else:
      said = 'no trial measured; running the predicted best'
  print(
    'launcher: --variable_update=auto: %s; starting %d ps task(s)%s'
    % (said, num_ps, ' and a controller' if controller else ''),
    flush=True,
  )
  return kept + extra, num_ps, controller


def run_trials(args, flags, trials, run_trial):
  """Runs each close call briefly; (the fastest Trial or None, the tasks'
  --auto_trials_measured value). run_trial(flags, num_ps, controller)
  returns a trial cluster's images/sec, or None when it failed."""
  done = []
  for k, trial in enumerate(trials, 1):
    argv = auto_trials.trial_argv(flags, trial, args.auto_trial_batches)
    figure = run_trial(argv, trial.num_ps, trial.controller)
    done.append(dataclasses.replace(trial, measured=figure))
    print(
      'launcher: --variable_update=auto: trial %d of %d: %s (%s): %s '
      '(predicted %.1f)'
      % (
        k,
        len(trials),
        trial.label(),
        trial.shape_text(),
        'failed' if figure is None else '%.1f images/sec' % figure,
        trial.predicted,
      ),
      flush=True,
    )
  pick = auto_trials.fastest(done)
  return pick, auto_trials.encode(done)


def run_cluster(args, flags, switch):
  """Starts the cluster's tasks and waits for them; the exit status."""
  num_ps, controller = args.num_ps, args.controller
  if _flag_value(flags, 'variable_update') == 'auto':
    with tempfile.TemporaryDirectory(prefix='auto_profile_') as workdir:

      def run_trial(trial_flags, trial_ps, trial_controller):
        return _trial_figure(
          args, trial_flags, switch, trial_ps, trial_controller
        )

      try:
        flags, num_ps, controller = resolve_auto(
          args, flags, workdir, run_trial
        )
      except ValueError as e:  # AutoError, ProfileError, ParamsError
        print('error: %s' % str(e).splitlines()[0], file=sys.stderr)
        return 2
      return _start_and_wait(args, flags, switch, num_ps, controller)
  if num_ps is None or controller is None:
    needs_ps, needs_controller = manager_needs(flags)
    num_ps = (1 if needs_ps else 0) if num_ps is None else num_ps
    controller = needs_controller if controller is None else controller
  return _start_and_wait(args, flags, switch, num_ps, controller)


def _clients(args, controller):
  """The tasks a launch waits for: the controller, else every worker."""
  if controller:
    return ['controller:0']
  return ['worker:%d' % w for w in range(args.num_workers)]


def _trial_figure(args, flags, switch, num_ps, controller):
  """One quiet cluster of this shape (an --auto_trials trial): the chief's
  images/sec, or None when it failed."""
  commands = task_commands(args, flags, num_ps, controller, switch)
  cluster = Cluster(commands, TASK_CWD, echo=False)
  clients = _clients(args, controller)
  if cluster.wait(clients, args.timeout) != 0:
    return None
  return cluster.figure(clients)


def _start_and_wait(args, flags, switch, num_ps, controller):
  """Starts the tasks of this shape and waits for them; the exit status."""
  commands = task_commands(args, flags, num_ps, controller, switch)
  cluster = Cluster(commands, TASK_CWD)

  def on_signal(signum, frame):
    del frame
    cluster.kill_all()
    sys.exit(128 + signum)

  signal.signal(signal.SIGTERM, on_signal)
  signal.signal(signal.SIGINT, on_signal)
  return cluster.wait(_clients(args, controller), args.timeout)


if __name__ == '__main__':
  sys.exit(main())
