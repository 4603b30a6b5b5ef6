"""The user commands: sweep, compare, plot, report, launch_local_cluster,
make_fake_data, profile_host, predict_scaling and the benchmark tools
(`python -m tf_cnn_benchmarks.commands.NAME`, `python scripts/NAME.py`, or
the installed tf-cnn-benchmarks-* commands)."""
