"""``python -m estimator_dist.launch``: see ``estimator_dist.commands.launch``."""
import sys

from estimator_dist.commands.launch import main

if __name__ == "__main__":
    sys.exit(main())
