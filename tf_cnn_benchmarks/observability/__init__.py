"""Observability: TensorBoard summaries, traces and graph files, profiles and
the placement report."""
