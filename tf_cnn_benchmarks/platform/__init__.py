"""The machine: devices, CPU features, the device peak, GPU runtime settings and
kernels, runtime knobs, session configuration and TensorFlow start-up."""
