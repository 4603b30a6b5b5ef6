"""Reporting: the result value, the results line, output files, the console
header and table, timing and spread, the model table."""
