"""The model built once in a scratch graph, before the model dir is touched: params its
model_fn refuses, and data whose ``x`` would give variables other shapes than the
checkpoint a resume restores (Estimator would fail on restore, after writing the model
dir)."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import tensorflow as tf

from estimator_dist.errors import UsageError

if TYPE_CHECKING:
    from estimator_dist.job.settings import RunSettings
    from estimator_dist.models import BuiltinModel


def _variable_shapes(model: BuiltinModel, params: Mapping[str, Any], features: Mapping[str, Any],
                     labels: Any) -> dict[str, list[int]]:
    """Builds ``model``'s TRAIN graph in a scratch graph; returns variable name -> shape."""
    with tf.Graph().as_default():
        tf.compat.v1.train.create_global_step()
        model.model_fn({k: tf.constant(v) for k, v in features.items()}, tf.constant(labels),
                       tf.estimator.ModeKeys.TRAIN, dict(params))
        return {v.op.name: v.shape.as_list() for v in tf.compat.v1.global_variables()}


def check_params(model: BuiltinModel, params: Mapping[str, Any]) -> None:
    """Builds ``model`` once in a scratch graph, so that params its model_fn refuses fail
    before the model dir is touched.

    Raises:
      UsageError: the model_fn's own message about the params.
    """
    data = model.train_data()
    try:
        _variable_shapes(model, params, {k: v[:1] for k, v in data.features.items()},
                         data.labels[:1])
    except ValueError as error:
        raise UsageError(f"params must suit model_fn {model.model_fn.__name__}: "
                         f"{error}") from None


def check_fits_checkpoint(model: BuiltinModel, settings: RunSettings, x_shape: Sequence[int],
                          checkpoint: str) -> None:
    """Refuses data whose ``x`` would build variables of other shapes than ``checkpoint``'s
    (Estimator would fail on restore, after the model dir was written)."""
    built = _variable_shapes(model, settings.params, {"x": np.zeros([1, *x_shape], np.float32)},
                             np.zeros([1], np.int64))
    for name, shape in tf.train.list_variables(checkpoint):
        if name in built and built[name] != shape:
            source = "train_data" if settings.train_data else "the built-in data"
            raise UsageError(
                f"{source} must give x the shape the checkpoint was trained on; resume with "
                f"the recorded data or use a new --model-dir. Received: x of shape {x_shape} "
                f"(variable {name} is {shape} in {os.path.basename(checkpoint)}, "
                f"{built[name]} with this data)")
