"""The built-in models as Keras models, their weights read from an Estimator checkpoint.

One builder per built-in model (``models.BuiltinModel.keras_model``): ``(resolved params,
Checkpoint, keras) -> (Keras model, layer name -> weights)``, its layers named as in the
checkpoint, built with the Keras module ``keras`` (``tf.keras``, or ``tf_keras`` for Keras 2
on TensorFlow 2.16+: ``keras_conversion.keras_module``); and one that builds it new for the
TF2 engines (``BuiltinModel.tf2_model``): ``(params, x_shape) -> Keras model``, inputs
``{"x"}``, output the logits. Imports no TensorFlow until a builder runs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from estimator_dist.errors import UsageError

if TYPE_CHECKING:
    import numpy as np
    import tensorflow as tf

_BATCH_NORM_EPSILON = 1e-3  # tf.compat.v1.layers.batch_normalization's default.


class Checkpoint:
    """The variables of one checkpoint, each read on request."""

    def __init__(self, path: str, model: str) -> None:
        import tensorflow as tf  # Late: loads TensorFlow.

        self.path, self.model = path, model
        self._reader = tf.train.load_checkpoint(path)

    def __getitem__(self, name: str) -> np.ndarray:
        if not self._reader.has_tensor(name):
            raise UsageError(
                f"checkpoint must hold variable {name!r}, as the {self.model!r} model of "
                f"estimator_dist.train lays it out. Received: checkpoint={self.path!r} "
                "without it")
        return self._reader.get_tensor(name)


def dense(params: Mapping[str, Any], checkpoint: Checkpoint,
          keras: Any) -> tuple[Any, dict[str, list[np.ndarray]]]:
    hidden, batch_norm = params["hidden_units"], params["batch_norm"]
    first = "hidden_0" if hidden else "logits"
    x = keras.Input([checkpoint[f"{first}/kernel"].shape[0]], name="x")
    net, weights = x, {}
    for i, units in enumerate(hidden):
        name = f"hidden_{i}"
        net = keras.layers.Dense(units, use_bias=not batch_norm, name=name)(net)
        weights[name] = [checkpoint[f"{name}/kernel"]]
        if not batch_norm:
            weights[name].append(checkpoint[f"{name}/bias"])
        else:
            name = f"batch_norm_{i}"
            net = keras.layers.BatchNormalization(epsilon=_BATCH_NORM_EPSILON, name=name)(net)
            weights[name] = [checkpoint[f"{name}/{v}"]
                             for v in ("gamma", "beta", "moving_mean", "moving_variance")]
        net = keras.layers.ReLU(name=f"relu_{i}")(net)
        if params["dropout"]:
            net = keras.layers.Dropout(params["dropout"], name=f"dropout_{i}")(net)
    logits = keras.layers.Dense(params["num_classes"], name="logits")(net)
    weights["logits"] = [checkpoint["logits/kernel"], checkpoint["logits/bias"]]
    return keras.Model({"x": x}, {"logits": logits}, name="dense_classifier"), weights


def lstm(params: Mapping[str, Any], checkpoint: Checkpoint,
         keras: Any) -> tuple[Any, dict[str, list[np.ndarray]]]:
    from estimator_dist.conversion import _keras_lstm  # Late: loads TensorFlow.

    import model_fns  # Late: loads TensorFlow.

    num_units, num_layers = params["num_units"], params["num_layers"]
    scopes = model_fns.lstm_cell_scopes(num_layers)
    input_dim = checkpoint[f"{scopes[0]}/kernel"].shape[0] - num_units
    x = keras.Input([None, input_dim], name="x")
    state_c = keras.Input([model_fns.lstm_state_width(params)], name="state_c")
    state_h = keras.Input([model_fns.lstm_state_width(params)], name="state_h")
    outputs, final_c, final_h = _keras_lstm.lstm_stack(
        x, state_c, state_h, num_units=num_units, num_layers=num_layers,
        return_sequences=params["output"] == "sequence", dropout=params["dropout"],
        keras=keras)
    width = params["num_classes"] if params["task"] == "classification" else params["num_outputs"]
    logits = keras.layers.Dense(width, name="logits")(outputs)
    weights = {"logits": [checkpoint["logits/kernel"], checkpoint["logits/bias"]]}
    for layer, scope in enumerate(scopes):
        layer_input = input_dim if layer == 0 else num_units
        weights[f"lstm_{layer}"] = _keras_lstm.keras_lstm_weights(
            checkpoint[f"{scope}/kernel"], checkpoint[f"{scope}/bias"], input_dim=layer_input)
    model = keras.Model({"x": x, "state_c": state_c, "state_h": state_h},
                           {"logits": logits, "state_c": final_c, "state_h": final_h},
                           name="lstm")
    return model, weights


def new_dense(params: Mapping[str, Any], x_shape: Sequence[int]) -> tf.keras.Model:
    import tensorflow as tf  # Late: loads TensorFlow.

    x = tf.keras.Input(list(x_shape), name="x")
    net = x
    for i, units in enumerate(params["hidden_units"]):
        net = tf.keras.layers.Dense(units, activation="relu", name=f"hidden_{i}")(net)
    logits = tf.keras.layers.Dense(params["num_classes"], name="logits")(net)
    return tf.keras.Model({"x": x}, logits)


def new_lstm(params: Mapping[str, Any], x_shape: Sequence[int]) -> tf.keras.Model:
    import tensorflow as tf  # Late: loads TensorFlow.

    x = tf.keras.Input(list(x_shape), name="x")
    net = tf.keras.layers.LSTM(params["num_units"], name="lstm_0")(x)
    logits = tf.keras.layers.Dense(params["num_classes"], name="logits")(net)
    return tf.keras.Model({"x": x}, logits)
