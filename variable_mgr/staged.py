"""--staged_vars: parameter_server with the variables staged ahead of the step.

The classic harness (VariableMgrLocalFetchFromStagedPS with its
StagedVariableGetter, and the gradient staging of benchmark_cnn.py) put two
staging buffers between the parameter device and the towers:

  * each tower reads every trainable variable from a buffer on its device;
    each step stages the variables' current values into it for the next
    step, so the copy from the parameter device overlaps the step instead of
    starting it;
  * each tower's gradients go through a buffer too: a step applies the
    gradients the previous step computed.

Exactly what a step does here (step t, counted from 0; V_t: the variables
when step t starts; g(V): the gradient of the loss at V; the values are
staged before the step's update, which waits for them):

  * the forward pass (and the reported loss) of step t reads V_{t-1}
    (step 0 reads V_0, staged once after initialisation);
  * step t applies g of the forward pass of step t-1 (step 0 applies its
    own, staged twice so that the pipeline holds one step):
      V_1 = V_0 - lr g(V_0),  V_2 = V_1 - lr g(V_0),
      V_{t+1} = V_t - lr g(V_{t-2})  for t >= 2.
This is the classic pipeline with its race settled: there the update of a
step did not wait for the staging of the variables, so the staged values
were V_t or (partly) V_{t+1}, whichever ran first; here always V_t.

Not staged (read and updated directly, as parameter_server does): the
non-trainable variables (batch-norm statistics; the classic staged their
updates too, a step late), which training's forward pass does not read.

Buffers are tf.raw_ops.Stage / Unstage (TF 2.21 has no StagingArea class),
one per (tower, variable) and one per tower's gradients, on the tower's
device, named by shared_name. Only training runs stage (a forward-only graph
would read each buffer once); the flag checks refuse the rest.
"""

from __future__ import annotations

import contextlib

import tensorflow as tf

from variable_mgr import base
from variable_mgr import local
from variable_mgr import registry

tf1 = tf.compat.v1

SETTING = 'staged_vars'
# Ops a checkpoint runs just before it saves (training/checkpoints): they
# copy what the staging buffers hold into variables the checkpoint saves.
BEFORE_SAVE_COLLECTION = 'ops_before_checkpoint_save'
# Scope of those variables: per tower, the staged values, the held-back
# gradients and whether they were filled (a checkpoint of another mode,
# or one saved before the first step, has none: the pipeline starts anew).
STATE_SCOPE = 'staged_vars_state'


def _stage(values, shared_name: str):
  return tf.raw_ops.Stage(values=list(values), shared_name=shared_name)


def _unstage(like, shared_name: str) -> list:
  """The oldest entry of a buffer holding tensors shaped as `like`."""
  out = tf.raw_ops.Unstage(
    dtypes=[t.dtype.base_dtype for t in like], shared_name=shared_name
  )
  for t, model in zip(out, like):
    t.set_shape(model.shape)
  return list(out)


def _peek(like, shared_name: str) -> list:
  """The oldest entry of a buffer, left in it (it must hold one)."""
  out = tf.raw_ops.StagePeek(
    index=0,
    dtypes=[t.dtype.base_dtype for t in like],
    shared_name=shared_name,
  )
  return list(out)


def _state_variable(name: str, like) -> tf.Variable:
  """A saved, non-trainable variable shaped and typed as `like`."""
  return tf1.get_variable(
    name,
    initializer=tf.zeros(like.shape, like.dtype.base_dtype),
    trainable=False,
    use_resource=True,
    collections=[tf1.GraphKeys.GLOBAL_VARIABLES],
  )


