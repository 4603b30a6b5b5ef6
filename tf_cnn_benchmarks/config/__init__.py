"""The run's configuration: the one frozen Params value and its flags, their
resolution into the run plan, limits, dataset facts, the classic flag table
and the classic Python API adapter."""
