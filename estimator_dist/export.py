"""Serving input receivers and SavedModel export."""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import tensorflow as tf

v1 = tf.compat.v1


def serving_input_receiver_fn(feature_shapes: Mapping[str, Sequence[int | None]]
                              ) -> Callable[[], tf.estimator.export.ServingInputReceiver]:
    """A receiver with one float32 placeholder per feature.

    Args:
      feature_shapes: feature name -> shape, ``None`` for a dimension that varies from
        call to call (the batch, an LSTM's time axis).
    """

    def receiver_fn() -> tf.estimator.export.ServingInputReceiver:
        inputs = {name: v1.placeholder(tf.float32, shape, name=name)
                  for name, shape in feature_shapes.items()}
        return tf.estimator.export.ServingInputReceiver(inputs, inputs)

    return receiver_fn


def export_saved_model(estimator: tf.estimator.Estimator, export_dir_base: str,
                       feature_shapes: Mapping[str, Sequence[int | None]]) -> str:
    """Exports the latest checkpoint; returns the SavedModel's path as a str."""
    path = estimator.export_saved_model(export_dir_base,
                                        serving_input_receiver_fn(feature_shapes))
    return path.decode() if isinstance(path, bytes) else path
