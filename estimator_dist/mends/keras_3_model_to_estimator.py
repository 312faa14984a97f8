"""``tf.keras.estimator.model_to_estimator`` on TensorFlow 2.16+, where ``tf.keras`` is Keras 3.

Keras 3 has no ``estimator`` module, so a program's ``tf.keras.estimator.model_to_estimator(
keras_model=model)`` stops with an AttributeError that names neither the cause nor the way
out. tensorflow-estimator's ``model_to_estimator`` still converts a tf-keras model (the
Keras 2 it was written for); a Keras 3 model has no Estimator form at all.

This binds ``tf.keras.estimator`` to a module whose ``model_to_estimator`` hands a tf-keras
model (or a saved one, by path) to tensorflow-estimator and refuses a Keras 3 model in one
line that says how to build one tf-keras can convert.
"""
from __future__ import annotations

import types
from typing import Any


def _keras_3(model: Any) -> bool:
    return type(model).__module__.split(".")[0] == "keras"


# keras_model first and optional, as in tensorflow-estimator's own signature.
def model_to_estimator(keras_model: Any = None, *args: Any, **kwargs: Any) -> Any:
    """tensorflow-estimator's ``model_to_estimator`` for tf-keras models; a Keras 3 model is
    refused in one line."""
    if keras_model is not None and _keras_3(keras_model):
        raise ValueError(
            "keras_model must be a tf-keras model for model_to_estimator on TensorFlow 2.16+, "
            "where tf.keras is Keras 3 (which has no Estimator form): build it with `import "
            "tf_keras as keras`, or run with TF_USE_LEGACY_KERAS=1 so that tf.keras is "
            f"tf-keras. Received: keras_model={type(keras_model).__module__}."
            f"{type(keras_model).__name__} {getattr(keras_model, 'name', '')!r}")
    from tensorflow_estimator.python.estimator import keras_lib  # Late: loads TensorFlow.

    return keras_lib.model_to_estimator(keras_model, *args, **kwargs)


def install() -> None:
    """Gives Keras 3's ``tf.keras`` an ``estimator`` module (idempotent)."""
    import tensorflow as tf  # Late: loads TensorFlow.

    if hasattr(tf.keras, "estimator"):  # tf-keras (TF_USE_LEGACY_KERAS=1) has its own.
        return
    module: Any = types.ModuleType(f"{tf.keras.__name__}.estimator", __doc__.splitlines()[0])
    module.model_to_estimator = model_to_estimator
    tf.keras.estimator = module
