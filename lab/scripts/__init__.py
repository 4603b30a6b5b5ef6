"""Research commands: the predictor's validation grid and the test-bed's
measurements (`python -m lab.scripts.NAME`)."""
