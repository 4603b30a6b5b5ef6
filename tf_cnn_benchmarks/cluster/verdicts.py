"""The chief's verdict after a scheduled evaluation: continue or stop.

With --stop_at_top_1_accuracy only the chief evaluates, yet every worker
must stop at the step where its evaluation reached the target (workers in
lockstep would otherwise wait for ever for a peer that stopped). Every task
knows the schedule (the run flags are fingerprinted), so at each scheduled
step the chief publishes (step, EVALUATING) before it evaluates and
(step, CONTINUE or STOP) after; the other workers wait for that verdict.

The verdict is one variable on the first flag keeper (the chief itself when
there is no ps task): a keeper serves until every client is done, so a
worker that is behind still reads the verdict after the chief has exited.
Steps only grow: a verdict for a later step than the one waited for means
the chief went on past it (it continued there).
"""

from __future__ import annotations

import time
from typing import Optional

import tensorflow as tf

from tf_cnn_benchmarks.cluster import spec as spec_lib

tf1 = tf.compat.v1

# States of the published verdict.
EVALUATING, CONTINUE, STOP = 0, 1, 2
# How long a worker waits for the chief to reach a scheduled step (it is
# training as fast as this worker), then for its evaluation to end (a full
# validation pass on a CPU may take that long). A dead chief is reported
# sooner by the watchdog.
REACH_WAIT_S = 300.0
EVAL_WAIT_S = 3600.0
POLL_S = 0.05


class Verdicts:
  """Publishes (chief) or waits for (other workers) the evaluation verdicts.

  Args:
    target: this task's server target.
    keeper: (job, index) of the task that holds the verdict variable.
    chief: (job, index) and address of the evaluating task, for messages.
  """

  def __init__(
    self,
    target: str,
    keeper: tuple,
    chief: tuple,
    chief_address: str,
    *,
    reach_wait_s: float = REACH_WAIT_S,
    eval_wait_s: float = EVAL_WAIT_S,
  ):
    self._target = target
    self._keeper = keeper
    self.chief_name = '%s:%d (%s)' % (chief[0], chief[1], chief_address)
    self._waits = (reach_wait_s, eval_wait_s)
    self._session: Optional[tf1.Session] = None

  def _open(self) -> None:
    """The graph and session, made at first use (no cost for other runs)."""
    if self._session is not None:
      return
    graph = tf.Graph()
    with graph.as_default():
      with tf.device(spec_lib.task_device(*self._keeper) + '/device:CPU:0'):
        verdict = tf1.Variable(
          tf.zeros([2], tf.int64),
          trainable=False,
          collections=[],
          use_resource=True,
          name='cluster_eval_verdict',
        )
      self._value = tf1.placeholder(tf.int64, [2])
      # Assigning a resource variable initialises it: no separate init op
      # that a late chief could run over a published verdict.
      self._publish = verdict.assign(self._value)
      self._ready = tf.raw_ops.VarIsInitializedOp(resource=verdict.handle)
      self._read = verdict.read_value()
    config = tf1.ConfigProto(device_filters=['/job:%s/task:%d' % self._keeper])
    config.operation_timeout_in_ms = 20000
    self._session = tf1.Session(self._target, graph=graph, config=config)

  def announce(self, step: int) -> None:
    """Chief: evaluating after scheduled step `step` (waiters wait longer)."""
    self._open()
    self._session.run(self._publish, {self._value: [step, EVALUATING]})

  def publish(self, step: int, stop: bool) -> None:
    """Chief: the verdict of the evaluation after scheduled step `step`."""
    self._open()
    self._session.run(
      self._publish, {self._value: [step, STOP if stop else CONTINUE]}
    )

  def _state(self, step: int) -> Optional[int]:
    """The state for `step` now: None (not reached), or a state."""
    if not self._session.run(self._ready):
      return None
    published, state = (int(v) for v in self._session.run(self._read))
    if published > step:
      return CONTINUE  # the chief went on past `step`
    return state if published == step else None

  def wait(self, step: int) -> bool:
    """Other workers: waits for the verdict of scheduled step `step`.

    Returns:
      True: the chief's evaluation reached the target, stop here.

    Raises:
      tf.errors.DeadlineExceededError: no verdict in time (one line naming
        the chief).
    """
    self._open()
    reach_s, eval_s = self._waits
    start = time.monotonic()
    deadline, evaluating = start + reach_s, False
    while True:
      state = self._state(step)
      if state in (CONTINUE, STOP):
        return state == STOP
      if state == EVALUATING and not evaluating:
        evaluating, deadline = True, time.monotonic() + eval_s
      if time.monotonic() > deadline:
        raise tf.errors.DeadlineExceededError(
          None,
          None,
          'no evaluation verdict from the chief %s for step %d within %gs '
          '(%s)'
          % (
            self.chief_name,
            step,
            eval_s if evaluating else reach_s,
            'its evaluation did not end'
            if evaluating
            else 'it did not reach that step',
          ),
        )
      time.sleep(POLL_S)
