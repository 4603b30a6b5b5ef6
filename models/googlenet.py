"""GoogLeNet / Inception v1 (Szegedy et al. 2014, arXiv:1409.4842, Table 1).

Nine Inception modules of four branches (1x1 | 1x1-3x3 | 1x1-5x5 |
3x3 max pool-1x1), convolutions with bias and ReLU, no batch norm. As in the
classic harness (a throughput benchmark): no local response normalisation,
no auxiliary classifiers and no dropout before the classifier.
"""

from models.model import Model

# Table 1 of the paper: (#1x1, #3x3 reduce, #3x3, #5x5 reduce, #5x5, pool proj).
_MODULES = {
  '3a': (64, 96, 128, 16, 32, 32),
  '3b': (128, 128, 192, 32, 96, 64),
  '4a': (192, 96, 208, 16, 48, 64),
  '4b': (160, 112, 224, 24, 64, 64),
  '4c': (128, 128, 256, 24, 64, 64),
  '4d': (112, 144, 288, 32, 64, 64),
  '4e': (256, 160, 320, 32, 128, 128),
  '5a': (256, 160, 320, 32, 128, 128),
  '5b': (384, 192, 384, 48, 128, 128),
}


def inception_module(net, widths):
  """The four-branch module; the branches are concatenated on channels."""
  n1x1, n3x3_reduce, n3x3, n5x5_reduce, n5x5, pool_proj = widths
  x = net.top_layer
  with net.scope('inception'):
    branches = [
      net.conv(n1x1, 1, input_layer=x),
      net.conv(n3x3, 3, input_layer=net.conv(n3x3_reduce, 1, input_layer=x)),
      net.conv(n5x5, 5, input_layer=net.conv(n5x5_reduce, 1, input_layer=x)),
      net.conv(
        pool_proj, 1, input_layer=net.max_pool(3, 1, 'SAME', input_layer=x)
      ),
    ]
    return net.concat(branches)


class GoogLeNet(Model):
  """Inception v1 for 224x224 ImageNet."""

  def body(self, net):
    net.conv(64, 7, 2)
    net.max_pool(3, 2, 'SAME')
    net.conv(64, 1)
    net.conv(192, 3)
    net.max_pool(3, 2, 'SAME')
    for name in ('3a', '3b'):
      inception_module(net, _MODULES[name])
    net.max_pool(3, 2, 'SAME')
    for name in ('4a', '4b', '4c', '4d', '4e'):
      inception_module(net, _MODULES[name])
    net.max_pool(3, 2, 'SAME')
    for name in ('5a', '5b'):
      inception_module(net, _MODULES[name])
    net.avg_pool(7, 1)
    net.flatten()  # 1024
