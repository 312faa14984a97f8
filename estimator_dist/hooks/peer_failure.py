"""Fail fast when a multi-worker peer is lost, instead of retrying forever.

When a worker of a ``MultiWorkerMirroredStrategy`` cluster dies, the collectives of the
others fail with ``UnavailableError``. Estimator's monitored session treats that error as
a preemption and re-creates the session, but the aborted collective executor never
recovers in the same process ("Restart your program to reset"), so training loops on
the failure without end. ``PeerFailureHook`` ends the run on the first re-created
session, so the process exits non-zero and the cluster manager can restart the job
from its last checkpoint.
"""
import tensorflow as tf


class PeerLostError(RuntimeError):
    """A multi-worker training session failed and cannot recover in this process."""


class PeerFailureHook(tf.estimator.SessionRunHook):
    """Raises ``PeerLostError`` when the training session is created a second time.

    Pass it in ``tf.estimator.TrainSpec(..., hooks=[PeerFailureHook()])`` (or
    ``estimator.train(..., hooks=...)``) under strategy "multi_worker".
    """

    def __init__(self):
        self._sessions = 0

    def after_create_session(self, session, coord):
        del session, coord  # Only the count matters.
        self._sessions += 1
        if self._sessions > 1:
            raise PeerLostError(
                "multi-worker training lost a peer (its collectives failed and the session "
                "had to be re-created); restart every task from the last checkpoint.")
