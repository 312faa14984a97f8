"""``python -m estimator_dist.doctor``: see ``estimator_dist.commands.doctor``."""
import sys

from estimator_dist.commands.doctor import main

if __name__ == "__main__":
    sys.exit(main())