class _TowerState:
  """The variables a checkpoint keeps one tower's pipeline in.

  values: {variable name: the value staged for the next step's read};
  gradients: the held-back gradients (the next step applies them);
  filled: whether they hold a pipeline (see STATE_SCOPE).
  """

  def __init__(self, index: int, staged: dict, grads, grad_names):
    with tf1.variable_scope('%s/tower_%d' % (STATE_SCOPE, index)):
      self.filled = tf1.get_variable(
        'filled',
        initializer=tf.constant(False),
        trainable=False,
        use_resource=True,
        collections=[tf1.GraphKeys.GLOBAL_VARIABLES],
      )
      self.values = {
        name: _state_variable('values/' + name, var)
        for name, (var, _) in staged.items()
      }
      self.gradients = [
        _state_variable('gradients/' + name, g)
        for g, name in zip(grads, grad_names)
      ]

  def save_op(self, staged: dict, buffer_name, device) -> tf.Tensor:
    """Copies the buffers into the variables (if the pipeline is full).

    device: the tower's, where its buffers are (a buffer is a resource of
    the device its Stage ran on).
    """
    gradients_buffer = buffer_name('gradients')
    like = list(self.gradients)
    with tf.device(device):
      size = tf.raw_ops.StageSize(
        dtypes=[g.dtype.base_dtype for g in like], shared_name=gradients_buffer
      )

    def copy():
      ops = [self.filled.assign(True)]
      for name, (var, _) in staged.items():
        with tf.device(device):
          (value,) = _peek([var], buffer_name(name))
        ops.append(self.values[name].assign(value))
      with tf.device(device):
        grads = _peek(like, gradients_buffer)
      for target, g in zip(self.gradients, grads):
        ops.append(target.assign(g))
      with tf.control_dependencies(ops):
        return tf.constant(True)

    def empty():
      with tf.control_dependencies([self.filled.assign(False)]):
        return tf.constant(False)

    return tf.cond(size > 0, copy, empty)


def _fresh_copy(var) -> tf.Tensor:
  """A copy of the variable's value that later in-place updates leave alone.

  Reading a ref variable on its own device gives its buffer, which the
  optimizer then updates in place; a staged value must not change.
  """
  return tf.raw_ops.DeepCopy(x=tf.convert_to_tensor(var))


