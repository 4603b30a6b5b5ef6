"""Trivial model: almost no compute, for measuring harness overhead.

Architecture (as the classic tf_cnn_benchmarks 'trivial'): flatten the image,
a 1-unit ReLU layer, a 4096-unit ReLU layer, then the classifier. The 1-unit
bottleneck keeps the first matmul tiny even on 227x227x3 inputs.
"""

from models.model import Model


class Trivial(Model):
  """Flatten -> affine(1) -> affine(4096) -> classifier."""

  def body(self, net):
    net.flatten()
    net.affine(1)
    net.affine(4096)
