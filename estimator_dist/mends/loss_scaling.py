"""Dynamic loss scaling for the v1 optimizers a model_fn builds, under mixed float16.

Float16 gradients underflow unless the loss is scaled up before the gradients are taken
and the gradients scaled down after. TensorFlow 2.15 does this for v1 optimizers in
``tf.compat.v1.mixed_precision.MixedPrecisionLossScaleOptimizer``, which
``enable_mixed_precision_graph_rewrite(opt)`` wraps around an optimizer handed to it
(read in ``tensorflow/python/training/experimental/mixed_precision.py``). An Estimator's
model_fn builds its optimizer itself, where no caller can hand it over; Estimator gives no
optimizer hook either.

``install()`` (called by ``make_run_config`` for ``mixed_precision="float16"``) reaches
it at the one call every Estimator makes, ``Estimator._call_model_fn``: while a TRAIN
model_fn of a config with ``mixed_precision == "float16"`` runs (in each replica's
thread under a strategy), ``tf.compat.v1.train.Optimizer.compute_gradients`` and
``apply_gradients`` go through a ``MixedPrecisionLossScaleOptimizer`` made for that
optimizer, with TensorFlow's dynamic loss scale (start 2**15, halved and the step skipped
when a gradient is not finite, doubled after 2,000 finite steps). Its two variables
(``current_loss_scale``, ``good_steps``) are float32 and go into the checkpoint.
``minimize`` and gradient clipping between ``compute_gradients`` and ``apply_gradients``
both see unscaled gradients. Limits: an optimizer that overrides ``compute_gradients``
or ``apply_gradients`` without calling the base class's, and gradients taken with
``tf.gradients`` directly, are not scaled.
"""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable

import tensorflow as tf
from tensorflow.python.training.experimental import loss_scale_optimizer
from tensorflow_estimator.python.estimator import estimator as estimator_lib

from estimator_dist import run_config_facts

_Optimizer = tf.compat.v1.train.Optimizer
_TF_COMPUTE_GRADIENTS = _Optimizer.compute_gradients
_TF_APPLY_GRADIENTS = _Optimizer.apply_gradients
_SCALING = threading.local()  # .active: a float16 TRAIN model_fn runs in this thread.
_WRAPPER_ATTR = "_estimator_dist_loss_scale_optimizer"


class _Unscaled:
    """``optimizer`` with TensorFlow's own gradient methods, for the wrapper to call."""

    def __init__(self, optimizer: tf.compat.v1.train.Optimizer) -> None:
        self._optimizer = optimizer

    def compute_gradients(self, *args: Any, **kwargs: Any) -> Any:
        return _TF_COMPUTE_GRADIENTS(self._optimizer, *args, **kwargs)

    def apply_gradients(self, *args: Any, **kwargs: Any) -> Any:
        return _TF_APPLY_GRADIENTS(self._optimizer, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._optimizer, name)


def loss_scale_optimizer_of(optimizer: tf.compat.v1.train.Optimizer) -> Any:
    """The ``MixedPrecisionLossScaleOptimizer`` (dynamic loss scale) for ``optimizer``,
    made on first use."""
    wrapper = optimizer.__dict__.get(_WRAPPER_ATTR)
    if wrapper is None:
        wrapper = loss_scale_optimizer.MixedPrecisionLossScaleOptimizer(optimizer, "dynamic")
        wrapper._optimizer = _Unscaled(optimizer)
        setattr(optimizer, _WRAPPER_ATTR, wrapper)
    return wrapper


def _scaling(optimizer: tf.compat.v1.train.Optimizer) -> bool:
    return (getattr(_SCALING, "active", False)
            and not isinstance(optimizer, loss_scale_optimizer.MixedPrecisionLossScaleOptimizer))


def _compute_gradients(self: tf.compat.v1.train.Optimizer, *args: Any, **kwargs: Any) -> Any:
    if _scaling(self):
        return loss_scale_optimizer_of(self).compute_gradients(*args, **kwargs)
    return _TF_COMPUTE_GRADIENTS(self, *args, **kwargs)


def _apply_gradients(self: tf.compat.v1.train.Optimizer, *args: Any, **kwargs: Any) -> Any:
    if _scaling(self):
        return loss_scale_optimizer_of(self).apply_gradients(*args, **kwargs)
    return _TF_APPLY_GRADIENTS(self, *args, **kwargs)


class scaled:  # Lower case: used as a function, ``with scaled():``.
    """Context in which the v1 optimizers of this thread scale their loss dynamically."""

    def __enter__(self) -> scaled:
        self._outer = getattr(_SCALING, "active", False)
        _SCALING.active = True
        return self

    def __exit__(self, *exc: object) -> None:
        _SCALING.active = self._outer


def _scaling_float16(call_model_fn: Callable[..., Any]) -> Callable[..., Any]:
    """``call_model_fn`` (``Estimator._call_model_fn`` as installed, other mends' wrappers
    included) scaling the loss of a float16 TRAIN model_fn."""

    @functools.wraps(call_model_fn)
    def _call_model_fn(self: tf.estimator.Estimator, features: Any, labels: Any, mode: str,
                       config: tf.estimator.RunConfig) -> Any:
        if (mode != tf.estimator.ModeKeys.TRAIN
                or run_config_facts.mixed_precision_of(config) != "float16"):
            return call_model_fn(self, features, labels, mode, config)
        with scaled():
            return call_model_fn(self, features, labels, mode, config)

    _call_model_fn._scales_float16_loss = True  # type: ignore[attr-defined]  # The mark.
    return _call_model_fn


def install() -> None:
    """Scales the loss of v1 optimizers in float16 TRAIN model_fns (idempotent)."""
    call_model_fn = estimator_lib.Estimator._call_model_fn
    if not getattr(call_model_fn, "_scales_float16_loss", False):
        estimator_lib.Estimator._call_model_fn = _scaling_float16(call_model_fn)
    _Optimizer.compute_gradients = _compute_gradients
    _Optimizer.apply_gradients = _apply_gradients
