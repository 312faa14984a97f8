"""A stack of ``BasicLSTMCell`` layers run over time with explicit state.

Variables are laid out as ``tf.compat.v1.nn.rnn_cell.BasicLSTMCell`` lays them out under
``dynamic_rnn``, so checkpoints of plain BasicLSTMCell models load:

* one layer: ``rnn/basic_lstm_cell/kernel`` [dim + units, 4 * units] and
  ``rnn/basic_lstm_cell/bias`` [4 * units];
* several layers, as ``MultiRNNCell`` names them:
  ``rnn/multi_rnn_cell/cell_{i}/basic_lstm_cell/{kernel,bias}``.

The kernel multiplies ``concat([input, h])``; its column blocks are the gates i, j
(candidate), f, o; ``forget_bias`` 1.0 is added to f when run, not stored.

State contract: the state of the stack is two tensors ``c`` and ``h``, each
[batch, num_layers * num_units], layer 0's units first. With one layer that is the
``LSTMStateTuple(c, h)`` of a BasicLSTMCell. Zeros are the state before any input.
"""
import tensorflow as tf

v1 = tf.compat.v1

FORGET_BIAS = 1.0


def _scopes(num_layers):
    if num_layers == 1:
        return ["rnn"]
    return [f"rnn/multi_rnn_cell/cell_{i}" for i in range(num_layers)]


def cell_scopes(num_layers):
    """The variable scope of each layer's ``kernel`` and ``bias``, layer 0 first."""
    return [f"{scope}/basic_lstm_cell" for scope in _scopes(num_layers)]


def run(x, initial_c, initial_h, *, num_units, num_layers, sequence_length=None,
        dropout=0.0, training=False):
    """Runs the stack over ``x`` from the given state.

    Args:
      x: float [batch, time, dim].
      initial_c, initial_h: float [batch, num_layers * num_units].
      num_units, num_layers: the size of the stack.
      sequence_length: int [batch] or None; past its length a row's state stays as it
        was and its outputs are zero.
      dropout: rate of dropout on every layer's outputs when ``training``.
      training: whether dropout applies.

    Returns:
      (outputs, final_c, final_h): the top layer's outputs [batch, time, num_units] and
      the final state, laid out like the initial state.
    """
    layer_c = tf.split(initial_c, num_layers, axis=1)
    layer_h = tf.split(initial_h, num_layers, axis=1)
    inputs, final_c, final_h = x, [], []
    for layer, scope in enumerate(_scopes(num_layers)):
        cell = v1.nn.rnn_cell.BasicLSTMCell(num_units, forget_bias=FORGET_BIAS)
        state = v1.nn.rnn_cell.LSTMStateTuple(layer_c[layer], layer_h[layer])
        inputs, final = v1.nn.dynamic_rnn(cell, inputs, sequence_length=sequence_length,
                                          initial_state=state, scope=scope)
        if training and dropout:
            inputs = tf.nn.dropout(inputs, rate=dropout)
        final_c.append(final.c)
        final_h.append(final.h)
    return inputs, tf.concat(final_c, axis=1), tf.concat(final_h, axis=1)
