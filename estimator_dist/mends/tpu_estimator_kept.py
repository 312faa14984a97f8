"""A ``TPUEstimator(...)`` constructor kept as written, given a config of another strategy.

A TPUEstimator program moved to mirrored or multi_worker by its config line alone hands
``TPUEstimator`` a ``RunConfig`` from ``make_run_config``, and TF 2.15 refuses it:
"`config` must be provided with type `tpu_config.RunConfig`" (``TPUEstimator.__init__``,
checked on tensorflow-estimator 2.15.0).

``install(build)`` (applied by ``make_run_config`` for every strategy but "tpu") gives
``TPUEstimator`` a ``__new__`` that returns ``build(...)`` of the constructor's arguments
when that is an Estimator: ``estimator.kept_tpu_estimator``, which builds what
``estimator_dist.make_estimator`` builds for a strategy config, and returns None for any
other config, which then reaches TensorFlow's constructor unchanged. ``build`` comes from
the layer above (``mends.provide``), which imports this one.
"""
from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

_TPU_ESTIMATOR = tf.compat.v1.estimator.tpu.TPUEstimator


def install(build: Callable[..., Any]) -> None:
    """Lets ``TPUEstimator(...)`` return ``build(...)`` of its arguments where that is not
    None (idempotent)."""

    def kept_new(cls: type, *args: Any, **kwargs: Any) -> Any:
        estimator = build(*args, **kwargs)
        return object.__new__(cls) if estimator is None else estimator

    _TPU_ESTIMATOR.__new__ = staticmethod(kept_new)
