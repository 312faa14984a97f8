"""The CLI's built-in models: model_fn, default params, built-in data and serving inputs."""
import dataclasses
from typing import Callable

import model_fns
from estimator_dist import datasets


@dataclasses.dataclass(frozen=True)
class BuiltinModel:
    """Everything the CLI needs to train, evaluate and export one model."""

    model_fn: Callable
    params_table: dict  # The model_fn's params: name -> rule and default.
    resolve_params: Callable  # params -> checked params with defaults (ValueError if not).
    params: dict  # The CLI's defaults.
    batch_size: int
    max_steps: int
    train_data: Callable
    eval_data: Callable
    x_shape: tuple  # One example's x in files; -1 is read off the files.
    serving_shapes: Callable  # (params, x_shape) -> feature name -> shape


MODELS = {
    "dense": BuiltinModel(
        model_fn=model_fns.dense_classifier_model_fn,
        params_table=model_fns.dense.PARAMS,
        resolve_params=model_fns.dense.resolve_params,
        params={"hidden_units": [64, 64], "num_classes": 3, "learning_rate": 0.01},
        batch_size=128,
        max_steps=1000,
        train_data=lambda: datasets.blobs(8192, seed=0),
        eval_data=lambda: datasets.blobs(2048, seed=1),
        x_shape=(-1,),
        serving_shapes=lambda params, x_shape: {"x": [None, *x_shape]},
    ),
    "lstm": BuiltinModel(
        model_fn=model_fns.lstm_model_fn,
        params_table=model_fns.lstm.PARAMS,
        resolve_params=model_fns.lstm.resolve_params,
        params={"num_units": 32, "num_classes": 3, "learning_rate": 0.01},
        batch_size=64,
        max_steps=600,
        train_data=lambda: datasets.waves(4096, seed=0),
        eval_data=lambda: datasets.waves(1024, seed=1),
        x_shape=(-1, 1),
        serving_shapes=lambda params, x_shape: {
            "x": [None, None, x_shape[-1]],
            "state_c": [None, params.get("num_layers", 1) * params["num_units"]],
            "state_h": [None, params.get("num_layers", 1) * params["num_units"]],
        },
    ),
}
