"""Batch norm's moving statistics as mirrored variables (mend ``batch_norm_statistics``).

Batch norm keeps its moving statistics in per-replica (``ON_READ``) ``MEAN`` variables.
Under MultiWorkerMirroredStrategy in TF 2.15 the chief reads them to save a checkpoint,
which averages them across workers in a collective the other workers never join, so the
save waits until the collective timeout. As mirrored (``ON_WRITE``) ``MEAN`` variables each
update is averaged across workers as it is made, so every copy holds the mean, and saving
needs no collective. For a moving average (linear in its inputs, starting from the same
value everywhere) the average of the workers' averages, which reading the ``ON_READ``
variable gives, equals the average of the averaged inputs.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import tensorflow as tf

from estimator_dist.mends import extended


def _mean_variables_on_write(next_creator: Callable[..., tf.Variable],
                             **kwargs: Any) -> tf.Variable:
    """Creates a per-replica (``ON_READ``) ``MEAN`` variable as a mirrored one."""
    if (kwargs.get("synchronization") == tf.VariableSynchronization.ON_READ
            and kwargs.get("aggregation") == tf.VariableAggregation.MEAN):
        kwargs["synchronization"] = tf.VariableSynchronization.ON_WRITE
    return next_creator(**kwargs)


class _MeanOnWriteScope(extended.Mixin):
    """A strategy whose ``scope()`` creates ``ON_READ`` ``MEAN`` variables ``ON_WRITE``."""

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        with super().scope(), tf.compat.v1.variable_creator_scope(_mean_variables_on_write):
            yield


def apply(strategy: tf.distribute.Strategy) -> None:
    """Makes ``strategy.scope()`` create batch norm's statistics mirrored (idempotent)."""
    extended.mix_into(strategy, _MeanOnWriteScope)
