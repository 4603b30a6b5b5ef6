"""Gradient compression: where gradients meet the wire.

  catalog: every compressor's name and what it is, as data (no TensorFlow;
    the flag takes its choices from it), with its bytes on the wire and
    its compute (the predictors and the compression benchmark read them).
  base: the contract (Compressor, Wire) and the state variables.
  casts: none, fp16, bf16, fp16_ef, bf16_ef; powersgd: PowerSGD.
  registry: name -> class; create() builds one for a graph.

Every manager that reduces gradients calls its compressor in one place:
BatchAllReduce.sum (replicated, distributed_all_reduce, every spec),
collectives.collective_means_per_tower (collective_all_reduce, hybrid's
all-reduced group), and the pushes of the parameter-server managers
(push/pull, casts only).
"""
