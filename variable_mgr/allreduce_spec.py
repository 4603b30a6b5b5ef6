"""The --all_reduce_spec vocabulary: the algorithm registry and the grammar.

Spec grammar (the classic tf_cnn_benchmarks meaning):

    ALG            one algorithm for every tensor, e.g. `xring`
    ALG#N          N = shards / rings / gather devices / subdivisions
    ALG/ALG        intra-worker algorithm / inter-worker algorithm
    ALG:LIMIT:ALG  tensors with <= LIMIT elements use the first algorithm,
                   larger ones the next; LIMIT takes K/M/G/T (powers of 1024)

`parse_all_reduce_spec` is the one place the grammar is read: resolution
parses the flag once (variable_mgr/settings.py) and everything after it
holds the parsed AllReduceSpec. The algorithms themselves register here from
allreduce.py (`register_algorithm`), so the grammar knows their names.
"""

import dataclasses
import functools
import re
from typing import Callable, Dict, FrozenSet, Optional, Tuple


class AllReduceSpecError(ValueError):
  """A --all_reduce_spec string that does not follow the grammar."""


# --------------------------------------------------------------------------
# Registry

# fn(tensors, devices, num_shards) -> the summed tensors (see allreduce.py).
AlgorithmFn = Callable[..., list]

ALGORITHMS: Dict[str, AlgorithmFn] = {}


@dataclasses.dataclass(frozen=True)
class AlgorithmTraits:
  """What all_reduce needs to know about a registered algorithm."""

  needs_gpu: bool  # cannot run on CPU devices at all
  uses_collective_keys: bool  # takes a `collective_keys=` keyword
  lockstep: bool  # every device's op must run or the others hang


# The built-in algorithms' names and traits, as data: the grammar (and the
# cost model, which imports no TensorFlow) knows them before allreduce.py
# binds their functions; registration order, which algorithm_names keeps.
_TRAITS: Dict[str, AlgorithmTraits] = {
  'copy': AlgorithmTraits(False, False, False),
  'pscpu': AlgorithmTraits(False, False, False),
  'psgpu': AlgorithmTraits(False, False, False),
  'xring': AlgorithmTraits(False, False, False),
  'rechd': AlgorithmTraits(False, False, False),
  'shuffle': AlgorithmTraits(False, False, False),
  'collective': AlgorithmTraits(False, True, True),
  'nccl': AlgorithmTraits(True, False, True),
  'hierarchical_copy': AlgorithmTraits(False, False, False),
}


def register_algorithm(
  name, *, needs_gpu=False, uses_collective_keys=False, lockstep=False
):
  """Decorator adding an all-reduce function to ALGORITHMS under `name`."""

  def decorate(fn):
    if name in ALGORITHMS:
      raise ValueError(f'all-reduce algorithm {name!r} is already registered')
    traits = AlgorithmTraits(needs_gpu, uses_collective_keys, lockstep)
    if _TRAITS.setdefault(name, traits) != traits:
      raise ValueError(
        f'all-reduce algorithm {name!r}: traits {traits} differ from the '
        f'declared {_TRAITS[name]}'
      )
    ALGORITHMS[name] = fn
    return fn

  return decorate


def algorithm_names(cpu_only=False) -> Tuple[str, ...]:
  """Names of the declared and registered algorithms, in registration
  order (a built-in's function binds when allreduce.py is imported).

  With cpu_only=True, only those that run without a GPU.
  """
  return tuple(
    name for name in _TRAITS if not (cpu_only and _TRAITS[name].needs_gpu)
  )


def algorithm_traits(name: str) -> AlgorithmTraits:
  """The traits `name` registered with."""
  return _TRAITS[name]


# --------------------------------------------------------------------------
# Spec grammar

_GRAMMAR = 'ALG[#N][/ALG[#N]] or ALG:LIMIT:ALG[:LIMIT:ALG...]'
_LIMIT_RE = re.compile(r'^([0-9]+)([kKmMgGtT]?)$')
_SUFFIX_POWER = {'': 0, 'k': 1, 'm': 2, 'g': 3, 't': 4}


@dataclasses.dataclass(frozen=True)
class AlgSpec:
  """One range's algorithm: `intra[#shards][/inter[#inter_shards]]`."""

  intra: str
  inter: Optional[str] = None
  shards: int = 1
  inter_shards: int = 1
  # `#N` was written (collective#1 asks for one subdivision, where a bare
  # `collective` leaves the count to the runtime); not part of the value.
  shards_given: bool = dataclasses.field(default=False, compare=False)

  def __str__(self):
    text = _alg_text(self.intra, self.shards)
    if self.inter is not None:
      text += '/' + _alg_text(self.inter, self.inter_shards)
    return text


@dataclasses.dataclass(frozen=True)
class SpecRange:
  """Tensors with at most `limit` elements (None: no limit) use `alg`."""

  limit: Optional[int]
  alg: AlgSpec


