"""``lstm_model_fn``: a ``BasicLSTMCell`` classifier with explicit state."""
import tensorflow as tf

from model_fns import _heads

v1 = tf.compat.v1


def lstm_model_fn(features, labels, mode, params):
    """An LSTM over feature ``x`` float [batch, time, dim]; classifies the last output.

    Initial state from features ``state_c``/``state_h`` [batch, num_units] when given,
    zeros otherwise; the final state is returned in the predictions.
    params: ``num_units``, ``num_classes``, ``learning_rate``, ``optimizer`` ("adam").
    """
    x = tf.cast(features["x"], tf.float32)
    cell = v1.nn.rnn_cell.BasicLSTMCell(params["num_units"])
    batch = tf.shape(x)[0]
    if "state_c" in features:
        state = v1.nn.rnn_cell.LSTMStateTuple(features["state_c"], features["state_h"])
    else:
        state = cell.zero_state(batch, tf.float32)
    outputs, final = v1.nn.dynamic_rnn(cell, x, initial_state=state, scope="rnn")
    logits = v1.layers.dense(outputs[:, -1], params["num_classes"], name="logits")
    return _heads.classification_spec(mode, logits, labels, params,
                                      predictions={"state_c": final.c, "state_h": final.h})
