"""The built-in models by name, and everything about each one: the one table.

``python -m estimator_dist.train --model NAME`` trains one of them, ``to_keras`` converts
its checkpoints. Each entry names its model_fn's module in ``model_fns`` (the model_fn,
its params table and resolver), the train command's defaults and built-in data, its
serving inputs and the names of its Keras builders in ``conversion/_keras_models.py``
(which the converters and the TF2 engines look up: this table imports nothing above it).
Imports no TensorFlow (the model_fn is loaded on first use), so the command line can list
the names before TensorFlow starts. A new built-in model is one entry here plus its module in
``model_fns/`` and its builders in ``conversion/_keras_models.py``.
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable, Mapping, Sequence

from estimator_dist import datasets
from estimator_dist.errors import entry_of

@dataclasses.dataclass(frozen=True)
class BuiltinModel:
    """Everything the commands need to train, evaluate, export and convert one model.

    Attributes:
      name: the name users pass (``--model name``, ``to_keras(model=name)``).
      module: its module in ``model_fns``: the model_fn, ``PARAMS`` and ``resolve_params``.
      model_fn_name: the model_fn's name in ``module``.
      params: the train command's defaults.
      x_shape: one example's x in files; -1 is read off the files.
      serving_shapes: (params, x_shape) -> feature name -> shape.
      keras_model: the name of its builder in ``conversion/_keras_models.py``: (resolved
        params, ``Checkpoint``) -> (Keras model, layer name -> weights).
      tf2_params: the params the TF2 engines' Keras equivalent expresses
        (``python -m estimator_dist.train --engine keras|loop``); others are refused.
      tf2_model: the name of its builder in ``conversion/_keras_models.py``: (params,
        x_shape of one example) -> a new Keras model, inputs ``{"x"}``, output the logits,
        for the TF2 engines.
    """

    name: str
    module: str
    model_fn_name: str
    params: dict[str, Any]
    batch_size: int
    max_steps: int
    train_data: Callable[[], datasets.Split]
    eval_data: Callable[[], datasets.Split]
    x_shape: tuple[int, ...]
    serving_shapes: Callable[[dict[str, Any], Sequence[int]], dict[str, list[int | None]]]
    keras_model: str
    tf2_params: tuple[str, ...]
    tf2_model: str

    @property
    def model_fn(self) -> Callable[..., Any]:
        return getattr(importlib.import_module(self.module), self.model_fn_name)

    @property
    def params_table(self) -> dict[str, Any]:
        """The model_fn's params: name -> rule and default."""
        return importlib.import_module(self.module).PARAMS

    def resolve_params(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """params -> checked params with defaults (ValueError if not)."""
        return importlib.import_module(self.module).resolve_params(params)


def _lstm_serving_shapes(params: Mapping[str, Any],
                         x_shape: Sequence[int]) -> dict[str, list[int | None]]:
    import model_fns  # Late: loads TensorFlow.

    width = model_fns.lstm_state_width(params)
    return {"x": [None, None, x_shape[-1]], "state_c": [None, width], "state_h": [None, width]}


MODELS = {model.name: model for model in (
    BuiltinModel(
        name="dense",
        module="model_fns.dense",
        model_fn_name="dense_classifier_model_fn",
        params={"hidden_units": [64, 64], "num_classes": 3, "learning_rate": 0.01},
        batch_size=128,
        max_steps=1000,
        train_data=lambda: datasets.blobs(8192, seed=0),
        eval_data=lambda: datasets.blobs(2048, seed=1),
        x_shape=(-1,),
        serving_shapes=lambda params, x_shape: {"x": [None, *x_shape]},
        keras_model="dense",
        tf2_params=("hidden_units", "num_classes", "learning_rate"),
        tf2_model="new_dense",
    ),
    BuiltinModel(
        name="lstm",
        module="model_fns.lstm",
        model_fn_name="lstm_model_fn",
        params={"num_units": 32, "num_classes": 3, "learning_rate": 0.01},
        batch_size=64,
        max_steps=600,
        train_data=lambda: datasets.waves(4096, seed=0),
        eval_data=lambda: datasets.waves(1024, seed=1),
        x_shape=(-1, 1),
        serving_shapes=_lstm_serving_shapes,
        keras_model="lstm",
        tf2_params=("num_units", "num_classes", "learning_rate"),
        tf2_model="new_lstm",
    ),
)}

NAMES = tuple(MODELS)


def model_of(name: str) -> BuiltinModel:
    """Returns the ``BuiltinModel`` named ``name``.

    Raises:
      UsageError (a ValueError): an unknown name, listing the valid ones.
    """
    return entry_of(MODELS, "model", name)
