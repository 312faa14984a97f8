"""The CLI's built-in "dense" and "lstm" models use these model_fns with valid params."""
import pytest
import tensorflow as tf

import model_fns
from estimator_dist.export import serving_input_receiver_fn
from estimator_dist.models import MODELS


@pytest.mark.parametrize("name, model_fn", [("dense", model_fns.dense_classifier_model_fn),
                                            ("lstm", model_fns.lstm_model_fn)])
def test_builtin_model_exports_through_its_serving_shapes(name, model_fn):
    model = MODELS[name]
    assert model.model_fn is model_fn
    with tf.Graph().as_default():
        x_shape = model.train_data().features["x"].shape[1:]
        receiver = serving_input_receiver_fn(model.serving_shapes(model.params, x_shape))()
        spec = model.model_fn(receiver.features, None, tf.estimator.ModeKeys.PREDICT,
                              dict(model.params))
    outputs = spec.export_outputs["serving_default"].outputs
    assert "logits" in outputs
    assert (name == "lstm") == ({"state_c", "state_h"} <= set(outputs))
