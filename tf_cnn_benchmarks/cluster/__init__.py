"""Multi-worker runs on TensorFlow's gRPC runtime, one concern per module.

A cluster has worker tasks (they run training steps), optional ps tasks (they
hold variables) and, for managers whose one graph spans every worker, one
controller (it runs that graph; the workers then only serve). Every task
starts a `tf.distribute.Server`.

  spec.py         who is in the cluster: flags or TF_CONFIG -> `Cluster`
                  (TF_CONFIG's master is the chief; an evaluator joins none)
  servers.py      this task's `tf.distribute.Server` and its config
  thread_pools.py --cluster_threads' rule, without TensorFlow
  roles.py        who runs steps, who keeps done flags, who only serves
  done_flags.py   the "finished" / "lost" flags kept on the flag keepers
  watchdog.py     liveness: peers' ports probed; one line for a lost task
  layout.py       where this process's graph puts its towers
  run_context.py  the driver's view: a local run or a cluster client
"""
