"""The training run: towers and graph building, optimizers, learning rates,
checkpoints, freezing, XLA and the step loop."""
