"""``python -m estimator_dist.doctor`` and the ``estimator-dist-doctor`` console script: see
``estimator_dist.commands.doctor``."""
from __future__ import annotations

from estimator_dist.commands import cli
from estimator_dist.commands.doctor import main


def script() -> None:
    """Runs the command and ends the process with its exit code (``cli.exit_with``)."""
    cli.exit_with(main)


if __name__ == "__main__":
    script()
