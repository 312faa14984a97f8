"""Collectives without TensorFlow's per-collective timeout, a stall watchdog instead
(mend ``collective_watchdog``).

In TF 2.15 a collective launched with a timeout holds a thread for the whole timeout,
even when it finished long before (``SchedNonBlockingClosureAfter`` in
``base_collective_executor.cc``, read): two multi-worker CLI workers with a 300 s timeout
grew about a thousand threads a second each and aborted at about 30 s. The "multi_worker"
builder gives ``MultiWorkerMirroredStrategy`` the timeout as TensorFlow takes it
(``CommunicationOptions(timeout_seconds=...)``); this mend takes it out of the strategy's
communication options before any collective runs (the strategy's cross-device ops hold
the same options object, read in ``collective_all_reduce_strategy.py``), and the strategy
appends a stall watchdog (``hooks.watchdog.StallWatchdogHook``) to every Estimator
training spec it builds. Turned off, the collectives keep TensorFlow's timeout.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from estimator_dist.mends import extended

if TYPE_CHECKING:
    import tensorflow as tf


class _StallWatchedExtended(extended.Mixin):
    """Adds ``self._make_stall_hook(cluster, me)`` to the training spec of each replica."""

    def call_for_each_replica(self, fn: Callable[..., Any], args: tuple[Any, ...] = (),
                              kwargs: dict[str, Any] | None = None) -> Any:
        result = super().call_for_each_replica(fn, args, kwargs)
        if self._cluster_spec is None:
            return result
        hook = self._make_stall_hook(self._cluster_spec.as_dict(),
                                     f"{self._task_type} {self._task_id}")
        return extended.with_training_hook(result, hook)


def apply(strategy: tf.distribute.Strategy,
          make_hook: Callable[[dict[str, list[str]], str], tf.compat.v1.train.SessionRunHook]
          ) -> None:
    """Makes ``strategy``'s collectives run without a timeout, and ``strategy`` add
    ``make_hook(cluster, me)`` to every Estimator training spec."""
    strategy.extended._communication_options.timeout_seconds = None
    extended.add_mixin(strategy, _StallWatchedExtended)
    strategy.extended._make_stall_hook = make_hook
