"""Leftovers of killed saves in --train_dir, removed when the next run starts.

A run killed while TensorFlow saves leaves files nothing else removes:

  PREFIX-N.index.tempstateR, PREFIX-N.data-*.tempstateR: a checkpoint's
    files being written (renamed into place when complete);
  PREFIX-N_temp/: the directory a sharded save writes its parts in;
  checkpoint.tmpHEX: the state file being rewritten;
  PREFIX-N.index / .data-* the state file does not name: a checkpoint the
    state file had dropped before the kill deleted its files (the Saver then
    kept one checkpoint too many for good), or one whose save was cut off
    before the state file named it.

`clean` removes them, and trims the checkpoints the state file names to the
newest max_to_keep. It runs only in the process that writes checkpoints,
once it holds the directory's lock (checkpoints.TrainDirLock), so no other
run's save is in progress. It touches only names of the checkpoint prefix
(PREFIX-STEP...) and TensorFlow's temporary state files: every other file in
--train_dir (the lock, summaries, the user's own) stays.
"""

from __future__ import annotations

import json
import os
import re
import shutil

import tensorflow as tf

# TensorFlow's atomic write of the state file: NAME.tmp + uuid4().hex.
_STATE_TEMP = r'\.tmp[0-9a-f]{32}'
# This module's own rewrite of the state file.
_OWN_TEMP = '.cleanup-tmp'


def clean(
  train_dir: str, max_to_keep: int, prefix: str, state_file: str
) -> list:
  """Removes leftover and surplus checkpoint files; returns the names removed.

  prefix: the checkpoints' basename (checkpoints are PREFIX-STEP);
  state_file: the name of TensorFlow's state file in train_dir.
  """
  names = os.listdir(train_dir)
  step_file = re.compile(
    r'(%s-\d+)(\.index|\.data-\d{5}-of-\d{5}|\.meta)$' % re.escape(prefix)
  )
  leftover = re.compile(
    r'%s-\d+(\..*\.tempstate\d*|_temp(_[0-9a-f]+)?)$|%s(%s|%s)$'
    % (
      re.escape(prefix),
      re.escape(state_file),
      _STATE_TEMP,
      re.escape(_OWN_TEMP),
    )
  )
  removed = [n for n in names if leftover.match(n)]
  by_checkpoint = {}
  for name in names:
    match = step_file.match(name)
    if match:
      by_checkpoint.setdefault(match.group(1), []).append(name)
  kept = _kept_checkpoints(train_dir, state_file, max_to_keep, by_checkpoint)
  for checkpoint, files in by_checkpoint.items():
    if checkpoint not in kept:
      removed.extend(files)
  for name in sorted(removed):
    path = os.path.join(train_dir, name)
    if os.path.isdir(path) and not os.path.islink(path):
      shutil.rmtree(path, ignore_errors=True)
    else:
      _remove(path)
  return sorted(removed)


def _kept_checkpoints(
  train_dir: str, state_file: str, max_to_keep: int, by_checkpoint: dict
) -> set:
  """The checkpoint basenames to keep (the state file rewritten to match).

  Without a readable state file only the complete checkpoints (with their
  `.index`) are kept: what to resume from is then the resuming code's call
  (checkpoints.latest_checkpoint refuses such a directory).
  """
  state_path = os.path.join(train_dir, state_file)
  named = _state_file_checkpoints(train_dir, state_path)
  if named is None:
    return {c for c, files in by_checkpoint.items() if c + '.index' in files}
  latest, listed = named
  # The newest max_to_keep that exist, the one to resume from always.
  existing = [c for c in listed if c in by_checkpoint]
  existing.sort(key=lambda c: int(c.rsplit('-', 1)[1]))
  kept = set(existing[-max_to_keep:]) | {latest}
  if kept != set(listed):
    _rewrite_state(state_path, latest, [c for c in existing if c in kept])
  return kept


def _state_file_checkpoints(train_dir: str, state_path: str):
  """(latest, [every checkpoint listed]) as basenames, or None if unreadable.

  A state file naming a checkpoint outside train_dir is left alone (None).
  """
  if not os.path.isfile(state_path):
    return None
  try:
    state = tf.train.get_checkpoint_state(train_dir)
  except (tf.errors.OpError, ValueError, UnicodeDecodeError):
    return None
  if state is None or not state.model_checkpoint_path:
    return None
  paths = [state.model_checkpoint_path, *state.all_model_checkpoint_paths]
  here = os.path.realpath(train_dir)
  names = []
  for path in paths:
    full = path if os.path.isabs(path) else os.path.join(train_dir, path)
    if os.path.realpath(os.path.dirname(full)) != here:
      return None
    names.append(os.path.basename(full))
  return names[0], list(dict.fromkeys(names))


def _rewrite_state(state_path: str, latest: str, kept: list) -> None:
  """The state file naming `kept` (relative paths), replaced by rename."""
  if latest not in kept:
    kept = [*kept, latest]
  lines = ['model_checkpoint_path: %s' % json.dumps(latest)]
  lines += ['all_model_checkpoint_paths: %s' % json.dumps(c) for c in kept]
  temp = state_path + _OWN_TEMP
  try:
    with open(temp, 'w', encoding='utf-8') as f:
      f.write('\n'.join(lines) + '\n')
    os.replace(temp, state_path)
  except OSError:
    _remove(temp)  # the old state file stays: it names the kept ones too


def _remove(path: str) -> None:
  try:
    os.remove(path)
  except FileNotFoundError:
    pass
