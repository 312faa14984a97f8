"""The launcher's side of ``training_end``: the file it creates once every chief and
worker of a run has exited 0, so that the evaluator, which no checkpoint at
``TrainSpec.max_steps`` may ever end, evaluates the newest one and ends."""
from __future__ import annotations

import os
import shutil
import tempfile

from estimator_dist import training_end


class TrainingEnded:
    """The file of one launch (in a directory of its own, removed by ``close``)."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="estimator-dist-launch-")
        self.path = os.path.join(self._dir, "training-ended")

    def env(self) -> dict[str, str]:
        """The environment variable every task gets."""
        return {training_end.ENV: self.path}

    def mark(self) -> None:
        """Says that training has ended (idempotent)."""
        if not os.path.exists(self.path):
            with open(self.path, "w", encoding="utf-8"):
                pass

    def reset(self) -> None:
        """Before a restart: training runs again."""
        if os.path.exists(self.path):
            os.remove(self.path)

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)