@registry.register_setting_variant(SETTING)
class StagedParameterServer(local.ParameterServer):
  """parameter_server whose towers read staged (one-step-old) variables."""

  def __init__(self, tower_devices, **kwargs):
    super().__init__(tower_devices, **kwargs)
    # Per tower: variable name -> (variable, the staged value it reads).
    self._staged = [dict() for _ in self.tower_devices]
    self._building = None  # the tower whose scope is open
    self._state = None  # per tower: _TowerState (made by build_train_op)

  def describe(self) -> str:
    return super().describe() + ', staged ahead of each step'

  def _buffer_name(self, index: int, what: str) -> str:
    return 'staged_vars/tower_%d/%s' % (index, what)

  @contextlib.contextmanager
  def tower_scope(self, index: int):
    def staged_getter(getter, name, *args, **kwargs):
      var = getter(name, *args, **kwargs)
      if kwargs.get('trainable') is False:
        return var
      return self._staged_value(index, var)

    with super().tower_scope(index):
      with tf1.variable_scope(
        tf1.get_variable_scope(),
        custom_getter=staged_getter,
        auxiliary_name_scope=False,
      ):
        self._building = index
        try:
          yield
        finally:
          self._building = None

  def _staged_value(self, index: int, var) -> tf.Tensor:
    """Tower `index`'s read of `var`: the value staged by the last step."""
    name = var.op.name
    if name not in self._staged[index]:
      with tf1.device(self.tower_devices[index]):
        (value,) = _unstage([var], self._buffer_name(index, name))
      self._staged[index][name] = (var, value)
    return self._staged[index][name][1]

  def tower_trainable_variables(self, index: int) -> list:
    """While tower `index` builds: the staged values it differentiates.

    Its gradients are then those of the values the forward pass read (the
    classic trainable_variables_on_device did the same); anywhere else
    (checkpoints): the variables themselves.
    """
    variables = super().tower_trainable_variables(index)
    if self._building != index:
      return variables
    staged = self._staged[index]
    return [
      staged[v.op.name][1] if v.op.name in staged else v for v in variables
    ]

  def _stage_ops(self, restored: bool = False) -> list:
    """Ops staging every tower's variables' current values (one step).

    restored: the pipeline a checkpoint kept is staged instead, where it
    kept one (the values and the held-back gradients).
    """
    ops = []
    for index, staged in enumerate(self._staged):
      state = self._state[index] if restored and self._state else None
      for name, (var, _) in staged.items():
        with tf1.device(self.tower_devices[index]):
          value = _fresh_copy(var)
          if state is not None:
            value = tf.where(
              state.filled.read_value(), state.values[name].read_value(), value
            )
          ops.append(_stage([value], self._buffer_name(index, name)))
      if state is not None and state.gradients:
        ops.append(self._restage_gradients(index, state))
    return ops

  def _restage_gradients(self, index: int, state: _TowerState):
    """Puts the kept gradients back in tower `index`'s buffer, if kept."""
    name = self._buffer_name(index, 'gradients')
    with tf1.device(self.tower_devices[index]):
      return tf.cond(
        state.filled.read_value(),
        lambda: tf.group(
          _stage([g.read_value() for g in state.gradients], name)
        ),
        tf.no_op,
      )

  def post_init_ops(self):
    # Fills the pipeline: step 0 reads the initial values, or those a
    # restored checkpoint kept (and applies the gradients it kept).
    return super().post_init_ops() + self._stage_ops(restored=True)

  def _make_state(self, tower_grads) -> None:
    """The checkpoint's copy of every tower's pipeline (see _TowerState)."""
    self._state = []
    with tf.control_dependencies(None), tf.device(self.cpu_device):
      for index, grads_and_vars in enumerate(tower_grads):
        names = [self._variable_of(index, v).op.name for _, v in grads_and_vars]
        grads = [tf.convert_to_tensor(g) for g, _ in grads_and_vars]
        self._state.append(
          _TowerState(index, self._staged[index], grads, names)
        )
      for index, state in enumerate(self._state):
        tf1.add_to_collection(
          BEFORE_SAVE_COLLECTION,
          state.save_op(
            self._staged[index],
            lambda what, i=index: self._buffer_name(i, what),
            self.tower_devices[index],
          ),
        )

  def build_train_op(self, tower_grads, step_update: base.StepUpdate):
    self._make_state(tower_grads)
    variable_puts = self._stage_ops()
    held_back, gradient_puts = [], []
    for index, grads_and_vars in enumerate(tower_grads):
      grads, puts = self._one_step_late(index, [g for g, _ in grads_and_vars])
      gradient_puts += puts
      variables = [self._variable_of(index, v) for _, v in grads_and_vars]
      held_back.append(list(zip(grads, variables)))
    # The update waits for this step's reads of the variables (staged).
    with tf.control_dependencies(variable_puts):
      train_op = super().build_train_op(held_back, step_update)
    return tf.group(train_op, *gradient_puts, name='staged_train_op')

  def _variable_of(self, index: int, value):
    """The variable behind a staged value of tower `index`."""
    for var, staged in self._staged[index].values():
      if staged is value:
        return var
    return value  # not staged (read directly)

  def _one_step_late(self, index: int, grads) -> tuple:
    """(the gradients of the previous step, ops staging this step's).

    At the first step the buffer is empty: this step's gradients are staged
    twice, so it applies its own and the pipeline then holds one step.
    """
    name = self._buffer_name(index, 'gradients')
    grads = [tf.convert_to_tensor(g) for g in grads]
    with tf1.device(self.tower_devices[index]):
      size = tf.raw_ops.StageSize(
        dtypes=[g.dtype.base_dtype for g in grads], shared_name=name
      )
      with tf.control_dependencies([size]):
        put = _stage(grads, name)
        first = tf.cond(
          tf.equal(size, 0),
          lambda: tf.group(_stage(grads, name)),
          tf.no_op,
        )
      # After the puts: an Unstage waiting on an empty buffer would hold a
      # thread the puts may need.
      with tf.control_dependencies([put, first]):
        previous = _unstage(grads, name)
    return previous, [put, first]
