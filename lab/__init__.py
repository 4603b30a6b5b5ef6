"""Research on the predictor and the loopback test-bed: probes, grids and
their results. The product never imports it (an import-linter contract)."""
