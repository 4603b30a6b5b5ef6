"""What a sweep shows while a point runs: elapsed time and its step count.

Part of scripts/sweep.py. On a terminal a tqdm progress bar (steps done of
the point's --num_batches when the grid sets it); elsewhere (a log file, a
pipe, CI) a plain line every --progress_every seconds:

  [k/n] POINT_ID ... running 30s, step 120/500

The step count is read from the point's log: the step table's rows (a
number, then a tab) that the benchmark prints every --display_every steps;
the launcher's '[worker:0] ' prefix is allowed.
"""

import os
import re
import sys

from tf_cnn_benchmarks.reporting import timing

format_duration = timing.format_duration
format_eta = timing.format_eta

STEP_ROW_RE = re.compile(r'^(?:\[[^\]]+\] )?(\d+)\t')


class LogSteps(object):
  """The last step number a log's table rows show, read as the log grows."""

  def __init__(self, path):
    self.path = path
    self.offset = 0
    self.partial = ''
    self.step = None

  def read(self):
    """Reads what the log gained; returns the last step seen (or None)."""
    try:
      with open(self.path, errors='replace') as f:
        f.seek(self.offset)
        text = f.read()
        self.offset = f.tell()
    except OSError:
      return self.step
    lines = (self.partial + text).split('\n')
    self.partial = lines.pop()  # an unfinished line: kept for the next read
    for line in lines:
      match = STEP_ROW_RE.match(line)
      if match:
        self.step = int(match.group(1))
    return self.step


def total_steps(point):
  """The point's --num_batches when its flags set one, else None."""
  for name, value in point.flags:
    if name == 'num_batches' and value.isdigit():
      return int(value)
  return None


def _tqdm_class():
  """tqdm's bar, or None when tqdm is not installed (plain lines then)."""
  try:
    # Optional, and only on a terminal: sweep starts without loading it.
    from tqdm import tqdm  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  return tqdm


class PointProgress(object):
  """The live display of one running point; tick() it, close() it after.

  stream: where it goes (stdout); a bar when stream is a terminal and tqdm
  is there, plain lines every `plain_every` seconds otherwise.
  """

  def __init__(self, label, point, log_path, plain_every, stream=None):
    self.label = label
    self.stream = stream or sys.stdout
    self.total = total_steps(point)
    self.steps = LogSteps(log_path)
    self.plain_every = plain_every
    self.next_plain = plain_every
    self.bar = None
    bar_class = _tqdm_class() if _is_terminal(self.stream) else None
    if bar_class is not None:
      self.bar = bar_class(
        total=self.total,
        desc=label,
        unit='step',
        file=self.stream,
        leave=False,
        dynamic_ncols=True,
        mininterval=0,  # tick() already comes every TICK_SECONDS
        miniters=1,
      )

  def tick(self, elapsed):
    """Shows the point's state `elapsed` seconds after it started."""
    step = self.steps.read()
    if self.bar is not None:
      if step is not None and step > self.bar.n:
        self.bar.update(step - self.bar.n)
      else:
        self.bar.refresh()
      return
    if self.plain_every and elapsed >= self.next_plain:
      self.next_plain = elapsed + self.plain_every
      self.stream.write(
        '%s ... running %s, %s\n'
        % (self.label, format_duration(elapsed), self.step_text(step))
      )
      self.stream.flush()

  def step_text(self, step):
    """'step 120/500', 'step 120' (no --num_batches) or 'no step yet'."""
    if step is None:
      return 'no step yet'
    if self.total:
      return 'step %d/%d' % (step, self.total)
    return 'step %d' % step

  def close(self):
    """Removes the bar (the point's result line follows)."""
    if self.bar is not None:
      self.bar.close()


def _is_terminal(stream):
  try:
    return stream.isatty() and os.environ.get('TERM') != 'dumb'
  except (AttributeError, ValueError):
    return False
