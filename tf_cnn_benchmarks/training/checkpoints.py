"""Checkpoints in --train_dir: what is saved, when, and resuming from them.

A checkpoint holds the manager's `savable_variables()`: mode-independent
names (tower 0's copy stands for every tower; global step, loss scale and
optimizer slots included), so a checkpoint written in one mode loads in
another. A resumed run initialises from the checkpoint every variable it
holds and initialises the rest as usual; the manager's post-init ops then copy
tower 0's values to the other towers.

Writes are atomic in the way that matters: TensorFlow writes a checkpoint's
files under temporary names and renames them, and only then rewrites the
`checkpoint` state file (itself by rename), so a run killed while saving
leaves the state file naming the previous, complete checkpoint.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import socket
import time

import tensorflow as tf

from tf_cnn_benchmarks.reporting import outputs
from tf_cnn_benchmarks.training import checkpoint_cleanup
from variable_mgr import hybrid
from variable_mgr import naming
from variable_mgr import staged

tf1 = tf.compat.v1

CHECKPOINT_BASENAME = 'model.ckpt'


class CheckpointError(ValueError):
  """A checkpoint that cannot be used; the message is one line."""


# How a failed file write reaches Python through TensorFlow's file system:
# ENOSPC is RESOURCE_EXHAUSTED, EFBIG (a file size limit) OUT_OF_RANGE, EACCES
# PERMISSION_DENIED, a removed directory NOT_FOUND; the rest of POSIX's errors
# are UNKNOWN or FAILED_PRECONDITION. A lost cluster peer (UNAVAILABLE,
# ABORTED, ...) is none of these.
WRITE_ERRORS = (
  OSError,
  tf.errors.ResourceExhaustedError,
  tf.errors.OutOfRangeError,
  tf.errors.PermissionDeniedError,
  tf.errors.NotFoundError,
  tf.errors.FailedPreconditionError,
  tf.errors.UnknownError,
)


STATE_FILE = 'checkpoint'

# The lock file a run writing checkpoints holds in its --train_dir.
LOCK_FILE = '.tf_cnn_benchmarks.lock'
# What checkpoint_cleanup may remove at start: PREFIX-STEP files, TF's temps.
_CLEANUP_NAMES = (CHECKPOINT_BASENAME, STATE_FILE)


class TrainDirBusyError(CheckpointError):
  """Another live run writes checkpoints to the same --train_dir."""


class TrainDirLock:
  """An exclusive flock on --train_dir's lock file, for one run.

  Two runs writing checkpoints to one directory (a job resubmitted while its
  first instance still runs) would overwrite each other's. The holder writes
  its pid and host into the file, so the refused run can name it. The lock
  goes with the process: a run killed holding it leaves the file, but no
  lock, so the next run takes it. Where the file system has no flock (some
  network file systems) runs are not locked out.
  """

  def __init__(self, train_dir: str):
    os.makedirs(train_dir, exist_ok=True)
    self.path = os.path.join(train_dir, LOCK_FILE)
    # A file object: a lock never released by hand goes when it is freed.
    self._file = open(self.path, 'a+', encoding='utf-8')  # noqa: SIM115
    try:
      fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      self._file.seek(0)
      holder = self._file.read(200).strip() or 'unknown'
      self.release()
      raise TrainDirBusyError(
        '--train_dir=%s: in use by another run (%s, holding %s); wait for '
        'it to end or give another directory' % (train_dir, holder, self.path)
      ) from None
    except OSError:
      pass  # no locks on this file system
    self._file.truncate(0)
    self._file.write('pid %d on %s\n' % (os.getpid(), socket.gethostname()))
    self._file.flush()

  @property
  def meets_workers(self) -> bool:
    """Whether its saves meet every worker (worker_saves.SaveBarrier)."""
    return self._barrier is not None

  def release(self) -> None:
    """Releases the lock (closing the file); a second call does nothing."""
    if self._file is not None:
      self._file.close()
      self._file = None


def latest_checkpoint(train_dir: str | None) -> str | None:
  """Path prefix of the newest checkpoint in train_dir, or None; verified.

  None only when train_dir holds no checkpoint at all. A state file that
  cannot be read or names a checkpoint that is missing or damaged, or
  checkpoints without a state file, raise CheckpointError: starting from
  step 0 there would write over checkpoints the run did not resume from.
  """
  if not train_dir or not os.path.isdir(train_dir):
    return None
  state_file = os.path.join(train_dir, STATE_FILE)
  if not os.path.exists(state_file):
    found = existing_checkpoints(train_dir)
    if found:
      raise CheckpointError(
        '%s: missing, but %s holds %d checkpoint(s) (%s); restore the state '
        'file or move them away'
        % (state_file, train_dir, len(found), found[-1])
      )
    return None
  try:
    state = tf.train.get_checkpoint_state(train_dir)
  except (tf.errors.OpError, ValueError, UnicodeDecodeError) as e:
    state = None
    why = str(e).splitlines()[0] if str(e) else type(e).__name__
  else:
    why = 'no model_checkpoint_path'
  if state is None or not state.model_checkpoint_path:
    raise CheckpointError(
      '%s: not a checkpoint state file (%s)' % (state_file, why)
    )
  path = state.model_checkpoint_path
  if not os.path.isabs(path):
    path = os.path.join(train_dir, path)
  verify(path, state_file)
  return path


def existing_checkpoints(train_dir: str) -> list:
  """Path prefixes of the checkpoints (`.index` files) in train_dir, by step."""
  prefixes = [
    os.path.join(train_dir, name[: -len('.index')])
    for name in os.listdir(train_dir)
    if name.startswith(CHECKPOINT_BASENAME + '-') and name.endswith('.index')
  ]
  # PREFIX-STEP only: the Saver deletes what it is given (not model.ckpt-best).
  prefixes = [p for p in prefixes if _step_or_minus_one(p) >= 0]
  return sorted(prefixes, key=_step_or_minus_one)


def _step_or_minus_one(path: str) -> int:
  try:
    return int(path.rsplit('-', 1)[1])
  except (IndexError, ValueError):
    return -1


def verify(path: str, named_by: str) -> None:
  """Reads every tensor of checkpoint `path` (checksums included).

  Catches a missing, truncated or corrupted `.index` or `.data-*` file
  before the run builds on it; named_by is the file that pointed to it.
  """
  if not os.path.exists(path + '.index'):
    raise CheckpointError(
      '%s: names checkpoint %s, whose %s.index does not exist'
      % (named_by, path, os.path.basename(path))
    )
  try:
    reader = tf.train.load_checkpoint(path)
    for name in reader.get_variable_to_shape_map():
      reader.get_tensor(name)
  # The reader raises IndexError for a short read, DataLossError for a bad
  # checksum, NotFoundError for a missing file.
  except (tf.errors.OpError, ValueError, IndexError) as e:
    raise CheckpointError(
      '%s (named by %s): damaged or incomplete checkpoint (%s)'
      % (path, named_by, str(e).splitlines()[0][:200])
    ) from None


def step_of(checkpoint_path: str) -> int:
  """The global step a checkpoint was saved at (from its name)."""
  try:
    return int(checkpoint_path.rsplit('-', 1)[1])
  except (IndexError, ValueError):
    raise CheckpointError(
      '%s: not a checkpoint written by this benchmark '
      '(expected %s-STEP)' % (checkpoint_path, CHECKPOINT_BASENAME)
    ) from None


class Restorable(dict):
  """{checkpoint name: variable} a Saver restores, and `aliased`.

  aliased: {name: (stored name, variable)} of the variables the checkpoint
  holds under another mode's name (see hybrid.checkpoint_fallback_name);
  not in the dict itself, where a stored name can already be taken.
  """

  def __init__(self):
    super().__init__()
    self.aliased = {}


def restorable(
  checkpoint_path: str, variables: dict, required: frozenset = frozenset()
) -> Restorable:
  """The entries of `variables` the checkpoint holds, shapes checked.

  A variable the checkpoint lacks (e.g. a loss scale when the checkpoint
  came from a float32 run, or momentum slots after plain sgd) is left to its
  initialiser; one of the `required` names (the model's weights) is an error.
  One it holds under another mode's name goes to `aliased` (see Restorable).
  """
  try:
    reader = tf.train.load_checkpoint(checkpoint_path)
    stored = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
  except (tf.errors.OpError, ValueError) as e:
    raise CheckpointError(
      '%s: cannot read checkpoint (%s)'
      % (checkpoint_path, str(e).splitlines()[0])
    ) from None
  out = Restorable()
  for name, var in variables.items():
    stored_name = name
    if name not in stored:
      stored_name = hybrid.checkpoint_fallback_name(name)
      if stored_name not in stored:
        continue
    want = var.shape.as_list()
    if list(stored[stored_name]) != want:
      raise CheckpointError(
        '%s: variable %s has shape %s in the checkpoint, the model has %s '
        '(another model or dataset?)'
        % (checkpoint_path, stored_name, list(stored[stored_name]), want)
      )
    if dtypes[stored_name] != var.dtype.base_dtype:
      # e.g. written with --use_fp16 --fp16_vars and resumed without them.
      raise CheckpointError(
        '%s: variable %s is %s in the checkpoint, the model makes it %s '
        '(resume with the same --use_fp16/--fp16_vars)'
        % (
          checkpoint_path,
          stored_name,
          dtypes[stored_name].name,
          var.dtype.base_dtype.name,
        )
      )
    if stored_name == name:
      out[name] = var
    else:
      out.aliased[name] = (stored_name, var)
  missing = sorted(n for n in required if n not in stored)
  if missing:
    raise CheckpointError(
      '%s: holds no value for %s%s (a checkpoint of another model or '
      'dataset?)'
      % (
        checkpoint_path,
        ', '.join(missing[:3]),
        ' and %d more' % (len(missing) - 3) if len(missing) > 3 else '',
      )
    )
  return out


def model_names(variables) -> frozenset:
  """Checkpoint names of a tower's model variables (replica prefix dropped)."""
  return frozenset(naming.strip_replica_prefix(v.op.name) for v in variables)


@dataclasses.dataclass(frozen=True)
class SavePolicy:
  """When to write checkpoints: every N steps and/or every N seconds."""

  every_n_steps: int | None = None
  every_n_secs: float = 0.0

  def due(self, steps_since: int, secs_since: float) -> bool:
    """Whether a checkpoint is due, given what passed since the last one."""
    if self.every_n_steps and steps_since >= self.every_n_steps:
      return True
    return bool(self.every_n_secs) and secs_since >= self.every_n_secs


class Checkpointer:
  """Saves to and restores from one train_dir, in one graph.

  Build it in the graph (it makes the Saver ops); `writes` is False on the
  processes of a cluster that do not save (every worker but the chief).
  """

  def __init__(
    self,
    train_dir: str,
    variables: dict,
    global_step,
    *,
    restore_from: str | None,
    restore_variables: dict,
    max_to_keep: int,
    policy: SavePolicy,
    writes: bool,
    barrier=None,
  ):
    self.train_dir = train_dir
    self.policy = policy
    self.writes = writes
    # worker_saves.SaveBarrier: the final and step-counted saves of a
    # cluster whose workers keep state of their own meet every worker.
    self._barrier = barrier
    # Steps since the last met save (counted alike on every worker).
    self._lockstep_steps = 0
    # Held from before the first save to the end of the run (release()).
    self._lock = TrainDirLock(train_dir) if writes else None
    self.restore_from = restore_from
    self._global_step = global_step
    self._saver = tf1.train.Saver(
      variables, max_to_keep=max_to_keep, save_relative_paths=True
    )
    if writes and os.path.isdir(train_dir):
      # A new Saver counts only what it writes: without this, every resume
      # kept max_to_keep more checkpoints.
      checkpoint_cleanup.clean(train_dir, max_to_keep, *_CLEANUP_NAMES)
      self._saver.recover_last_checkpoints(existing_checkpoints(train_dir))
    aliased = getattr(restore_variables, 'aliased', {}).values()
    # One Saver per aliased value: its stored name may be restored into
    # another variable by the main Saver too.
    self._restorers = (
      ([tf1.train.Saver(restore_variables)] if restore_variables else [])
      + [tf1.train.Saver({stored: var}) for stored, var in aliased]
      if restore_from
      else []
    )
    self.restored_variables = (
      tuple(restore_variables.values()) + tuple(var for _, var in aliased)
      if restore_from
      else ()
    )
    # Copies of state a Saver cannot read (the staging buffers of
    # --staged_vars) into the variables it saves.
    self._before_save = tf1.get_collection(staged.BEFORE_SAVE_COLLECTION)
    self._steps_since = 0
    self._last_time = time.monotonic()
    # The newest checkpoint of this run's values: restored or written.
    self.last_path = restore_from
    self._last_step = step_of(restore_from) if restore_from else None
    self._last_met = True  # a restored checkpoint is not written again

  @property
  def meets_workers(self) -> bool:
    """Whether its saves meet every worker (worker_saves.SaveBarrier)."""
    return self._barrier is not None

  def release(self) -> None:
    """Ends the run's hold on --train_dir (TrainDirLock)."""
    if self._lock is not None:
      self._lock.release()

  def restore(self, sess) -> None:
    """Loads the checkpoint's values (call after initialising the rest)."""
    for restorer in self._restorers:
      restorer.restore(sess, self.restore_from)
    self._last_time = time.monotonic()

  def save(self, sess, *, met: bool = False) -> str | None:
    """Writes a checkpoint of the current values, named by the global step.

    Returns its path; None in a process that does not write, or when the
    checkpoint of this step exists already (a periodic save just before the
    final one; `last_path` names it). A failed write (a full disk) raises
    outputs.OutputWriteError naming the checkpoint.
    met: every worker calls it at this point (the final save, the
    step-counted ones): with a barrier, the workers meet around it, so the
    other workers' own state is saved as of this step (and saved again if
    an unmet save took this step).
    """
    if met and self._barrier is not None:
      self._lockstep_steps = 0
      with self._barrier.around(sess):
        return self._save(sess, met=True)
    return self._save(sess)

  def _save(self, sess, met: bool = False) -> str | None:
    self._steps_since, self._last_time = 0, time.monotonic()
    if not self.writes:
      return None
    step = int(sess.run(self._global_step))
    # A met save takes again a step an unmet one took (its other workers'
    # state was read while they ran).
    if step == self._last_step and (self._last_met or not met):
      return None
    prefix = os.path.join(self.train_dir, CHECKPOINT_BASENAME)
    try:
      os.makedirs(self.train_dir, exist_ok=True)
      if self._before_save:
        sess.run(self._before_save)
      self.last_path = self._saver.save(
        sess, prefix, global_step=step, write_meta_graph=False
      )
    except WRITE_ERRORS as e:  # a full disk: one line, not a traceback
      raise outputs.write_failure(
        'checkpoint', '%s-%d' % (prefix, step), e
      ) from None
    self._last_step, self._last_met = step, met
    return self.last_path

  def step_done(self, sess) -> str | None:
    """Counts a step; saves if the policy says a checkpoint is due.

    With a barrier, the step-counted saves are counted on every worker
    alike (the chief's other saves do not reset the count) and met; the
    timed ones are the chief's alone.
    """
    self._steps_since += 1
    if self._barrier is not None:
      self._lockstep_steps += 1
      every = self.policy.every_n_steps
      if every and self._lockstep_steps >= every:
        return self.save(sess, met=True)
      if not self.policy.every_n_secs:
        return None
      return self._timed_save(sess)
    if self.policy.due(self._steps_since, time.monotonic() - self._last_time):
      return self.save(sess)
    return None

  def _timed_save(self, sess) -> str | None:
    """The --save_model_secs save, if due."""
    if time.monotonic() - self._last_time >= self.policy.every_n_secs:
      return self.save(sess)
    return None
