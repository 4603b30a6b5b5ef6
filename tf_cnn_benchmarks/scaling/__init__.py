"""Scaling prediction, in three rooms that import one way (auto -> profile ->
model):

- model/: the cost model. A profile and a target in, images/sec out; no
  TensorFlow (an import-linter contract and a test say so).
- profile/: measuring one host (compute, gradients, packing, transports) and
  paper profiles for devices this machine does not have.
- auto/: --variable_update=auto: the ranking, the launcher's shared profile,
  measured close calls and the start-up link probe.

Beside the rooms, published.py reads results/published/ (scaling tables
copied from published sources, checked against) without TensorFlow.
"""
