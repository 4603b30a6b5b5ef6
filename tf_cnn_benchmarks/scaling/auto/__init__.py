"""--variable_update=auto: rank the strategies the cluster can run and pick
one (prediction, the launcher's shared profile, measured close calls, the
start-up link probe)."""
