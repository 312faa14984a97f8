"""The LSTM forward pass against a NumPy BasicLSTMCell with the same weights."""
import numpy as np
import pytest
import tensorflow as tf

import model_fns
from tests.model_fns import harness

v1 = tf.compat.v1
BATCH, TIME, DIM, UNITS, CLASSES = 3, 5, 2, 4, 3


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _reference(weights, x, c, h, sequence_length, num_layers):
    """BasicLSTMCell by hand: gates i, j, f, o of concat([x, h]) @ kernel + bias.

    c' = c * sigmoid(f + 1) + sigmoid(i) * tanh(j); h' = tanh(c') * sigmoid(o). Past a
    row's sequence_length its state stays and its output is zero. Returns the logits of
    the last valid step and the final state, per layer concatenated.
    """
    scopes = ["rnn"] if num_layers == 1 else [f"rnn/multi_rnn_cell/cell_{i}"
                                             for i in range(num_layers)]
    inputs = x.astype(np.float64)
    final_c, final_h = [], []
    for layer, scope in enumerate(scopes):
        kernel = weights[f"{scope}/basic_lstm_cell/kernel"]
        bias = weights[f"{scope}/basic_lstm_cell/bias"]
        lc = c[:, layer * UNITS:(layer + 1) * UNITS].astype(np.float64)
        lh = h[:, layer * UNITS:(layer + 1) * UNITS].astype(np.float64)
        outputs = np.zeros(inputs.shape[:2] + (UNITS,))
        for t in range(TIME):
            i, j, f, o = np.split(np.concatenate([inputs[:, t], lh], 1) @ kernel + bias, 4, 1)
            new_c = lc * _sigmoid(f + 1.0) + _sigmoid(i) * np.tanh(j)
            new_h = np.tanh(new_c) * _sigmoid(o)
            live = (t < sequence_length)[:, None]
            lc, lh = np.where(live, new_c, lc), np.where(live, new_h, lh)
            outputs[:, t] = np.where(live, new_h, 0.0)
        inputs = outputs
        final_c.append(lc)
        final_h.append(lh)
    last = outputs[np.arange(BATCH), sequence_length - 1]
    logits = last @ weights["logits/kernel"] + weights["logits/bias"]
    return logits, np.concatenate(final_c, 1), np.concatenate(final_h, 1)


def _model_fn_outputs(features, num_layers):
    """Predictions of lstm_model_fn with random weights, and those weights."""
    params = {"num_units": UNITS, "num_classes": CLASSES, "learning_rate": 0.1,
              "num_layers": num_layers}
    with tf.Graph().as_default():
        spec = model_fns.lstm_model_fn(
            {k: tf.constant(v) for k, v in features.items()}, None,
            tf.estimator.ModeKeys.PREDICT, params)
        rng = np.random.default_rng(7)
        with v1.Session() as session:
            weights = {}
            for variable in v1.global_variables():
                value = rng.normal(0.0, 0.5, variable.shape).astype(np.float32)
                variable.load(value, session)
                weights[variable.op.name] = value.astype(np.float64)
            return session.run(spec.predictions), weights


@pytest.mark.parametrize("num_layers", [1, 2])
def test_lstm_forward_matches_numpy_reference(num_layers):
    state_size = UNITS * num_layers
    features = {"x": harness.floats(BATCH, TIME, DIM),
                "state_c": harness.floats(BATCH, state_size, seed=1),
                "state_h": harness.floats(BATCH, state_size, seed=2),
                "sequence_length": np.array([TIME, 2, 4], np.int32)}
    predictions, weights = _model_fn_outputs(features, num_layers)
    logits, c, h = _reference(weights, features["x"], features["state_c"], features["state_h"],
                              features["sequence_length"], num_layers)
    np.testing.assert_allclose(predictions["logits"], logits, atol=1e-5)
    np.testing.assert_allclose(predictions["state_c"], c, atol=1e-5)
    np.testing.assert_allclose(predictions["state_h"], h, atol=1e-5)


def test_lstm_without_state_features_starts_from_zeros():
    features = {"x": harness.floats(BATCH, TIME, DIM)}
    predictions, weights = _model_fn_outputs(features, 1)
    zeros = np.zeros((BATCH, UNITS), np.float32)
    _, c, h = _reference(weights, features["x"], zeros, zeros, np.full(BATCH, TIME), 1)
    np.testing.assert_allclose(predictions["state_c"], c, atol=1e-5)
    np.testing.assert_allclose(predictions["state_h"], h, atol=1e-5)