@dataclasses.dataclass(frozen=True)
class AllReduceSpec:
  """A parsed --all_reduce_spec: ranges sorted by increasing limit."""

  ranges: Tuple[SpecRange, ...]

  @property
  def is_hybrid(self) -> bool:
    """True for several size ranges or an intra/inter split."""
    return len(self.ranges) > 1 or any(
      r.alg.inter is not None for r in self.ranges
    )

  @property
  def algorithms(self) -> FrozenSet[str]:
    """Every algorithm name the spec uses."""
    names = set()
    for r in self.ranges:
      names.add(r.alg.intra)
      if r.alg.inter is not None:
        names.add(r.alg.inter)
    return frozenset(names)

  def alg_for(self, num_elements: int) -> AlgSpec:
    """The algorithm for a tensor of `num_elements` elements."""
    for r in self.ranges:
      if r.limit is None or num_elements <= r.limit:
        return r.alg
    # Unreachable for parsed specs, whose last range has no limit.
    return self.ranges[-1].alg

  def __str__(self):
    parts = []
    for r in self.ranges:
      parts.append(str(r.alg))
      if r.limit is not None:
        parts.append(_limit_text(r.limit))
    return ':'.join(parts)


def _alg_text(name, shards):
  return name if shards == 1 else f'{name}#{shards}'


def _limit_text(limit):
  """Shortest exact spelling of a limit: 32768 -> '32K'."""
  for suffix, power in (('T', 4), ('G', 3), ('M', 2), ('K', 1)):
    if limit % 1024**power == 0:
      return f'{limit // 1024**power}{suffix}'
  return str(limit)


def _spec_error(text, pos, what):
  """Builds the one-line error naming the spec, the position and the grammar."""
  names = ', '.join(algorithm_names())
  return AllReduceSpecError(
    f'--all_reduce_spec={text!r}: position {pos}: {what}; '
    f'grammar: {_GRAMMAR}; algorithms: {names}'
  )


def _parse_count(text, pos, count_text, name):
  """Parses the N of `name#N`, starting at position `pos`."""
  if not count_text.isdigit() or not count_text.isascii():
    raise _spec_error(
      text,
      pos,
      f"bad count {count_text!r} after '{name}#' (want a positive integer)",
    )
  count = int(count_text)
  if count < 1:
    raise _spec_error(text, pos, f"count after '{name}#' must be >= 1")
  return count


def _parse_alg(text, pos, piece):
  """Parses `ALG[#N]` starting at position `pos`; returns (name, count)."""
  name, hash_sign, count_text = piece.partition('#')
  if not name:
    raise _spec_error(text, pos, 'missing algorithm name')
  if name not in _TRAITS:
    raise _spec_error(text, pos, f'unknown algorithm {name!r}')
  if not hash_sign:
    return name, 1
  return name, _parse_count(text, pos + len(name) + 1, count_text, name)


def _parse_range(text, pos, piece):
  """Parses `ALG[#N][/ALG[#N]]` starting at position `pos`."""
  if not piece:
    raise _spec_error(text, pos, 'missing algorithm')
  halves = piece.split('/')
  if len(halves) > 2:
    second_slash = pos + len(halves[0]) + 1 + len(halves[1])
    raise _spec_error(
      text, second_slash, "more than one '/' (want intra/inter)"
    )
  intra, shards = _parse_alg(text, pos, halves[0])
  if len(halves) == 1:
    return AlgSpec(intra, None, shards, shards_given='#' in halves[0])
  inter, inter_shards = _parse_alg(text, pos + len(halves[0]) + 1, halves[1])
  return AlgSpec(intra, inter, shards, inter_shards)


def _parse_limit(text, pos, piece):
  """Parses LIMIT (digits with optional K/M/G/T) starting at `pos`."""
  match = _LIMIT_RE.match(piece)
  if not match:
    raise _spec_error(
      text, pos, f'bad limit {piece!r} (want digits with optional K/M/G/T)'
    )
  power = _SUFFIX_POWER[match.group(2).lower()]
  limit = int(match.group(1)) * 1024**power
  if limit < 1:
    raise _spec_error(text, pos, f'limit {piece!r} must be >= 1')
  return limit


def _split_with_positions(text, sep):
  """Splits `text` on `sep`, keeping each piece's start position."""
  pieces, start = [], 0
  for piece in text.split(sep):
    pieces.append((start, piece))
    start += len(piece) + len(sep)
  return pieces


def parse_all_reduce_spec(text: str) -> AllReduceSpec:
  """Parses an --all_reduce_spec string (see the module docstring).

  Raises AllReduceSpecError with a one-line message naming the spec, the
  0-based character position of the problem and the grammar. A string is
  parsed once per process: the resolution checks and the run's
  ManagerSettings then hold the same AllReduceSpec.
  """
  if not isinstance(text, str):
    raise AllReduceSpecError(
      f'--all_reduce_spec={text!r}: not a string; grammar: {_GRAMMAR}'
    )
  return _parse(text)


@functools.lru_cache(maxsize=64)
def _parse(text: str) -> AllReduceSpec:
  """The grammar itself (parse_all_reduce_spec checks the type first)."""
  if not text:
    raise _spec_error(text, 0, 'empty spec')
  pieces = _split_with_positions(text, ':')
  ranges, previous = [], None
  # Left to right, so the error names the first problem in the text.
  for k in range(0, len(pieces), 2):
    alg = _parse_range(text, *pieces[k])
    limit = None
    if k + 1 < len(pieces):
      limit_pos, limit_piece = pieces[k + 1]
      limit = _parse_limit(text, limit_pos, limit_piece)
      if previous is not None and limit <= previous:
        raise _spec_error(
          text,
          limit_pos,
          f'limit {limit_piece!r} must be '
          f'larger than the previous limit ({previous})',
        )
      previous = limit
    ranges.append(SpecRange(limit, alg))
  if ranges[-1].limit is not None:
    raise _spec_error(
      text,
      len(text),
      'missing algorithm after the last limit (the last range needs no limit)',
    )
  return AllReduceSpec(tuple(ranges))
