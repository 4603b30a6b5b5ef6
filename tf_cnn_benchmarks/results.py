"""The result of a run, as data: one JSON line (schema in results/README.md)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import socket
import subprocess

SCHEMA_VERSION = 1


@dataclasses.dataclass(frozen=True)
class BenchmarkResult:
  """What a run measured; the console table and the JSON line are views of it."""
  params: dict
  env: dict
  model: str
  data_name: str
  variable_update: str
  all_reduce_spec: str | None
  precision: str
  num_devices: int
  num_workers: int
  batch_size_per_device: int
  global_batch_size: int
  num_steps: int
  num_warmup_steps: int
  images_per_sec: float
  images_per_sec_per_device: float
  step_time_ms: dict
  losses: list
  flops_per_image: int | None
  tflops_per_sec: float | None
  peak_tflops_per_device: float | None
  mfu: float | None
  extra: dict = dataclasses.field(default_factory=dict)

  @property
  def final_loss(self) -> float | None:
    return self.losses[-1] if self.losses else None

  def to_record(self) -> dict:
    """The JSON object of this run (schema_version 1)."""
    record = {'schema_version': SCHEMA_VERSION, 'status': 'ok', 'error': None,
              'utc_time': datetime.datetime.now(datetime.timezone.utc)
                          .isoformat(timespec='seconds')}
    fields = dataclasses.asdict(self)
    extra = fields.pop('extra')
    record.update(fields)
    record['final_loss'] = self.final_loss
    record.update(extra)
    return record


def append_json_line(path: str, record: dict) -> None:
  """Appends `record` as one line with a single write on an O_APPEND file.

  One write of the whole line means a killed run leaves either the full line or
  nothing, never half a line (and concurrent appenders do not interleave).
  """
  line = (json.dumps(record, sort_keys=True, allow_nan=True) + '\n').encode()
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
  try:
    written = os.write(fd, line)
    if written != len(line):
      raise OSError('short write to %s' % path)
  finally:
    os.close(fd)


def _cpu_model() -> str:
  try:
    with open('/proc/cpuinfo') as f:
      for line in f:
        if line.startswith('model name'):
          return line.split(':', 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def _git_commit() -> str | None:
  here = os.path.dirname(os.path.abspath(__file__))
  try:
    out = subprocess.run(['git', 'rev-parse', 'HEAD'], cwd=here, timeout=5,
                         capture_output=True, text=True, check=True)
    return out.stdout.strip() or None
  except (OSError, subprocess.SubprocessError):
    return None


def environment(device_kind: str, gpu_model: str | None = None) -> dict:
  """Where the run happened: versions, CPU, device kind, git commit, host."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return {'tensorflow': tf.__version__, 'python': platform.python_version(),
          'cpu_model': _cpu_model(), 'num_cores': os.cpu_count(),
          'device_kind': device_kind, 'gpu_model': gpu_model,
          'git_commit': _git_commit(), 'hostname': socket.gethostname()}
