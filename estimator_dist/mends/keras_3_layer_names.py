"""Keras 3 layer names counted per graph, as Keras 2 counted them, inside a model_fn.

A model_fn that calls ``tf.keras.layers.Dense(16)`` (the half-migrated habit) names its
variables after the layer: ``dense/kernel``. Keras 2 numbered unnamed layers per graph, so
every graph Estimator builds (train, evaluate, predict, export) named them alike and each
restored the checkpoint. Keras 3, ``tf.keras`` on TensorFlow 2.16+, numbers them per
thread for the life of the process: the evaluation graph's layers become ``dense_2``,
``dense_3`` and its restore fails ("Restoring from checkpoint failed ... Variable name ...
missing from the checkpoint").

This gives each graph its own Keras 3 counters while Estimator calls the model_fn
(``Estimator._call_model_fn``), so a model_fn names its layers the same in every graph.
Layers built outside a model_fn keep Keras 3's process-wide numbering.
"""
from __future__ import annotations

import collections
import functools
import weakref
from typing import Any

_COUNTERS = "object_name_uids"


def install() -> None:
    """Wraps Estimator._call_model_fn (idempotent)."""
    # Late: loads TensorFlow.
    import tensorflow as tf
    from keras.src.backend.common import global_state
    from tensorflow_estimator.python.estimator import estimator

    call_model_fn = estimator.Estimator._call_model_fn
    if getattr(call_model_fn, "_per_graph_keras_names", False):
        return
    per_graph: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()

    @functools.wraps(call_model_fn)
    def _call_model_fn(self: Any, *args: Any, **kwargs: Any) -> Any:
        counters = per_graph.setdefault(tf.compat.v1.get_default_graph(),
                                        collections.defaultdict(int))
        before = global_state.get_global_attribute(_COUNTERS)
        global_state.set_global_attribute(_COUNTERS, counters)
        try:
            return call_model_fn(self, *args, **kwargs)
        finally:
            global_state.set_global_attribute(_COUNTERS, before)

    _call_model_fn._per_graph_keras_names = True  # type: ignore[attr-defined]  # The mark.
    estimator.Estimator._call_model_fn = _call_model_fn
