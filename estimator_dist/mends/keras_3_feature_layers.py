"""Keras 2's feature-column layers under Keras 3's ``tf.keras``, from tf-keras.

Model_fns of Estimator code, libraries' among them (tensorflow_ranking's
``encode_features``), build feature columns with Keras 2 layers:
``tf.keras.layers.DenseFeatures``, ``tf.compat.v1.keras.layers.DenseFeatures``,
``tf.keras.experimental.SequenceFeatures``, ``tf.keras.experimental.LinearModel``. Keras 3
(``tf.keras`` on TensorFlow 2.16+) has none of them: "module 'keras._tf_keras.keras.layers'
has no attribute 'DenseFeatures'". tf-keras ships them, as ``TF_USE_LEGACY_KERAS=1`` would
route them, but that also turns the user's own ``tf.keras`` into Keras 2.

This adds the missing names, and only those (a name Keras has is never replaced), to Keras
3's ``tf.keras.layers`` and to a ``tf.keras.experimental`` namespace. Under Keras 3
``tf.compat.v1.keras`` is the same module as ``tf.keras``, so both spellings of
``DenseFeatures`` get tf-keras's TF2 layer, the one ``tf.keras.layers.DenseFeatures`` is on
2.15; it takes the v2 feature columns that ``tf.feature_column`` makes. Under
``TF_USE_LEGACY_KERAS=1`` ``tf.keras`` is tf-keras, which has them all, and nothing changes.
"""
from __future__ import annotations

import importlib
import types
from typing import Any

# (namespace under tf.keras, name): where tf-keras's public API has it.
_LAYERS = {
    ("layers", "DenseFeatures"): ("layers", "DenseFeatures"),
    ("experimental", "SequenceFeatures"): ("experimental", "SequenceFeatures"),
    ("experimental", "LinearModel"): ("experimental", "LinearModel"),
}


def _namespace(keras: Any, name: str) -> Any:
    """``keras.<name>``, made as an empty namespace module when Keras has none."""
    namespace = getattr(keras, name, None)
    if namespace is None:
        namespace = types.ModuleType(f"{keras.__name__}.{name}")
        setattr(keras, name, namespace)
    return namespace


def install() -> None:
    """Adds the feature-column layers Keras 3 lacks (idempotent; never replaces a name)."""
    import tensorflow as tf  # Late: loads TensorFlow.
    import tf_keras

    keras = importlib.import_module(tf.keras.__name__)  # The module, not a lazy loader.
    for (namespace, name), (source, source_name) in _LAYERS.items():
        target = _namespace(keras, namespace)
        if not hasattr(target, name):
            setattr(target, name, getattr(getattr(tf_keras, source), source_name))
