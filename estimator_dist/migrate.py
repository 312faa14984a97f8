"""``python -m estimator_dist.migrate``: see ``estimator_dist.commands.migrate``."""
import sys

from estimator_dist.commands.migrate import main

if __name__ == "__main__":
    sys.exit(main())
