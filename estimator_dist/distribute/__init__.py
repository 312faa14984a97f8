"""Distribution: the strategies by name, the cluster and where it comes from, the
strategies built for Estimator, and ``make_run_config``.

One direction: strategy_table -> cluster -> cluster_sources -> rendezvous ->
strategies -> run_config. Imports no TensorFlow itself.
"""
