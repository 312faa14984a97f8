"""Conversion code run with eager execution on, whatever the program turned off.

Keras 3 builds, runs and saves models only eagerly, and Keras 2 saves HDF5 where TF2
behaviour is off. A legacy program calls ``tf.compat.v1.disable_v2_behavior()`` at the top
of its module, which ``migrate --estimator`` imports, or converts in the middle of its
run: ``eagerly`` runs a conversion function as it runs in a TF2-behaviour program.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar, cast

_Function = TypeVar("_Function", bound=Callable[..., Any])


def eagerly(function: _Function) -> _Function:
    """``function`` run with eager execution on, as Keras 3 builds, runs and saves models
    only eagerly: a legacy program that calls ``tf.compat.v1.disable_v2_behavior()`` (or
    whose module, imported by ``migrate --estimator``, does) converts as any other."""

    @functools.wraps(function)
    def eager(*args: Any, **kwargs: Any) -> Any:
        from estimator_dist.mends import internals  # Late: loads TensorFlow.

        with internals.eager_mode():
            return function(*args, **kwargs)

    return cast(_Function, eager)
