"""The Model base class and its build result.

A model is a small description (name, dataset, input size, classic default
batch size and learning rate) plus a `body` that appends layers to a
`NetBuilder`. `build` adds the final linear classifier, so a family only
writes its trunk. A trunk with an auxiliary head returns the head's features
from `body` and `build` adds the auxiliary classifier.
"""

import dataclasses
from typing import Optional

import tensorflow as tf

from models import schedules
from models.builder import NetBuilder


@dataclasses.dataclass(frozen=True)
class ModelOutput:
  """What `Model.build` returns for one tower.

  Attributes:
    logits: [batch, num_classes] in the compute dtype.
    aux_logits: auxiliary-head logits of a trunk whose `body` returns head
      features, else None (no declared model's: the classic harness's
      inception3 and NASNets built no auxiliary head). The harness adds
      0.4 x their cross entropy to the loss.
    update_ops: this tower's batch-norm moving-average assign ops (never the
      global UPDATE_OPS collection).
  """

  logits: tf.Tensor
  aux_logits: Optional[tf.Tensor] = None
  update_ops: tuple = ()


class Model:
  """Base class: subclasses set the attributes and implement `body`.

  The registry calls a subclass as its row in models/declared.py says:
  these five arguments first, then the row's options as keywords (a subclass
  with options takes `*model_args` and passes them on).

  Attributes:
    name: registry name, e.g. 'resnet50_v1.5'.
    dataset: 'imagenet' or 'cifar10'.
    image_size: input height and width in pixels.
    default_batch_size: classic per-device default batch size.
    default_learning_rate: classic initial learning rate (for the ImageNet
      ResNets: the rate at a global batch of 256, before linear scaling).
  """

  def __init__(
    self,
    name: str,
    dataset: str,
    image_size: int,
    default_batch_size: int,
    default_learning_rate: float,
  ):
    self.name = name
    self.dataset = dataset
    self.image_size = image_size
    self.default_batch_size = default_batch_size
    self.default_learning_rate = default_learning_rate

  # Builder batch-norm defaults (`NetBuilder` keyword arguments
  # batch_norm_decay / batch_norm_epsilon / batch_norm_scale); a family
  # overrides them where the classic model used other settings.
  batch_norm_config = {}

  # Whether the L2 term (--weight_decay) also covers the batch-norm gamma
  # and beta. The classic harness left out variables whose name contained
  # 'batchnorm', which caught its own builder's and none of a model named
  # otherwise (the official_resnet* names: 'batch_normalization').
  l2_decays_batch_norm = False

  def __repr__(self):
    return '%s(name=%r, dataset=%r)' % (
      type(self).__name__,
      self.name,
      self.dataset,
    )

  def classifier_init(self):
    """The classifier's initial weights: None, the builder's affine default
    (the classic harness's own final layer); a model the classic harness
    took from elsewhere returns what that model's layer drew."""
    return None

  def body(self, net: NetBuilder) -> Optional[tf.Tensor]:
    """Appends the trunk (everything but the classifier) to `net`.

    Returns None, or the [batch, features] input of an auxiliary
    classifier (which `build` then adds).
    """
    raise NotImplementedError

  def build(
    self,
    images,
    num_classes,
    *,
    is_training=True,
    data_format='NHWC',
    compute_dtype=tf.float32,
    seed=1234,
  ) -> ModelOutput:
    """Builds the forward pass for one tower in the current graph/scope.

    Args:
      images: float32 [B, H, W, 3] (NHWC) or [B, 3, H, W] (NCHW) tensor.
      num_classes: width of the logits.
      is_training: batch statistics + dropout (True) or inference.
      data_format: layout of `images` and of every activation.
      compute_dtype: tf.float32, tf.float16 or tf.bfloat16; variables stay
        float32.
      seed: fixes every initial value together with the variable names.

    Returns:
      ModelOutput with logits (and auxiliary logits, if the trunk has an
      auxiliary head) in `compute_dtype` and this tower's batch-norm
      update ops.
    """
    net = NetBuilder(
      images,
      is_training=is_training,
      data_format=data_format,
      compute_dtype=compute_dtype,
      seed=seed,
      **self.batch_norm_config,
    )
    aux_features = self.body(net)
    logits = net.affine(
      num_classes, activation=None, kernel_init=self.classifier_init()
    )
    aux_logits = None
    if aux_features is not None:
      # Small initial weights, as the classic auxiliary classifiers had.
      aux_logits = net.affine(
        num_classes, activation=None, stddev=0.001, input_layer=aux_features
      )
    return ModelOutput(
      logits=logits, aux_logits=aux_logits, update_ops=tuple(net.update_ops)
    )

  # A step schedule as data, (epochs, values): values[0] until the first
  # epoch of `epochs`, values[i] after the i-th (`schedules.epoch_steps`).
  # None: the constant default_learning_rate.
  epoch_schedule: Optional[tuple] = None

  def learning_rate(self, global_step, global_batch_size, examples_per_epoch):
    """The model's default schedule: a float, or a scalar float32 tensor.

    The base class (and the simple models) use a constant, or the steps of
    `epoch_schedule` where a family sets it.
    """
    if self.epoch_schedule is None:
      return float(self.default_learning_rate)
    epochs, values = self.epoch_schedule
    return schedules.epoch_steps(
      global_step, examples_per_epoch, global_batch_size, epochs, values
    )

  def learning_rate_warmup(self, global_batch_size, examples_per_epoch):
    """The linear warm-up that opens `learning_rate`, or None (the default).

    (steps, peak): the rate is peak * step / steps before global step
    `steps`. Named apart so --minimum_learning_rate, which floors the
    schedule, leaves the ramp as it is (the classic harness never floored
    a model's schedule).
    """
    del global_batch_size, examples_per_epoch
    return None


class PlainConvNet(Model):
  """A trunk of convolutions and max pools, then fully connected layers
  (AlexNet, OverFeat, VGG): the layers are data, the building is here.

  Attributes:
    features: the layers before the flatten, in order; each is
      ('conv', filters, kernel_size[, strides[, padding]]) or
      ('pool', pool_size, strides), passed to NetBuilder.conv / max_pool.
    hidden: widths of the fully connected ReLU layers after the flatten.
    dropout: the rate of a dropout after each hidden layer; None: none.
  """

  features: tuple = ()
  hidden: tuple = ()
  dropout: Optional[float] = None

  def body(self, net):
    for kind, *args in self.features:
      (net.conv if kind == 'conv' else net.max_pool)(*args)
    net.flatten()
    for width in self.hidden:
      net.affine(width)
      if self.dropout is not None:
        net.dropout(self.dropout)
