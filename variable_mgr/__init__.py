"""Variable managers: where variables live and how gradients become updates.

The driver talks to every manager through `VariableMgr` (base.py) and never asks
which one it has. Importing this package registers the built-in managers.
"""

from variable_mgr.registry import all_reduce_names, create, get, local_names, names, register
from variable_mgr.base import VariableMgr
from variable_mgr import local  # pylint: disable=unused-import  (registers)
from variable_mgr import distributed  # pylint: disable=unused-import  (registers)

__all__ = ['all_reduce_names', 'create', 'get', 'local_names', 'names', 'register', 'VariableMgr']
