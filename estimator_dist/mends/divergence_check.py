"""A divergence check in every Estimator training graph a strategy builds (mend
``divergence_check``).

TF 2.15 keeps replicas' copies of a variable equal only when every update goes through
the strategy's aggregation; a per-replica ``assign`` makes them drift apart without an
error. Estimator builds its training spec per replica through the strategy's
``extended.call_for_each_replica``; the mixin here appends a hook (``divergence.
DivergenceHook``) to that spec, so a plain ``tf.estimator.Estimator`` gets the check
without asking.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from estimator_dist.mends import extended

if TYPE_CHECKING:
    import tensorflow as tf


class _WatchedExtended(extended.Mixin):
    """Adds ``self._make_divergence_hook(strategy)`` to the training spec of each replica."""

    def call_for_each_replica(self, fn: Callable[..., Any], args: tuple[Any, ...] = (),
                              kwargs: dict[str, Any] | None = None) -> Any:
        result = super().call_for_each_replica(fn, args, kwargs)
        strategy = self._container_strategy()
        if strategy.num_replicas_in_sync == 1:
            return result
        return extended.with_training_hook(result, self._make_divergence_hook(strategy))


def apply(strategy: tf.distribute.Strategy,
          make_hook: Callable[[tf.distribute.Strategy], tf.compat.v1.train.SessionRunHook]) -> None:
    """Makes ``strategy`` add ``make_hook(strategy)`` to every Estimator training spec."""
    extended.add_mixin(strategy, _WatchedExtended)
    strategy.extended._make_divergence_hook = make_hook
