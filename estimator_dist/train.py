"""``python -m estimator_dist.train`` and the ``estimator-dist-train`` console script: see
``estimator_dist.commands.train``."""
from __future__ import annotations

from estimator_dist.commands import cli
from estimator_dist.commands.train import main


def script() -> None:
    """Runs the command and ends the process with its exit code (``cli.exit_with``)."""
    cli.exit_with(main)


if __name__ == "__main__":
    script()
