"""lab/scripts/layout_metrics.py: rooms and late imports counted right."""

import ast
import pathlib

from lab.scripts import layout_metrics


def test_rooms_go_one_level_deeper_in_the_driver():
  room = layout_metrics.room_of
  assert room(pathlib.PurePosixPath('models/lenet.py')) == 'models'
  assert room(pathlib.PurePosixPath('setup.py')) == '.'
  path = pathlib.PurePosixPath('tf_cnn_benchmarks/scaling/model/simulate.py')
  assert room(path) == 'tf_cnn_benchmarks/scaling/model'


def test_only_imports_inside_functions_count_once_each():
  tree = ast.parse(
    'import os\n'
    'def f():\n'
    '  import json\n'
    '  def g():\n'
    '    from a import b\n'
    'class C:\n'
    '  import re\n'
  )
  assert layout_metrics.function_imports(tree) == 2
