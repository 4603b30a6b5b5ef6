"""The cost model: what each strategy sends and computes per step, simulated
over the target's shared resources. Imports no TensorFlow."""
