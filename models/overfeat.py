"""OverFeat "fast" model (Sermanet et al. 2013, arXiv:1312.6229, Table 1).

conv 11x11/4 (96) - pool 2 - conv 5x5 (256) - pool 2 - conv 3x3 (512, 1024,
1024) - pool 2 - fc 3072 - dropout - fc 4096 - dropout. Input 231x231,
which the VALID 11x11/4 and 5x5 convolutions take to a 6x6 final map, as in
the paper. The dropouts (rate 0.5, training only) are the classic harness's
(its OverfeatModel calls cnn.dropout() after both hidden layers).
"""

from models.model import PlainConvNet


class OverFeat(PlainConvNet):
  """OverFeat fast: five convolutions, two hidden fully connected layers."""

  features = (
    ('conv', 96, 11, 4, 'VALID'),
    ('pool', 2, 2),
    ('conv', 256, 5, 1, 'VALID'),
    ('pool', 2, 2),
    ('conv', 512, 3),
    ('conv', 1024, 3),
    ('conv', 1024, 3),
    ('pool', 2, 2),
  )  # flattened: 1024 x 6 x 6
  hidden = (3072, 4096)
  dropout = 0.5
