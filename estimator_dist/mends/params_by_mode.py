"""A params dict per mode for a plain Estimator (mend ``params_by_mode``).

``tf.estimator.Estimator`` has one ``params`` for every mode, so TPUEstimator's separate
``train_batch_size`` / ``eval_batch_size`` / ``predict_batch_size`` have no place in it.
Estimator reads ``params`` in ``_call_input_fn`` and ``_call_model_fn``; these are wrapped
on the instance, as bound methods, so that Estimator's deep copies (a cluster's workers
train copies) wrap the copy (Estimator refuses subclasses that override its members).
"""
from __future__ import annotations

import contextlib
import types
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

if TYPE_CHECKING:
    import tensorflow as tf


def apply(estimator: tf.estimator.Estimator, by_mode: Mapping[str, Any]) -> None:
    """Makes ``estimator`` hand its input_fn and model_fn ``by_mode[mode]`` as ``params``."""
    estimator._params_by_mode = by_mode
    estimator._call_input_fn = types.MethodType(_call_input_fn_by_mode, estimator)
    estimator._call_model_fn = types.MethodType(_call_model_fn_by_mode, estimator)


@contextlib.contextmanager
def _params_of(estimator: tf.estimator.Estimator, mode: str) -> Iterator[None]:
    kept, estimator._params = estimator._params, estimator._params_by_mode[mode]
    try:
        yield
    finally:
        estimator._params = kept


def _call_input_fn_by_mode(self: tf.estimator.Estimator, input_fn: Callable[..., Any], mode: str,
                           input_context: tf.distribute.InputContext | None = None) -> Any:
    with _params_of(self, mode):
        return type(self)._call_input_fn(self, input_fn, mode, input_context)


def _call_model_fn_by_mode(self: tf.estimator.Estimator, features: Any, labels: Any, mode: str,
                           config: tf.estimator.RunConfig) -> Any:
    with _params_of(self, mode):
        return type(self)._call_model_fn(self, features, labels, mode, config)
