"""The contract between the benchmark driver and a variable manager.

A manager decides, for one data-parallel strategy:
  * where each tower's variables live and under which names (`tower_scope`);
  * how the towers' gradients are reduced (`reduce_gradients`) and applied
    (`build_train_op`);
  * what this process initialises (`init_ops`) and which variables another
    process initialises (`shared_variables`, in a cluster);
  * what runs once after initialisation (`post_init_ops`, e.g. the v0 copy);
  * which variables a checkpoint holds, under mode-independent names
    (`savable_variables`).
The driver only calls these methods; anything that differs between strategies
belongs here, not in the driver.

Also here, shared by local.py and the cluster managers: PerTowerCopies (the
base of the managers with a copy per tower), tower_copies (every tower's copy
of a variable, by relative name; see naming.py) and ClusterDevices.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Callable, ClassVar, Iterator, Sequence

import tensorflow as tf

from variable_mgr import naming
from variable_mgr.traits import Traits

tf1 = tf.compat.v1

GradsAndVars = list  # list[tuple[tf.Tensor, tf.Variable]]


@dataclasses.dataclass(frozen=True)
class Reduction:
  """What a manager's gradient reduction produced.

  sites: (device, grads_and_vars) pairs; each is applied by one optimizer on
    that device.
  side_ops: ops to run every step beside the updates (e.g. storing this
    step's reduced gradients for the next step in relaxed mode).
  consistent: True if the updates must wait for every gradient of the step
    (strong consistency); False lets them overlap the step's computation.
  """

  sites: list
  side_ops: tuple = ()
  consistent: bool = True


@dataclasses.dataclass(frozen=True)
class StepUpdate:
  """What build_train_op needs besides the towers' gradients.

  make_optimizer: returns a new optimizer (one per apply site);
    make_optimizer(learning_rate=T) one that reads its rate from T.
  global_step: moved once per applied step.
  clip_norm: a float (clip the global norm), a function of grads_and_vars
    (e.g. a per-element clip), or None.
  loss_scale: a loss_scale.LossScale (the towers differentiated the scaled
    loss; with an automatic one, a step whose reduced gradients hold
    inf/nan updates nothing on any replica), or None.
  loss: this process's mean tower loss (or a float32 vector of such
    per-worker means: [loss, top-1, top-5]); a cluster manager sets
    `cluster_loss` from it (the mean over every worker's towers, of the
    same shape), riding on the step's own synchronisation. None: not wanted.
  learning_rate: the rate tensor make_optimizer's optimizers read, for a
    manager that applies on another task with a copy of it there; None
    (unknown): they read it where it is.
  """

  make_optimizer: Callable[..., tf1.train.Optimizer]
  global_step: tf.Variable
  clip_norm: float | Callable | None = None
  loss_scale: object = None
  loss: tf.Tensor | None = None
  learning_rate: tf.Tensor | None = None


class VariableMgr:
  """Base class of every variable manager.

  Subclasses set `name`, implement `tower_scope`, `variable_prefix` and
  `reduce_gradients`, and may override the other hooks.
  """

  name: ClassVar[str] = ''
  traits: ClassVar[Traits] = Traits()
  # The towers train one model from their averaged gradients (catalog's
  # shares_gradients; False: independent).
  shares_gradients: ClassVar[bool] = True
  # Constructor keyword -> the settings.ManagerSettings field it takes, for
  # the settings a manager reads besides use_resource_vars (from_settings).
  settings_fields: ClassVar[dict] = {}
  # Set by build_train_op where the manager knows it: a function building
  # the global norm of the (reduced, unscaled, clipped) gradient the first
  # apply site applies. A function, so that its ops (an L2 loss per
  # gradient) are made only by runs that fetch it (the gradient_norm
  # summary): unfetched ops still cost start-up time.
  applied_gradient_norm: Callable[[], tf.Tensor | None] | None = None
  # Set by build_train_op in a cluster where the step synchronises the
  # workers: the step's loss over every tower of every worker (on the
  # process that writes the results line, at least). None: this process's
  # own loss is the run's (a local run, one graph, or async workers).
  cluster_loss: tf.Tensor | None = None

  def __init__(
    self,
    tower_devices: Sequence[str],
    *,
    cpu_device: str = '/cpu:0',
    use_resource_vars: bool = False,
    cluster=None,
  ):
    if not tower_devices:
      raise ValueError('a variable manager needs at least one tower device')
    self.tower_devices = tuple(tower_devices)
    self.cpu_device = cpu_device
    self.use_resource_vars = use_resource_vars
    self.cluster = cluster  # ClusterDevices, or None for a local run

  @classmethod
  def from_settings(
    cls, settings, tower_devices: Sequence[str], cluster=None
  ) -> 'VariableMgr':
    """Builds the manager from the run's settings.ManagerSettings.

    Passes use_resource_vars, the cluster and each of `settings_fields`.
    cluster: a ClusterDevices in a cluster run, else None.
    """
    return cls(
      tower_devices,
      use_resource_vars=settings.use_resource_vars,
      cluster=cluster,
      **{key: getattr(settings, f) for key, f in cls.settings_fields.items()},
    )

  # ---- where things live -------------------------------------------------

  @property
  def num_towers(self) -> int:
    return len(self.tower_devices)

  @property
  def global_step_device(self) -> str:
    """Device of the global step variable."""
    return self.cpu_device

  def describe(self) -> str:
    """One line for the console header ("Variables:")."""
    return self.name

  def all_reduce_description(self) -> str | None:
    """The all-reduce in use, for the header and results (None if none)."""
    return None

  def variable_prefix(self, index: int) -> str:
    """Name prefix (with trailing '/') of the variables tower `index` uses."""
    raise NotImplementedError

  def tower_scope(self, index: int) -> contextlib.AbstractContextManager:
    """Context in which tower `index` builds its model (variables and ops)."""
    raise NotImplementedError

  def prepare_towers(self, build_forward: Callable[[], None]) -> None:
    """Called once per graph before any tower is built.

    build_forward() builds one tower's forward pass on stand-in inputs; a
    manager that must know every variable before a tower reads one (to read
    them all in one transfer) calls it in a scope of its own, where it
    creates the variables. Its ops are never run. By default it is not
    called.
    """
    del build_forward

  def tower_trainable_variables(self, index: int) -> list:
    """The trainable variables tower `index` computes gradients for."""
    prefix = self.variable_prefix(index)
    return [
      v for v in tf1.trainable_variables() if v.op.name.startswith(prefix)
    ]

  def tower_weights(self, index: int, variables: Sequence) -> list:
    """What tower `index` read of each of `variables`.

    The tower takes its L2 term and its gradients of these; a manager whose
    towers read copies of the variables (see prepare_towers) returns the
    copies. By default: the variables themselves.
    """
    del index
    return list(variables)

  # ---- from gradients to updates ----------------------------------------

  def reduce_gradients(self, tower_grads: Sequence[GradsAndVars]) -> Reduction:
    """Turns every tower's (gradient, variable) list into apply sites.

    Gradients are the MEAN over towers in every mode that shares variables.
    """
    raise NotImplementedError

  def build_train_op(
    self, tower_grads: Sequence[GradsAndVars], step_update: StepUpdate
  ) -> tf.Operation:
    """Reduces, (unscales, checks,) clips and applies the gradients."""
    # One process: its loss (step_update.loss) is the run's.
    reduction = self.reduce_gradients(tower_grads)
    clip_norm, loss_scale = step_update.clip_norm, step_update.loss_scale

    def apply(sites):
      return self.apply_sites(
        sites, step_update.make_optimizer, step_update.global_step, clip_norm
      )

    # Updates run in place on the variables' buffers: without this barrier an
    # update could land while another op of the same step (the backprop of an
    # earlier layer) still reads the old value, and the step would mix both.
    barrier = (
      [g for grads in tower_grads for g, _ in grads]
      if reduction.consistent
      else []
    )
    with tf.control_dependencies(all_done(barrier, 'gradients_ready')):
      self.applied_gradient_norm = functools.partial(
        applied_norm,
        reduction.sites[0][1],
        self.cpu_device,
        loss_scale,
        clip_norm,
      )
      if loss_scale is None:
        update = tf.group(*apply(reduction.sites))
      else:
        update = loss_scale.guarded_update(reduction.sites, apply)
    return tf.group(update, *reduction.side_ops, name='train_op')

  def apply_sites(
    self,
    sites,
    make_optimizer: Callable[[], tf1.train.Optimizer],
    global_step: tf.Variable,
    clip_norm: float | None = None,
  ) -> list:
    """One optimizer per apply site; the first also moves global_step."""
    updates = []
    for k, (device, grads_and_vars) in enumerate(sites):
      if clip_norm is not None:
        grads_and_vars = clip_by_global_norm(grads_and_vars, clip_norm)
      with tf.device(device), self._apply_name_scope(k):
        updates.append(
          make_optimizer().apply_gradients(
            grads_and_vars, global_step=global_step if k == 0 else None
          )
        )
    return updates

  def _apply_name_scope(self, site: int) -> contextlib.AbstractContextManager:
    """Name scope for the optimizer of apply site `site`.

    Optimizer-owned variables (e.g. Adam's beta powers) are created in this
    scope, so per-replica optimizers get per-replica names.
    """
    del site
    return contextlib.nullcontext()

  def stat_update_ops(self, tower_update_ops: Sequence[Sequence]) -> list:
    """Which towers' batch-norm statistic updates to run (default: all)."""
    return [op for ops in tower_update_ops for op in ops]

  # ---- initialisation and checkpoints -----------------------------------

  def initialized_variables(self) -> list:
    """Global variables this process initialises (default: every one).

    In a cluster, variables that other workers share are initialised by the
    chief only; the others wait for them (`shared_variables`). A resumed run
    loads these from the checkpoint instead, where it holds them.
    """
    return tf1.global_variables()

  def shared_variables(self) -> list:
    """Variables another process initialises; wait for them before use."""
    return []

  def post_init_ops(self) -> list:
    """Ops to run once after variable initialisation (default: none)."""
    return []

  def weight_decay_share(self, index: int) -> float:
    """How many towers' L2 terms tower `index` adds to its loss.

    Towers that average their gradients hold the same weights, so one of
    them (the last, as the classic harness chose) adds the term for all N:
    N x its gradient on one tower and none on the others average to the
    same weight decay, and the step computes one L2 term instead of N.
    """
    if not self.shares_gradients:
      return 1.0
    return float(self.num_towers) if index == self.num_towers - 1 else 0.0

  def overwritten_after_init(self, index: int) -> bool:
    """Whether post_init_ops overwrite every variable of tower `index`.

    Such a tower's variables need no initial values of their own (the
    driver builds them at zeros, saving graph ops and start-up time).
    """
    del index
    return False

  def savable_variables(self) -> dict:
    """Variables a checkpoint holds, keyed by mode-independent names.

    Tower 0's copy stands for every tower's (its prefix stripped); state
    outside any tower's scope (global step, loss scale, optimizer state
    created outside the towers) keeps its own name. Other towers' copies are
    not saved: post_init_ops makes them equal to tower 0's.
    """
    saved_prefix = self.variable_prefix(0)
    saved = {}
    for v in tf1.global_variables():
      name = naming.checkpoint_name(v.op.name, saved_prefix)
      if name is not None:
        add_savable(saved, name, v)
    return saved


class PerTowerCopies(VariableMgr):
  """Base of the managers that keep one copy of the variables per tower.

  Tower i builds its model under 'vI/' (see naming) on its own device; an
  apply site k is tower k's copy, so its optimizer's own variables get
  tower k's prefix too.
  """

  def variable_prefix(self, index: int) -> str:
    return naming.tower_prefix(index)

  def tower_scope(self, index: int):
    return replica_scope(
      naming.tower_scope_name(index),
      self.tower_devices[index],
      use_resource=self.use_resource_vars,
    )

  def _apply_name_scope(self, site: int):
    return tf1.name_scope(self.variable_prefix(site))


def add_savable(saved: dict, name: str, variable) -> None:
  """saved[name] = variable; two variables under one name is an error.

  Two variables mapping to one checkpoint name (e.g. the beta powers of two
  optimizers) would save only one of them, and a resume would restart the
  other silently.
  """
  if name in saved and saved[name] is not variable:
    raise ValueError(
      'checkpoint name %r would hold both %s and %s'
      % (name, saved[name].op.name, variable.op.name)
    )
  saved[name] = variable


def shared_copy_variables() -> dict:
  """The shared copies 'v/NAME' (and their optimizer slots), keyed NAME."""
  saved = {}
  for v in tf1.global_variables():
    relative = naming.relative_name(v.op.name, naming.SHARED_PREFIX)
    if relative is not None:
      saved[relative] = v
  return saved


def tower_copies(variables, num_towers: int) -> dict:
  """Every tower's copy of each variable tower 0 has, by relative name.

  Returns {relative name: [tower 0's copy, tower 1's copy, ...]}, sorted by
  name (every worker lists them in the same order); a tower without a copy
  of that name has None in its place.
  """
  by_name = {v.op.name: v for v in variables}
  copies = {}
  for name in sorted(by_name):
    relative = naming.relative_name(name, naming.tower_prefix(0))
    if relative is not None:
      copies[relative] = [
        by_name.get(naming.tower_name(i, relative)) for i in range(num_towers)
      ]
  return copies


@dataclasses.dataclass(frozen=True)
class ClusterDevices:
  """What a manager needs to know about a cluster (plain values).

  ps_devices: '/job:ps/replica:0/task:k/device:CPU:0' per ps task.
  worker_devices: '/job:worker/replica:0/task:w' per worker.
  task_index: this worker's index (0 on a controller).
  is_chief: whether this process initialises shared state.
  cross_replica_sync: whether the workers' gradients of a step are averaged.
  pack_transfers: whether tensors for (or from) a ps task travel packed (see
    transfers.packed_transfer).
  """

  ps_devices: tuple
  worker_devices: tuple
  task_index: int
  is_chief: bool
  cross_replica_sync: bool = True
  pack_transfers: bool = True

  @property
  def num_workers(self) -> int:
    return len(self.worker_devices)

  @property
  def worker_device(self) -> str:
    return self.worker_devices[self.task_index]

  @property
  def worker_cpu_device(self) -> str:
    """The CPU of this worker (where its step-local state lives)."""
    return cpu_of_task(self.worker_device)


def cpu_of_task(task_device: str) -> str:
  """The first CPU of the task '/job:J/replica:R/task:K'."""
  return task_device + '/device:CPU:0'


def on_task(variable, task_prefix: str) -> bool:
  """Whether `variable` lives on the task whose device prefix is given."""
  spec = tf.DeviceSpec.from_string(variable.device)
  task = tf.DeviceSpec.from_string(task_prefix)
  return spec.job == task.job and (spec.task or 0) == (task.task or 0)


def clip_by_global_norm(
  grads_and_vars: GradsAndVars, clip_norm: float
) -> GradsAndVars:
  """Clips the gradients of one apply site to `clip_norm` global norm.

  clip_norm may instead be a function of the grads_and_vars returning the
  clipped ones (the driver's per-element --gradient_clip).
  """
  if callable(clip_norm):
    return clip_norm(grads_and_vars)
  grads = [g for g, _ in grads_and_vars]
  clipped, _ = tf.clip_by_global_norm(grads, clip_norm)
  return list(zip(clipped, [v for _, v in grads_and_vars]))


def applied_norm(grads_and_vars, device, loss_scale=None, clip_norm=None):
  """Global norm of `grads_and_vars` as applied: unscaled, then clipped.

  grads_and_vars: one apply site's reduced gradients, still multiplied by
    the loss scale if `loss_scale` is given. None if there are none.
  """
  grads = [tf.cast(g, tf.float32) for g, _ in grads_and_vars]
  if not grads:
    return None
  with tf.device(device):
    if callable(clip_norm):  # per-element clip: the norm of what it leaves
      if loss_scale is not None:
        inverse = 1.0 / loss_scale.step_value()
        grads = [g * inverse for g in grads]
      return tf.linalg.global_norm(
        [g for g, _ in clip_norm([(g, None) for g in grads])]
      )
    norm = tf.linalg.global_norm(grads)
    if loss_scale is not None:
      norm = norm / loss_scale.step_value()
    if clip_norm is not None:
      norm = tf.minimum(norm, clip_norm)
  return norm


def all_done(tensors: Sequence, name: str) -> list:
  """[one op that runs once all `tensors` (or ops) have], or [] if none.

  For `tf.control_dependencies`: given the tensors themselves, every op
  made inside gets one control edge per tensor (every tower's every
  gradient: towers x variables edges on each update), which graph
  optimisation and partitioning then work through at start-up; through
  this op each gets one.
  """
  return [tf.group(*tensors, name=name)] if tensors else []


def mean_of(tensors: Sequence[tf.Tensor]) -> tf.Tensor:
  """Mean of same-shaped tensors, summed in their own dtype."""
  if len(tensors) == 1:
    return tensors[0]
  total = tf.add_n(list(tensors))
  return total * tf.cast(1.0 / len(tensors), total.dtype)


@contextlib.contextmanager
def replica_scope(
  prefix: str, device, *, reuse: bool = False, use_resource: bool = False
) -> Iterator[None]:
  """Variable scope `prefix` + device for one tower's model."""
  with tf1.variable_scope(
    prefix,
    reuse=reuse,
    use_resource=use_resource,
    auxiliary_name_scope=not reuse,
  ):
    # tf1.device also takes a device function (parameter_server's placer).
    with tf1.device(device):
      yield
