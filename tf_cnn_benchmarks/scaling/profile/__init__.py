"""Measuring one host for the cost model: the profiled step, its gradients
and packing, the transports; paper profiles for other devices."""
