"""Checks on the features a model_fn receives: presence, rank and known dimensions."""
from __future__ import annotations

from typing import Any, Sequence, Union

import tensorflow as tf

# What a model_fn receives as features: a dict of tensors, or one tensor (feature ``x``).
Features = Union[tf.Tensor, dict[str, tf.Tensor]]


def _shape_error(name: str, shape_text: str, tensor: tf.Tensor) -> ValueError:
    return ValueError(f"{name} must be a tensor of shape {shape_text}. "
                      f"Received: {name} with shape {tensor.shape}")


def _checked(name: str, tensor: Any, shape_text: str, dims: Sequence[int | None],
             dtype: tf.DType) -> tf.Tensor:
    """``tensor`` cast to ``dtype`` once its static shape fits ``dims``.

    ``dims`` has one entry per axis: an int the axis must equal when known, or None.
    """
    tensor = tf.convert_to_tensor(tensor)
    if tensor.shape.rank != len(dims):
        raise _shape_error(name, shape_text, tensor)
    for want, have in zip(dims, tensor.shape.as_list()):
        if want is not None and have is not None and want != have:
            raise _shape_error(name, shape_text, tensor)
    return tf.cast(tensor, dtype)


def required(features: Features, name: str, shape_text: str, dims: Sequence[int | None],
             dtype: tf.DType = tf.float32) -> tf.Tensor:
    """Feature ``name`` checked against ``dims`` (see ``_checked``).

    A bare tensor in place of the features dict is taken as feature ``x``.

    Raises:
      ValueError: the feature is missing or its shape does not fit, naming the feature
        and the shape expected.
    """
    if not isinstance(features, dict):
        features = {"x": features}
    if name not in features:
        raise ValueError(f"features must contain {name}, a tensor of shape {shape_text}. "
                         f"Received: features with keys {sorted(features)}")
    return _checked(name, features[name], shape_text, dims, dtype)


def optional(features: Features, name: str, shape_text: str, dims: Sequence[int | None],
             dtype: tf.DType = tf.float32) -> tf.Tensor | None:
    """Like ``required``, but None when the feature is absent."""
    if not isinstance(features, dict) or name not in features:
        return None
    return _checked(name, features[name], shape_text, dims, dtype)
