"""What the header and the results line say of a run's configuration.

The driver resolves a RunFacts once; the header (run_header.py), the result
builder (run_results.py), the evaluations and the placement report read it.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from tf_cnn_benchmarks.config import params as params_lib
from tf_cnn_benchmarks.platform import peak as peak_lib


@dataclasses.dataclass(frozen=True)
class RunFacts:
  """The run's configuration as the reports state it (no driver object)."""

  params: object  # the resolved Params
  mode: params_lib.Mode
  device_was_auto: bool  # --device was chosen for the user
  devices: tuple  # this process's tower devices
  global_batch_size: int  # every worker's images in one step
  num_workers: int
  precision: str  # the compute dtype's name
  loss_scale: str  # its description, or 'none'
  manager: object  # the variable manager: describe(), all_reduce_...()
  # A training run that also evaluates (--eval_during_training_*).
  evaluates_during_training: bool
  cluster: object | None  # the cluster spec; None in a local run
  cluster_describe: str | None  # the header's "Cluster:" line, if any
  model: object  # a models.Model: its FLOPs per image
  num_classes: int
  eval_batch_size: int  # per device (--eval_batch_size, else --batch_size)
  # () -> the per-device peak for MFU, or None; resolved at the first call.
  peak: Callable[[], peak_lib.Peak | None]
  # Forward FLOPs per image counted in the run's built graph; None: count
  # them from `model` (a graph of their own).
  flops_per_image: int | None = None

  @property
  def training(self) -> bool:
    """Whether the graph trains (else: forward passes only)."""
    return self.mode is params_lib.Mode.TRAIN
