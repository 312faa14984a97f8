"""Checkpoints of a plain BasicLSTMCell model_fn load into lstm_model_fn."""
import numpy as np
import pytest
import tensorflow as tf

import estimator_dist
import model_fns
from tests.model_fns import harness

v1 = tf.compat.v1
UNITS, CLASSES = 6, 3


def plain_basic_lstm_model_fn(features, labels, mode, params):
    """The usual TF1 model_fn: BasicLSTMCell (or a MultiRNNCell of them) + dynamic_rnn."""
    cells = [v1.nn.rnn_cell.BasicLSTMCell(UNITS) for _ in range(params["num_layers"])]
    cell = cells[0] if len(cells) == 1 else v1.nn.rnn_cell.MultiRNNCell(cells)
    outputs, _ = v1.nn.dynamic_rnn(cell, features["x"], dtype=tf.float32, scope="rnn")
    logits = v1.layers.dense(outputs[:, -1], CLASSES, name="logits")
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"logits": logits})
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = v1.train.AdamOptimizer(0.05).minimize(loss, v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.slow
def test_basic_lstm_checkpoint_loads_into_lstm_model_fn(model_dir, num_layers):
    features, labels = {"x": harness.floats(16, 5, 2)}, harness.classes(16, CLASSES)
    train = harness.from_arrays(features, labels, batch_size=8, seed=0)
    predict = harness.from_arrays(features, batch_size=8, shuffle=False, num_epochs=1)
    config = estimator_dist.make_run_config("default", model_dir=model_dir, tf_random_seed=3)
    params = {"num_layers": num_layers}
    old = tf.estimator.Estimator(plain_basic_lstm_model_fn, config=config, params=params)
    old.train(train, max_steps=2)
    new = tf.estimator.Estimator(model_fns.lstm_model_fn, config=config, params={
        "num_units": UNITS, "num_classes": CLASSES, "learning_rate": 0.05, **params})

    old_logits = np.array([p["logits"] for p in old.predict(predict)])
    new_logits = np.array([p["logits"] for p in new.predict(predict)])
    np.testing.assert_allclose(new_logits, old_logits, atol=1e-6)
    assert np.abs(old_logits).max() > 0.0
    new.train(train, max_steps=3)  # Adam's slots load too: training resumes.
    assert new.get_variable_value("global_step") == 3


@pytest.mark.parametrize("num_layers", [1, 3])
@pytest.mark.slow
def test_lstm_cell_scopes_name_the_model_fns_variables(num_layers):
    """The public layout facts (``model_fns.lstm_cell_scopes``) match the graph."""
    with tf.Graph().as_default():
        tf.compat.v1.train.create_global_step()
        model_fns.lstm_model_fn({"x": tf.zeros([2, 5, 3])}, tf.zeros([2], tf.int64),
                                tf.estimator.ModeKeys.TRAIN,
                                {"num_units": 4, "num_classes": 2, "num_layers": num_layers,
                                 "learning_rate": 0.1})
        names = {v.op.name for v in tf.compat.v1.trainable_variables()}
    scopes = model_fns.lstm_cell_scopes(num_layers)
    assert len(scopes) == num_layers
    assert {f"{s}/{v}" for s in scopes for v in ("kernel", "bias")} <= names
    assert model_fns.LSTM_FORGET_BIAS == 1.0
