"""How the launcher tells an evaluator that training has ended.

An evaluator sees no other process: it learns of the training only through checkpoints,
and a training that stops before ``TrainSpec.max_steps`` (its input ran out, a step
bound of its own) writes no checkpoint it would recognise as the last. The launcher
knows: it gives every task the environment variable ``ENV``, naming a file it creates
once every chief and worker of the run has exited 0 (no checkpoint will come after), and
removes before each restart. The evaluator (mend ``evaluator_end``) then evaluates the
newest checkpoint, if not evaluated yet, and ends.

Plain text and ``os`` only: the launcher imports neither TensorFlow nor numpy.
"""
from __future__ import annotations

import os

ENV = "ESTIMATOR_DIST_TRAINING_ENDED"


def told() -> bool:
    """Whether this process runs under a launcher that will say when training ends."""
    return bool(os.environ.get(ENV))


def ended() -> bool:
    """Whether the launcher has said that every chief and worker has exited 0."""
    path = os.environ.get(ENV)
    return bool(path) and os.path.exists(str(path))
