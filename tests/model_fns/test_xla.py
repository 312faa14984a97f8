"""The train step of every model_fn compiles as one XLA computation on CPU.

``xla.compile`` puts the whole step (forward, loss, gradients, optimizer update, LSTM
state update) in one cluster and fails on any op XLA cannot compile, as a TPU would.
"""
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.compiler.xla import xla

import model_fns
from tests.model_fns import harness

v1 = tf.compat.v1

CASES = {
    "dense": (model_fns.dense_classifier_model_fn,
              {"hidden_units": [8], "num_classes": 3, "learning_rate": 0.1, "batch_norm": True,
               "dropout": 0.2, "clip_norm": 1.0},
              {"x": harness.floats(8, 4)}, harness.classes(8, 3)),
    "lstm_stateful": (model_fns.lstm_model_fn,
                      {"num_units": 4, "num_classes": 2, "num_layers": 2, "output": "sequence",
                       "num_streams": 8, "learning_rate": 0.1, "clip_norm": 1.0},
                      {"x": harness.floats(8, 5, 2), "stream": np.arange(8, dtype=np.int32),
                       "reset": np.zeros(8, bool)}, harness.classes(8, 2, shape=(5,))),
    "lstm_sequence_length": (model_fns.lstm_model_fn,
                             {"num_units": 4, "num_classes": 2, "num_layers": 2,
                              "dropout": 0.2, "learning_rate": 0.1},
                             {"x": harness.floats(8, 5, 2),
                              "sequence_length": np.array([5, 1, 3, 0, 5, 2, 4, 5], np.int32)},
                             harness.classes(8, 2)),
}


@pytest.mark.parametrize("case_name", sorted(CASES))
@pytest.mark.slow
def test_train_step_compiles_under_xla(case_name):
    model_fn, params, features, labels = CASES[case_name]
    with tf.Graph().as_default() as graph:
        global_step = v1.train.create_global_step()

        def train_step():
            spec = model_fn(features, labels, tf.estimator.ModeKeys.TRAIN, params)
            with tf.control_dependencies([spec.train_op]):
                return tf.identity(spec.loss)

        (loss,) = xla.compile(train_step)
        assert any(op.type == "XlaClusterOutput" for op in graph.get_operations())
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            losses = [session.run(loss) for _ in range(3)]
            assert session.run(global_step) == 3
    assert np.all(np.isfinite(losses))
    assert losses[-1] != losses[0]


def test_lstm_block_cell_does_not_compile_under_xla():
    """Why the LSTM stack is plain ops: the fused ``LSTMBlockCell`` has no XLA kernel."""
    with tf.Graph().as_default():
        x = v1.placeholder(tf.float32, [2, 3])
        zeros = tf.zeros([4])

        def cell():
            return tf.raw_ops.LSTMBlockCell(
                x=x, cs_prev=tf.zeros([2, 4]), h_prev=tf.zeros([2, 4]), w=tf.ones([7, 16]),
                wci=zeros, wcf=zeros, wco=zeros, b=tf.zeros([16]), use_peephole=False)[6]

        (h,) = xla.compile(cell)
        with v1.Session() as session, pytest.raises(tf.errors.InvalidArgumentError,
                                                    match="LSTMBlockCell"):
            session.run(h, {x: np.ones([2, 3])})
