"""Times every all-reduce algorithm over device counts and tensor sizes.

    .venv/bin/python scripts/all_reduce_benchmark.py --quick
    .venv/bin/python scripts/all_reduce_benchmark.py \
      --algorithms xring,pscpu#2 \
        --devices 2,8 --sizes 1M,64M --json_out results/allreduce.jsonl

For each device count and size one graph holds: a variable per device (the
inputs, so no host copy is timed), every algorithm's all-reduce of them, and a
same-size variable-to-variable copy (assign) as the physical memcpy reference.
Each row is the median of --iters timed session runs after --warmup ones.

  algbw = bytes / time;  busbw = algbw * 2(n-1)/n   (the nccl-tests meaning:
  the per-device traffic of an optimal ring, so busbw is comparable across n).

Logical CPU devices share one address space: TF hands tensors between them
without copying, so on CPU the times measure the adds, splits and concats
each algorithm performs, and the memcpy column is the bandwidth ceiling.
"""

import argparse
import statistics
import sys
import time

from tf_cnn_benchmarks.platform import quiet
from tf_cnn_benchmarks.reporting import result_lines  # noqa: E402  (no TensorFlow)

# TensorFlow loads after the arguments parse (--help answers at once), with
# its start-up log lines kept off stderr: see _load_tensorflow.
tf = tf1 = allreduce = None


def _load_tensorflow():
  """Imports TensorFlow quietly, and the all-reduce module built on it."""
  global tf, tf1, allreduce  # pylint: disable=global-statement
  tf = quiet.load_tensorflow()
  tf1 = tf.compat.v1
  # Imports TensorFlow: late, so --help answers without it.
  from variable_mgr import allreduce as loaded  # pylint: disable=g-import-not-at-top

  allreduce = loaded


_SUFFIXES = {'': 1, 'K': 1024, 'M': 1024**2, 'G': 1024**3}
DEFAULT_SIZES = ','.join(
  f'{4**k}K' if k < 5 else f'{4**k // 1024}M' for k in range(10)
)  # 1K, 4K, ..., 256M
QUICK_SIZES = '1K,16K,256K'
QUICK_DEVICES = '2,4'


def parse_bytes(text):
  """'64K' -> 65536 (K/M/G are powers of 1024, as in the spec grammar)."""
  text = text.strip().upper().removesuffix('B')
  suffix = text[-1] if text and text[-1] in 'KMG' else ''
  number = text[:-1] if suffix else text
  if not number.isdigit() or int(number) < 1:
    raise argparse.ArgumentTypeError(f'bad size {text!r} (want e.g. 4K, 1M)')
  return int(number) * _SUFFIXES[suffix]


def size_label(num_bytes):
  for suffix, unit in (('G', 1024**3), ('M', 1024**2), ('K', 1024)):
    if num_bytes >= unit and num_bytes % unit == 0:
      return f'{num_bytes // unit}{suffix}'
  return str(num_bytes)


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument(
    '--algorithms',
    default=None,
    help='comma-separated specs (default: every algorithm '
    'the device type can run)',
  )
  parser.add_argument(
    '--devices', default='2,4,8', help='comma-separated device counts'
  )
  parser.add_argument(
    '--sizes',
    default=DEFAULT_SIZES,
    help='comma-separated tensor sizes in bytes, K/M/G ok',
  )
  parser.add_argument(
    '--dtype',
    default='float32',
    choices=['float32', 'float16', 'bfloat16', 'int32'],
  )
  parser.add_argument('--device_type', default='cpu', choices=['cpu', 'gpu'])
  parser.add_argument('--iters', type=int, default=20)
  parser.add_argument('--warmup', type=int, default=3)
  parser.add_argument(
    '--quick',
    action='store_true',
    help=f'sizes {QUICK_SIZES}, devices {QUICK_DEVICES}, 5 iters, 1 warmup',
  )
  parser.add_argument(
    '--json_out', default=None, help='append one JSON line per row to this file'
  )
  args = parser.parse_args(argv)
  _load_tensorflow()
  if args.quick:
    args.sizes, args.devices = QUICK_SIZES, QUICK_DEVICES
    args.iters, args.warmup = 5, 1
  args.sizes = [parse_bytes(s) for s in args.sizes.split(',')]
  args.devices = [int(n) for n in args.devices.split(',')]
  if args.algorithms is None:
    cpu_only = args.device_type == 'cpu'
    args.algorithms = list(allreduce.algorithm_names(cpu_only=cpu_only))
  else:
    args.algorithms = [a.strip() for a in args.algorithms.split(',')]
  # Parsed once, here: a typo fails before anything is built.
  args.specs = {}
  for text in args.algorithms:
    try:
      args.specs[text] = allreduce.parse_all_reduce_spec(text)
    except allreduce.AllReduceSpecError as e:
      parser.error(str(e))
  return args


