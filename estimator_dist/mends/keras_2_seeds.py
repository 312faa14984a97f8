"""Keras 2 initializers seeded by the RunConfig's ``tf_random_seed`` inside a model_fn.

The defect (TensorFlow 2.15.1 and 2.21.0, plain TF, TF2 behaviour): a model_fn's
``tf.compat.v1.layers.dense`` (a Keras 2 layer: ``keras`` 2.15, ``tf_keras`` on current
TensorFlow) builds its default initializer unseeded, and an unseeded Keras 2 initializer
draws its seed from Python's ``random`` module (``backend.RandomGenerator._create_seed``),
not from the graph seed Estimator sets from ``tf_random_seed``. Every process starts
with other weights, so a seeded run's losses differ from one process to the next. Under
TF1 behaviour (``disable_v2_behavior``) the same layers take the graph seed and agree in
every process, on both ends; so do initializers the model_fn passes itself
(``tf.compat.v1.truncated_normal_initializer``) and runs whose program seeds ``random``.

While Estimator calls a model_fn (``Estimator._call_model_fn``, TPUEstimator's too) with
a config whose ``tf_random_seed`` is set, this gives Keras 2's seed generator (the one
``tf.keras.utils.set_random_seed`` sets) a ``random.Random(tf_random_seed)`` of its own,
and puts the previous one back after: the layers of each graph draw the same seeds in
every process, and nothing outside the model_fn (Python's, NumPy's or TensorFlow's global
seeds) changes. Keras 3 layers (``tf.keras.layers`` on current TensorFlow) are not Keras
2's and keep their own seeding.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import random
from typing import Any, Callable, Iterator

# Keras 2's backend on each end: keras 2.15 beside TensorFlow 2.15, tf_keras beside
# current TensorFlow.
_BACKENDS = ("keras.src.backend", "tf_keras.src.backend")


def _seed_generators() -> list[Any]:
    """The thread-local seed generator holders of the Keras 2 backends installed."""
    holders = []
    for name in _BACKENDS:
        try:
            backend = importlib.import_module(name)
        except ImportError:
            continue
        holder = getattr(backend, "_SEED_GENERATOR", None)
        if holder is not None:  # Keras 3's backend has none.
            holders.append(holder)
    return holders


@contextlib.contextmanager
def seeded(seed: int | None) -> Iterator[None]:
    """Keras 2's seed generators draw from ``random.Random(seed)`` in this thread (nothing
    changes when ``seed`` is None)."""
    if seed is None:
        yield
        return
    holders = _seed_generators()
    kept = [getattr(holder, "generator", None) for holder in holders]
    for holder in holders:
        holder.generator = random.Random(seed)
    try:
        yield
    finally:
        for holder, generator in zip(holders, kept):
            holder.generator = generator


def _seeding(call_model_fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(call_model_fn)
    def _call_model_fn(self: Any, features: Any, labels: Any, mode: str, config: Any) -> Any:
        with seeded(getattr(config, "tf_random_seed", None)):
            return call_model_fn(self, features, labels, mode, config)

    _call_model_fn._seeds_keras_2 = True  # type: ignore[attr-defined]  # The mark.
    return _call_model_fn


def install() -> None:
    """Wraps Estimator._call_model_fn (idempotent)."""
    from tensorflow_estimator.python.estimator import estimator  # Late: loads TensorFlow.

    if not getattr(estimator.Estimator._call_model_fn, "_seeds_keras_2", False):
        estimator.Estimator._call_model_fn = _seeding(estimator.Estimator._call_model_fn)
