"""TPUEstimator on CPU (``use_tpu=False``) logs every ``log_step_count_steps`` steps, not
every step (mend ``tpu_validate_logging``).

TPUEstimator divides ``log_step_count_steps`` by ``iterations_per_loop``, because on a TPU
one ``Session.run`` runs that many steps; on CPU it runs one. So with the defaults (100
and 100) its examples/s and global_step/s summaries come every step: two events a step,
an events file that grows by hundreds of MiB an hour. Read by a TPUEstimator on CPU, the
config's ``log_step_count_steps`` here is multiplied by ``iterations_per_loop``, so the
division gives back what was asked for.
"""
from __future__ import annotations

import sys

import tensorflow as tf

from estimator_dist.mends import extended


class _LogsByStepOnCpu(extended.Mixin):
    """``log_step_count_steps`` that TPUEstimator's division on CPU gives back."""

    @property
    def log_step_count_steps(self) -> int | None:
        steps = super().log_step_count_steps
        iterations = self.tpu_config.iterations_per_loop
        owner = sys._getframe(1).f_locals.get("self")
        if (steps and not self.use_tpu and isinstance(iterations, int)
                and isinstance(owner, tf.compat.v1.estimator.tpu.TPUEstimator)):
            return steps * iterations
        return steps


def apply(config: tf.estimator.RunConfig) -> None:
    """Makes the TPU RunConfig ``config`` keep its logging interval on CPU (idempotent)."""
    extended.mix_into(config, _LogsByStepOnCpu)
