"""``python -m estimator_dist.train``: see ``estimator_dist.commands.train``."""
import sys

from estimator_dist.commands.train import main

if __name__ == "__main__":
    sys.exit(main())
