"""TensorFlow's early-stopping hooks (``tf.estimator.experimental.stop_if_*_hook``,
``make_early_stopping_hook``) under the strategies of ``make_run_config``.

TF 2.15's ``make_early_stopping_hook`` means to pick its multi-worker hook under
``MultiWorkerMirroredStrategy``, but its test of the strategy's class name is a generator
expression, which is always true, so every ``train_distribute`` gets that hook (read in
``tensorflow_estimator/python/estimator/early_stopping.py``). Two failures follow:

* under one process's replicas ("mirrored") the default ``run_every_secs=60`` raises
  "run_every_secs should not be set when using MultiWorkerMirroredStrategy";
* with several replicas in a process the hook's stop op is a ``PerReplica`` value, and
  its first check fails with "TypeError: Argument `fetch` = PerReplica ...".

``install()`` (mend ``early_stopping`` of ``mends.catalogue``, installed by
``make_run_config`` when it builds a strategy) mends both: the
replicas of one process check on a timer of seconds or steps, as without a strategy; a
cluster keeps TensorFlow's rule (every worker must check at the same step, since the stop
signal is summed over workers, so it asks for ``run_every_steps``); and the stop op runs
on every local replica.
"""
from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf
from tensorflow_estimator.python.estimator import early_stopping as tf_early_stopping

from estimator_dist.mends import internals

_MultiWorkerHook = tf_early_stopping._MultiWorkerEarlyStoppingHook
_TF_MAKE_HOOK = tf_early_stopping.make_early_stopping_hook
_TF_BEGIN = _MultiWorkerHook.begin


class _ReplicasEarlyStoppingHook(tf_early_stopping._MultiWorkerEarlyStoppingHook):
    """TensorFlow's multi-worker hook for the replicas of one process: it may check on a
    timer of seconds, because a single process decides for all its replicas."""

    def __init__(self, should_stop_fn: Callable[[], bool], run_every_secs: float) -> None:
        super().__init__(should_stop_fn, run_every_steps=1)
        self._timer = tf.compat.v1.train.SecondOrStepTimer(every_secs=run_every_secs)


def _begin(self: Any) -> None:
    """TensorFlow's ``begin``, with the per-replica stop op grouped into one op."""
    _TF_BEGIN(self)
    strategy = tf.distribute.get_strategy()
    self._stop_op = tf.group(*strategy.experimental_local_results(self._stop_op))


def _one_process(strategy: tf.distribute.Strategy) -> bool:
    return not internals.in_multi_worker_mode(strategy)


def make_early_stopping_hook(estimator: tf.estimator.Estimator, should_stop_fn: Callable[[], bool],
                             run_every_secs: float | None = 60,
                             run_every_steps: int | None = None
                             ) -> tf.compat.v1.train.SessionRunHook:
    """``tf.estimator.experimental.make_early_stopping_hook`` that keeps ``run_every_secs``
    for the replicas of one process."""
    strategy = getattr(getattr(estimator, "config", None), "train_distribute", None)
    if (strategy is None or run_every_secs is None or run_every_steps is not None
            or not _one_process(strategy)):
        return _TF_MAKE_HOOK(estimator, should_stop_fn, run_every_secs, run_every_steps)
    return _ReplicasEarlyStoppingHook(should_stop_fn, run_every_secs)


def install() -> None:
    """Mends TensorFlow's early-stopping hooks under strategies (idempotent): the
    ``stop_if_*_hook`` functions and ``make_early_stopping_hook`` as the public API
    names it."""
    tf_early_stopping.make_early_stopping_hook = make_early_stopping_hook
    for api in (tf.estimator.experimental, tf.compat.v1.estimator.experimental):
        api.make_early_stopping_hook = make_early_stopping_hook
    _MultiWorkerHook.begin = _begin
