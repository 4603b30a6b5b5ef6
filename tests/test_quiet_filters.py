"""The stderr filter of platform/quiet.py: TensorFlow's collective-abort
chatter (a peer died mid-step) and libjpeg's lines go; the rest passes.

The lines below are copied from a real run: a two-worker
collective_all_reduce run whose worker 1 was SIGKILLed mid-run printed 30
such lines on worker 0 before its own one line.
"""

import os
import subprocess
import sys

from tests.helpers import ROOT

ABORT_CHATTER = [
  'E0000 00:00:1795542349.618046    9327 ring_alg.cc:291] Aborting RingReduce'
  ' with UNAVAILABLE: recvmsg:Connection reset by peer',
  'Additional GRPC error information from remote target'
  ' /job:worker/replica:0/task:1 while calling'
  ' /tensorflow.WorkerService/RecvBuf:',
  ':UNKNOWN:Error received from peer  {grpc_message:"recvmsg:Connection'
  ' reset by peer", grpc_status:14}',
  'E0000 00:00:1795542349.618084    9327 base_collective_executor.cc:252]'
  ' BaseCollectiveExecutor::StartAbort UNAVAILABLE: recvmsg:Connection'
  ' reset by peer',
  'Additional GRPC error information from remote target'
  ' /job:worker/replica:0/task:1 while calling'
  ' /tensorflow.WorkerService/RecvBuf:',
  ':UNKNOWN:Error received from peer  {grpc_message:"recvmsg:Connection'
  ' reset by peer", grpc_status:14}',
  'E0000 00:00:1795542349.618100    9327 ring_alg.cc:291] Aborting RingReduce'
  ' with UNAVAILABLE: Collective ops is aborted by: recvmsg:Connection reset'
  ' by peer',
  'Additional GRPC error information from remote target'
  ' /job:worker/replica:0/task:1 while calling'
  ' /tensorflow.WorkerService/RecvBuf:',
  ':UNKNOWN:Error received from peer  {grpc_message:"recvmsg:Connection'
  ' reset by peer", grpc_status:14}',
  'The error could be from a previous operation. Restart your program to'
  " reset. [type.googleapis.com/tensorflow.DerivedStatus='']",
]
LIBJPEG = [
  'Corrupt JPEG data: 12 extraneous bytes before marker 0xd9',
  'Premature end of JPEG file',
  'Corrupt JPEG data: premature end of data segment',
]
OWN_LINE = (
  'error: lost task worker:1 (127.0.0.1:56323 stopped answering;'
  ' UnavailableError); exiting'
)
# Kept: another TensorFlow error, and a continuation-shaped line that does
# not follow a dropped one.
KEPT = [
  'E0000 00:00:1795542349.700000    9327 cuda_platform.cc:52] failed call to'
  ' cuInit: INTERNAL',
  'The error could be from a previous operation. Restart your program to'
  ' reset.',
]

_WRITER = r"""
import os, sys
sys.path.insert(0, %r)
from tf_cnn_benchmarks.platform import quiet
with quiet.noise_lines_dropped():
  os.write(2, sys.stdin.buffer.read())
"""


def _filtered(lines, **env):
  proc = subprocess.run(
    [sys.executable, '-c', _WRITER % ROOT],
    input=''.join(line + '\n' for line in lines).encode(),
    capture_output=True,
    timeout=60,
    env=dict(os.environ, **env),
  )
  assert proc.returncode == 0, proc.stderr
  return proc.stderr.decode().splitlines()


def test_collective_abort_and_libjpeg_lines_are_dropped():
  lines = ABORT_CHATTER + LIBJPEG + KEPT[:1] + KEPT[1:] + [OWN_LINE]
  assert _filtered(lines, TF_CPP_MIN_LOG_LEVEL='2') == KEPT + [OWN_LINE]


def test_the_users_log_level_shows_every_line():
  # TF_CPP_MIN_LOG_LEVEL=0 or 1 (TensorFlow's info lines wanted): the
  # filter keeps everything, libjpeg's lines included.
  lines = ABORT_CHATTER + LIBJPEG + [OWN_LINE]
  for level in ('0', '1'):
    assert _filtered(lines, TF_CPP_MIN_LOG_LEVEL=level) == lines
