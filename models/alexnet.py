"""AlexNet variants.

ImageNet: the classic harness's single-tower AlexNet (Krizhevsky et al. 2012
without LRN and without the two-GPU split): conv 11x11/4 (64) - pool -
conv 5x5 (192) - pool - conv 3x3 (384, 384, 256) - pool - fc 4096 - dropout -
fc 4096 - dropout. (torchvision's AlexNet, after "One weird trick",
arXiv:1404.5997, differs in the fourth conv: 256 instead of 384 filters.)
The 11x11/4 VALID convolution needs a 227x227 input to give the 6x6 final
map, hence image size 224 + 3.

CIFAR-10: the network of TF's cifar10 tutorial (Krizhevsky 2009): two 5x5
convolutions (64) with max pooling and LRN, then fc 384 and fc 192.
"""

from models import initializers
from models import schedules
from models.model import Model
from models.model import PlainConvNet


class AlexNet(PlainConvNet):
  """One-tower ImageNet AlexNet."""

  features = (
    ('conv', 64, 11, 4, 'VALID'),
    ('pool', 3, 2),
    ('conv', 192, 5),
    ('pool', 3, 2),
    ('conv', 384, 3),
    ('conv', 384, 3),
    ('conv', 256, 3),
    ('pool', 3, 2),
  )  # flattened: 256 x 6 x 6
  hidden = (4096, 4096)
  dropout = 0.5


class AlexNetCifar(Model):
  """The TF cifar10-tutorial network."""

  # LRN settings of the tutorial.
  _LRN = dict(depth_radius=4, bias=1.0, alpha=0.001 / 9.0, beta=0.75)

  def body(self, net):
    conv_init = initializers.truncated_normal(5e-2)
    net.conv(64, 5, kernel_init=conv_init)
    net.max_pool(3, 2, 'SAME')
    net.lrn(**self._LRN)
    net.conv(64, 5, kernel_init=conv_init, bias_init=0.1)
    net.lrn(**self._LRN)
    net.max_pool(3, 2, 'SAME')
    net.flatten()
    net.affine(384, stddev=0.04, bias_init=0.1)
    net.affine(192, stddev=0.04, bias_init=0.1)

  def learning_rate(self, global_step, global_batch_size, examples_per_epoch):
    """0.1, divided by 10 every 100 epochs (staircase)."""
    decay_steps = 100 * examples_per_epoch // global_batch_size
    return schedules.staircase_exponential_decay(
      global_step, self.default_learning_rate, decay_steps, 0.1
    )
