"""LeNet-5 style network (LeCun et al. 1998), as in TF's MNIST tutorial.

Two 5x5 SAME convolutions (32, 64 filters) each followed by 2x2 max pooling,
a 512-unit ReLU layer, then the classifier. 28x28 input; ImageNet only, as in
the classic harness.
"""

from models.model import Model


class LeNet(Model):
  """conv32-pool-conv64-pool-fc512."""

  def body(self, net):
    net.conv(32, 5)
    net.max_pool(2, 2)
    net.conv(64, 5)
    net.max_pool(2, 2)
    net.flatten()  # 64 x 7 x 7 for a 28x28 input
    net.affine(512)
