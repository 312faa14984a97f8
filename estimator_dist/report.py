"""``python -m estimator_dist.report``: see ``estimator_dist.commands.report``."""
import sys

from estimator_dist.commands.report import main

if __name__ == "__main__":
    sys.exit(main())
