"""VGG-11/16/19 (Simonyan & Zisserman 2014, arXiv:1409.1556, configurations
A, D and E).

Five stages of 3x3 SAME convolutions (64, 128, 256, 512, 512 filters, with
bias and ReLU), each closed by 2x2 max pooling, then fc 4096 - dropout -
fc 4096 - dropout. No batch norm, as in the paper and the classic harness.
"""

from models.model import PlainConvNet

_STAGE_WIDTHS = (64, 128, 256, 512, 512)
# Convolutions per stage for each depth.
_LAYER_COUNTS = {11: (1, 1, 2, 2, 2), 16: (2, 2, 3, 3, 3), 19: (2, 2, 4, 4, 4)}


class VGG(PlainConvNet):
  """Plain 3x3-conv stack with three fully connected layers."""

  def __init__(self, *model_args, depth):
    super().__init__(*model_args)
    self.layer_counts = _LAYER_COUNTS[depth]
    self.features = tuple(
      layer
      for count, width in zip(self.layer_counts, _STAGE_WIDTHS)
      for layer in (('conv', width, 3),) * count + (('pool', 2, 2),)
    )  # flattened: 512 x 7 x 7

  hidden = (4096, 4096)
  dropout = 0.5
