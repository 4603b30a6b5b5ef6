"""CNN model zoo for the benchmark harness.

Typical usage example:

  import models
  model = models.create_model('resnet50', 'imagenet')
  out = model.build(images, num_classes=1001, data_format='NCHW')

Every model is declared once, in `models/declared.py`; the registry imports
a model's family module (the network code) when the model is first created.
"""

from models.flops import count_forward_flops
from models.flops import flops_per_image_of
from models.flops import model_flops_per_image
from models.flops import model_param_count
from models.flops import model_stats
from models.model import Model
from models.model import ModelOutput
from models.registry import UnknownModelError
from models.registry import create_model
from models.registry import list_models
from models.registry import names
from models.registry import register

__all__ = [
  'Model',
  'ModelOutput',
  'UnknownModelError',
  'count_forward_flops',
  'flops_per_image_of',
  'create_model',
  'list_models',
  'model_flops_per_image',
  'model_param_count',
  'model_stats',
  'names',
  'register',
]
