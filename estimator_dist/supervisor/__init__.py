"""The local cluster supervisor: starts, watches and restarts the tasks of a launch.

Imports neither TensorFlow nor numpy: the launcher unshares namespaces, which the
kernel refuses to a process running threads."""
