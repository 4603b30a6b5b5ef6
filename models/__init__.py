"""CNN model zoo for the benchmark harness.

Typical usage example:

  import models
  model = models.create_model('resnet50', 'imagenet')
  out = model.build(images, num_classes=1001, data_format='NCHW')

Importing the package imports every family module, which registers its
models.
"""

from models.flops import count_forward_flops
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

# isort: split
# Family modules register their models on import.
from models import alexnet  # noqa: F401,E402
from models import densenet  # noqa: F401,E402
from models import googlenet  # noqa: F401,E402
from models import inception3  # noqa: F401,E402
from models import inception4  # noqa: F401,E402
from models import lenet  # noqa: F401,E402
from models import mobilenet  # noqa: F401,E402
from models import mobilenet_v2  # noqa: F401,E402
from models import nasnet  # noqa: F401,E402
from models import overfeat  # noqa: F401,E402
from models import resnet  # noqa: F401,E402
from models import resnet_cifar  # noqa: F401,E402
from models import trivial  # noqa: F401,E402
from models import vgg  # noqa: F401,E402

__all__ = [
  'Model',
  'ModelOutput',
  'UnknownModelError',
  'count_forward_flops',
  'create_model',
  'list_models',
  'model_flops_per_image',
  'model_param_count',
  'model_stats',
  'names',
  'register',
]
