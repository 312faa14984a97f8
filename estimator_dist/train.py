"""``python -m estimator_dist.train``: see ``estimator_dist.commands.train``."""
import gc
import sys

from estimator_dist.commands.train import main

if __name__ == "__main__":
    try:
        code = main()
    except SystemExit as stop:  # E.g. a signal while waiting for peers: freeze here too.
        code = stop.code
    # The interpreter's last collection at exit goes through every object TensorFlow made
    # (seconds on a busy machine: 3.5 to 10 s measured after a plain `import tensorflow` on
    # a loaded 2-core one), and nothing needs it: the run has saved and flushed what it
    # writes. Frozen objects are left to the process's end, which takes a fraction of that.
    gc.freeze()
    sys.exit(code)
