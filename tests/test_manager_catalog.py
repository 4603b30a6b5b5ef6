"""variable_mgr/catalog.py: the managers' traits as data, the one source the
classes and the cost model read; the cost model and the catalog import no
TensorFlow."""

import subprocess
import sys

import pytest

from tests.helpers import ROOT
from tf_cnn_benchmarks.scaling.model import cost_model
import variable_mgr
from variable_mgr import allreduce_spec
from variable_mgr import catalog


def test_the_catalog_names_every_registered_manager():
  assert set(catalog.MANAGERS) == set(variable_mgr.names())


@pytest.mark.parametrize('name', sorted(catalog.MANAGERS))
@pytest.mark.parametrize('in_cluster', [False, True])
def test_each_class_carries_the_declared_traits(name, in_cluster):
  declared = catalog.traits_of(name, in_cluster)
  traits = variable_mgr.get(name, in_cluster=in_cluster).traits
  if declared is None:  # the class does not run there
    assert not (traits.runs_in_cluster if in_cluster else traits.runs_local)
  else:
    assert traits == declared


@pytest.mark.parametrize('name', sorted(catalog.MANAGERS))
@pytest.mark.parametrize('in_cluster', [False, True])
def test_each_class_shares_gradients_as_declared(name, in_cluster):
  if catalog.traits_of(name, in_cluster) is None:
    return  # no class serves the name there
  cls = variable_mgr.get(name, in_cluster=in_cluster)
  assert cls.shares_gradients == catalog.MANAGERS[name].shares_gradients


def test_the_cost_model_knows_the_managers_whose_towers_share_a_model():
  shared = {n for n, d in catalog.MANAGERS.items() if d.shares_gradients}
  assert set(cost_model.MODELLED) == shared
  for name in cost_model.MODELLED:
    kinds = [
      catalog.traits_of(name, c)
      for c in (False, True)
      if catalog.traits_of(name, c)
    ]
    assert (name in cost_model.PACKING) == any(t.all_reduce for t in kinds)
    assert (name in cost_model.WITH_SPEC) == any(
      t.all_reduce or t.collective_spec for t in kinds
    )


def test_every_modelled_manager_has_a_step_model():
  assert set(cost_model.STEP_JOBS) == set(cost_model.MODELLED)


def test_the_cost_model_imports_no_tensorflow():
  probe = (
    'import sys\n'
    'from tf_cnn_benchmarks.scaling.model import cost_model, baselines\n'
    'from variable_mgr import catalog, grouping, allreduce_spec\n'
    'cost_model.parse_spec("xring/pscpu")\n'
    'cost_model.parse_spec("collective")\n'
    'print(sorted(m for m in sys.modules if m.split(".")[0] in '
    '("tensorflow", "keras", "models")))\n'
  )
  out = subprocess.run(
    [sys.executable, '-c', probe],
    cwd=ROOT,
    capture_output=True,
    text=True,
    check=True,
  ).stdout
  assert out.strip() == '[]'


def test_every_declared_algorithm_is_registered_and_no_other():
  variable_mgr.load_managers()
  assert list(allreduce_spec.ALGORITHMS) == list(
    allreduce_spec.algorithm_names()
  )
