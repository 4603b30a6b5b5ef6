"""Scaling prediction: the profile of one host (compute, gradients, packing,
transports) and the cost model that predicts a cluster from it."""