def session_config(num_devices, device_type):
  """Logical devices; grappler off so the graph runs exactly as built."""
  count = {'CPU': num_devices} if device_type == 'cpu' else {'CPU': 1}
  config = tf1.ConfigProto(device_count=count)
  config.graph_options.rewrite_options.disable_meta_optimizer = True
  return config


def time_op(sess, op, iters, warmup):
  """Median wall time of `iters` runs of `op`, in seconds."""
  for _ in range(warmup):
    sess.run(op)
  times = []
  for _ in range(iters):
    start = time.perf_counter()
    sess.run(op)
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def build_graph(devices, elements, dtype, specs):
  """Input variables, one grouped all-reduce per spec, and the memcpy op.

  specs: {spec text: its parsed AllReduceSpec}.
  Returns (graph, {spec text: op or exception}, memcpy op, init op).
  """
  graph = tf.Graph()
  with graph.as_default():
    inputs = []
    for i, d in enumerate(devices):
      with tf.device(d):
        inputs.append(
          tf1.Variable(
            tf.ones([elements], dtype), use_resource=True, name=f'input{i}'
          )
        )
    with tf.device(devices[-1]):
      target = tf1.Variable(
        tf.zeros([elements], dtype), use_resource=True, name='memcpy_target'
      )
      # DeepCopy forces a real memcpy: a plain assign of the read may just
      # alias the source buffer (both devices share host memory on CPU).
      copied = tf.raw_ops.DeepCopy(x=inputs[0].read_value())
      memcpy = target.assign(copied, read_value=False)
    ops = {}
    for text, spec in specs.items():
      try:
        outputs = allreduce.all_reduce(
          [v.read_value() for v in inputs], devices, spec
        )
        ops[text] = tf.group(*outputs)
      except allreduce.AllReduceUnavailableError as e:
        ops[text] = e
    init = tf1.global_variables_initializer()
  return graph, ops, memcpy, init


def measure(args, n, num_bytes):
  """Rows for `n` devices and one tensor size."""
  dtype = tf.as_dtype(args.dtype)
  elements = max(1, num_bytes // dtype.size)
  real_bytes = elements * dtype.size
  devices = [f'/{args.device_type}:{i}' for i in range(n)]
  graph, ops, memcpy, init = build_graph(devices, elements, dtype, args.specs)
  rows = []
  with tf1.Session(
    graph=graph, config=session_config(n, args.device_type)
  ) as sess:
    sess.run(init)
    memcpy_s = time_op(sess, memcpy, args.iters, args.warmup)
    for spec, op in ops.items():
      if isinstance(op, Exception):
        print(f'skipping {spec} on {n} devices: {op}', file=sys.stderr)
        continue
      seconds = time_op(sess, op, args.iters, args.warmup)
      algbw = real_bytes / seconds / 1e9
      rows.append(
        {
          'algorithm': spec,
          'devices': n,
          'device_type': args.device_type,
          'dtype': args.dtype,
          'bytes': real_bytes,
          'elements': elements,
          'time_ms': seconds * 1e3,
          'algbw_gbps': algbw,
          'busbw_gbps': algbw * 2 * (n - 1) / n,
          'memcpy_gbps': real_bytes / memcpy_s / 1e9,
          'iters': args.iters,
        }
      )
  return rows


HEADER = (
  f'{"algorithm":<20} {"devices":>7} {"bytes":>10} {"size":>6} '
  f'{"time ms":>10} {"algbw GB/s":>10} {"busbw GB/s":>10} '
  f'{"memcpy GB/s":>11}'
)


def format_row(row):
  return (
    f'{row["algorithm"]:<20} {row["devices"]:>7} {row["bytes"]:>10} '
    f'{size_label(row["bytes"]):>6} {row["time_ms"]:>10.3f} '
    f'{row["algbw_gbps"]:>10.3f} {row["busbw_gbps"]:>10.3f} '
    f'{row["memcpy_gbps"]:>11.3f}'
  )


def main(argv=None):
  args = parse_args(argv)
  print(HEADER)
  print('-' * len(HEADER))
  for n in args.devices:
    for num_bytes in args.sizes:
      for row in measure(args, n, num_bytes):
        print(format_row(row), flush=True)
        if args.json_out:
          result_lines.append_json_line(args.json_out, row)


if __name__ == '__main__':
  main()
