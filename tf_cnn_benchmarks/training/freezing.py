"""--freeze_when_forward_only: time a frozen inference graph (issue 14).

As the classic harness: with --forward_only, the graph is built, its
variables initialised in a scratch session, and every variable except the
global step becomes a constant holding its initial value
(tf.compat.v1.graph_util.convert_variables_to_constants); the timed session
runs the frozen graph, imported into a fresh tf.Graph. Grappler can then
fold and fuse the model's weights like any constant. The loss and logits are
those of the unfrozen graph.

Not with --train_dir (the frozen weights are the initial ones; classic
refused it too) nor in a cluster (one process only).
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

tf1 = tf.compat.v1

# BuiltGraph fields that hold tensors or ops the run fetches or runs.
_FETCHED_FIELDS = (
  'step_op',
  'loss',
  'report',
  'worker_loss',
  'learning_rate',
  'accuracy',
  'tower_inputs',
  'input_init',
)


def freeze(built, session_config=None):
  """The frozen version of a forward-only BuiltGraph (training/step_graph).

  Runs `built.init_ops` and `built.post_init_ops` in a scratch session,
  converts every variable but the global step to a constant, and imports
  the result into a new graph.

  Args:
    built: a step_graph.BuiltGraph of a forward-only run (no checkpointer,
      no summaries).
    session_config: the ConfigProto of the scratch session.

  Returns:
    A BuiltGraph of the same kind whose graph, tensors and ops are the
    frozen graph's; its init ops initialise the global step and start the
    input iterators.
  """
  fetched = {f: getattr(built, f) for f in _FETCHED_FIELDS}
  # Under the built graph, not the caller's context: a Python caller's
  # process executes eagerly by default (only the command line turns eager
  # off), and to_proto / the conversion are graph-mode operations.
  with built.graph.as_default():
    # The step's VariableDef, to rebuild the step variable in the new graph.
    proto = built.global_step.to_proto()
    graph_def = _constant_graph_def(built, fetched, proto, session_config)
  frozen = tf.Graph()
  with frozen.as_default():
    tf1.import_graph_def(graph_def, name='')
    global_step = tf1.Variable(
      variable_def=proto, use_resource=proto.is_resource
    )
    tf1.add_to_collection(tf1.GraphKeys.GLOBAL_VARIABLES, global_step)
    tf1.add_to_collection(tf1.GraphKeys.GLOBAL_STEP, global_step)

  def lookup(x):
    if x is None:
      return None
    if isinstance(x, tf.Tensor):
      return frozen.get_tensor_by_name(x.name)
    return frozen.get_operation_by_name(x.name)

  remapped = {f: tf.nest.map_structure(lookup, v) for f, v in fetched.items()}
  return dataclasses.replace(
    built,
    graph=frozen,
    init_ops=(global_step.initializer, *remapped['input_init']),
    shared_ready=None,
    post_init_ops=(),
    global_step=global_step,
    checkpointer=None,
    summary_op=None,
    tower_grads=(),
    **remapped,
  )


def _constant_graph_def(built, fetched, step_proto, session_config):
  """`built`'s graph with every variable but the step made a constant,
  keeping what the step fetches and the step variable's own ops."""
  outputs = {
    x.name.split(':')[0] for x in tf.nest.flatten(fetched) if x is not None
  }
  outputs.update(
    name.split(':')[0]
    for name in (step_proto.initializer_name, step_proto.snapshot_name)
    if name
  )
  with tf1.Session(graph=built.graph, config=session_config) as sess:
    sess.run(built.init_ops)
    if built.post_init_ops:
      sess.run(built.post_init_ops)
    return tf1.graph_util.convert_variables_to_constants(
      sess,
      built.graph.as_graph_def(add_shapes=True),
      sorted(outputs),
      variable_names_blacklist=[built.global_step.op.name],
    )
