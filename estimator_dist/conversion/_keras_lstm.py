"""``BasicLSTMCell`` weights as Keras ``LSTM`` weights, and a Keras LSTM stack with explicit state.

The two cells compute the same function with differently laid out weights:

* ``tf.compat.v1.nn.rnn_cell.BasicLSTMCell``: ``kernel`` [input + units, 4 * units]
  multiplies ``concat([x, h])``; ``bias`` [4 * units]; the column blocks are the gates
  i, j (candidate), f, o; ``forget_bias`` (1.0) is added to f when run, not stored; the
  state is ``LSTMStateTuple(c, h)``.
* ``tf.keras.layers.LSTM`` (Keras 2 and Keras 3 alike): ``kernel`` [input, 4 * units]
  multiplies ``x``, ``recurrent_kernel`` [units, 4 * units] multiplies ``h``, ``bias`` [4 *
  units]; the column blocks are i, f, c (candidate), o; the state is ``[h, c]``.

State contract of ``lstm_stack`` (the one of ``model_fns.lstm_model_fn``): the state of a
stack is two tensors ``c`` and ``h``, each [batch, num_layers * num_units], layer 0's
units first. Zeros are the state before any input.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from model_fns import LSTM_FORGET_BIAS


def keras_lstm_weights(kernel: np.ndarray, bias: np.ndarray, *, input_dim: int,
                       forget_bias: float = LSTM_FORGET_BIAS) -> list[np.ndarray]:
    """The ``[kernel, recurrent_kernel, bias]`` of a Keras LSTM computing a BasicLSTMCell.

    Args:
      kernel: the BasicLSTMCell's kernel [input_dim + units, 4 * units].
      bias: its bias [4 * units].
      input_dim: the size of the cell's input (the kernel's rows above it belong to ``h``).
      forget_bias: the constant the BasicLSTMCell adds to its forget gate.
    """
    i, j, f, o = np.split(np.asarray(kernel), 4, axis=1)
    reordered = np.concatenate([i, f, j, o], axis=1)
    bias_i, bias_j, bias_f, bias_o = np.split(np.asarray(bias), 4)
    keras_bias = np.concatenate([bias_i, bias_f + forget_bias, bias_j, bias_o])
    return [reordered[:input_dim], reordered[input_dim:], keras_bias]


def _layer_slice(state: Any, layer: int, num_units: int, num_layers: int) -> Any:
    if num_layers == 1:
        return state
    return state[:, layer * num_units:(layer + 1) * num_units]


def lstm_stack(x: Any, state_c: Any, state_h: Any, *, num_units: int, num_layers: int,
               return_sequences: bool, dropout: float = 0.0,
               keras: Any = None) -> tuple[Any, Any, Any]:
    """Runs ``num_layers`` Keras LSTM layers (``lstm_{i}``) over ``x`` from the given state.

    Args:
      x: a Keras tensor [batch, time, dim].
      state_c, state_h: Keras tensors [batch, num_layers * num_units].
      num_units, num_layers: the size of the stack.
      return_sequences: whether the top layer returns every step's output or the last.
      dropout: rate of a ``Dropout`` layer after every LSTM layer (active in training).
      keras: the Keras module to build with (default ``tf.keras``; ``tf_keras`` for Keras 2
        on TensorFlow 2.16+): Keras 3's ``LSTM`` lays out its weights as Keras 2's.

    Returns:
      (outputs, final_c, final_h): the top layer's outputs and the final state, laid out
      like the initial state.
    """
    keras = keras or tf.keras
    inputs, final_c, final_h = x, [], []
    for layer in range(num_layers):
        top = layer == num_layers - 1
        lstm = keras.layers.LSTM(num_units, return_sequences=return_sequences or not top,
                                    return_state=True, name=f"lstm_{layer}")
        initial = [_layer_slice(state_h, layer, num_units, num_layers),
                   _layer_slice(state_c, layer, num_units, num_layers)]
        inputs, h, c = lstm(inputs, initial_state=initial)
        if dropout:
            inputs = keras.layers.Dropout(dropout, name=f"dropout_{layer}")(inputs)
        final_c.append(c)
        final_h.append(h)
    if num_layers == 1:
        return inputs, final_c[0], final_h[0]
    return (inputs, keras.layers.Concatenate(name="final_c")(final_c),
            keras.layers.Concatenate(name="final_h")(final_h))
