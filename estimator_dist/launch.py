"""``python -m estimator_dist.launch`` and the ``estimator-dist-launch`` console script: see
``estimator_dist.commands.launch``."""
from __future__ import annotations

import sys

from estimator_dist.commands import cli, logs

# Before the command's modules import TensorFlow, which reads its log level once.
logs.quiet_unless_verbose(sys.argv[1:])
from estimator_dist.commands.launch import main  # noqa: E402


def script() -> None:
    """Runs the command and ends the process with its exit code (``cli.exit_with``)."""
    cli.exit_with(main)


if __name__ == "__main__":
    script()
