"""A TPU RunConfig refuses a plain Estimator (mend ``tpu_estimator_guard``).

Every Estimator reads ``config.train_distribute`` in its constructor. A plain
``tf.estimator.Estimator`` given a TPUEstimator RunConfig in TF 2.15 trains on the host CPU
without a word; the property here looks at the frame that reads it and refuses such an
Estimator (a ``TPUEstimator`` reads it too, and passes).
"""
from __future__ import annotations

import sys

import tensorflow as tf

from estimator_dist.errors import UsageError
from estimator_dist.mends import extended


class _RefusesPlainEstimator(extended.Mixin):
    """``train_distribute`` that refuses a plain Estimator reading it."""

    @property
    def train_distribute(self) -> None:
        """None, as for any TPUEstimator config; refuses a plain Estimator."""
        owner = sys._getframe(1).f_locals.get("self")
        if (isinstance(owner, tf.compat.v1.estimator.Estimator)
                and not isinstance(owner, tf.compat.v1.estimator.tpu.TPUEstimator)):
            raise UsageError(
                "strategy 'tpu' needs a TPUEstimator: build it with "
                "estimator_dist.make_estimator(model_fn, config, params, batch_size=GLOBAL_BATCH). "
                f"Received: {type(owner).__name__}")
        return super().train_distribute


def apply(config: tf.estimator.RunConfig) -> None:
    """Makes the TPU RunConfig ``config`` refuse a plain Estimator (idempotent)."""
    extended.mix_into(config, _RefusesPlainEstimator)
