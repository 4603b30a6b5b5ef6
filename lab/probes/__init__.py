"""Probes of the launcher's loopback test-bed (read stagger, link CPU, port
duplex, ring sets), run on its task processes."""
