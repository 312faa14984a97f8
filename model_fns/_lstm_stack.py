"""A stack of LSTM layers run over time with explicit state, in BasicLSTMCell's layout.

Variables are laid out as ``tf.compat.v1.nn.rnn_cell.BasicLSTMCell`` lays them out under
``dynamic_rnn``, so checkpoints of plain BasicLSTMCell models load, and the other way:

* one layer: ``rnn/basic_lstm_cell/kernel`` [dim + units, 4 * units] and
  ``rnn/basic_lstm_cell/bias`` [4 * units];
* several layers, as ``MultiRNNCell`` names them:
  ``rnn/multi_rnn_cell/cell_{i}/basic_lstm_cell/{kernel,bias}``.

The kernel multiplies ``concat([input, h])``; its column blocks are the gates i, j
(candidate), f, o; ``forget_bias`` 1.0 is added to f when run, not stored. As in
BasicLSTMCell, the bias starts from zeros and the kernel from the variable scope's
initializer, else Keras' ``glorot_uniform`` (which, in TF2 behaviour, ``tf_random_seed``
does not fix).

The kernel: each layer computes what BasicLSTMCell + ``dynamic_rnn`` computes, faster
on CPU. The input projection of every time step is one large matmul before the loop, so
the forward ``tf.while_loop`` holds only the recurrent matmul; the backward pass is a
hand-written loop (one matmul per step), after which the kernel and input gradients are
large matmuls over all steps. It is plain TF ops, so it compiles under XLA and on TPU.
With ``sequence_length`` it keeps ``dynamic_rnn``'s semantics: past a row's length its
state stays as it was and its outputs are zero.

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


def _variables(scope, dim, num_units):
    """A layer's kernel and bias, created as BasicLSTMCell creates them."""
    with v1.variable_scope(scope):
        initializer = (v1.get_variable_scope().initializer
                       or tf.keras.initializers.get("glorot_uniform"))
        kernel = v1.get_variable("kernel", [dim + num_units, 4 * num_units],
                                 initializer=initializer)
        bias = v1.get_variable("bias", [4 * num_units], initializer=v1.zeros_initializer())
    return tf.convert_to_tensor(kernel), tf.convert_to_tensor(bias)


def _gates(z):
    i, j, f, o = tf.split(z, 4, axis=1)
    return tf.sigmoid(i), tf.tanh(j), tf.sigmoid(f + FORGET_BIAS), tf.sigmoid(o)


def _steps(size, batch, width):
    return tf.TensorArray(tf.float32, size=size, element_shape=[batch, width])


def _layer(x, c0, h0, kernel, bias, live):
    """One layer over time-major ``x`` [time, batch, dim]; returns time-major outputs
    and the final c and h. ``live``: None, or bool [time, batch, 1], t < sequence_length.
    """

    @tf.custom_gradient
    def layer(x, c0, h0, kernel, bias):
        dim, units = x.shape[-1], c0.shape[-1]
        time, batch = tf.shape(x)[0], x.shape[1]
        w_x, w_h = kernel[:dim], kernel[dim:]
        x_rows = tf.reshape(x, [-1, dim])
        projected = tf.reshape(tf.matmul(x_rows, w_x) + bias, [time, -1, 4 * units])

        def step(t, c, h, acts, cs, hs):
            i, j, f, o = _gates(projected[t] + tf.matmul(h, w_h))
            new_c = c * f + i * j
            new_h = tf.tanh(new_c) * o
            if live is not None:
                new_c, new_h = tf.where(live[t], new_c, c), tf.where(live[t], new_h, h)
            return (t + 1, new_c, new_h, acts.write(t, tf.concat([i, j, f, o], 1)),
                    cs.write(t, new_c), hs.write(t, new_h))

        arrays = (_steps(time, batch, 4 * units), _steps(time, batch, units),
                  _steps(time, batch, units))
        _, c, h, acts, cs, hs = tf.while_loop(lambda t, *_: t < time, step, (0, c0, h0, *arrays))
        acts, cs, hs = acts.stack(), cs.stack(), hs.stack()
        outputs = hs if live is None else tf.where(live, hs, 0.0)

        def grad(d_outputs, d_c, d_h):
            d_outputs, d_c, d_h = (tf.zeros_like(v) if d is None else d
                                   for d, v in ((d_outputs, outputs), (d_c, c), (d_h, h)))
            if live is not None:
                d_outputs = tf.where(live, d_outputs, 0.0)
            c_prev = tf.concat([c0[None], cs], 0)
            w_h_t = tf.transpose(w_h)

            def back(t, dc, dh, d_gates):
                dh_in = dh + d_outputs[t]
                i, j, f, o = tf.split(acts[t], 4, axis=1)
                tanh_c = tf.tanh(cs[t])
                dc_in = dc + dh_in * o * (1 - tanh_c * tanh_c)
                dg = tf.concat([dc_in * j * i * (1 - i), dc_in * i * (1 - j * j),
                                dc_in * c_prev[t] * f * (1 - f),
                                dh_in * tanh_c * o * (1 - o)], 1)
                dc_prev = dc_in * f
                if live is not None:
                    dg, dc_prev = tf.where(live[t], dg, 0.0), tf.where(live[t], dc_prev, dc)
                dh_prev = tf.matmul(dg, w_h_t)
                if live is not None:
                    dh_prev = tf.where(live[t], dh_prev, dh)
                return t - 1, dc_prev, dh_prev, d_gates.write(t, dg)

            _, dc0, dh0, d_gates = tf.while_loop(
                lambda t, *_: t >= 0, back, (time - 1, d_c, d_h, _steps(time, batch, 4 * units)))
            dg = tf.reshape(d_gates.stack(), [-1, 4 * units])
            h_prev = tf.reshape(tf.concat([h0[None], hs], 0)[:-1], [-1, units])
            d_kernel = tf.concat([tf.matmul(x_rows, dg, transpose_a=True),
                                  tf.matmul(h_prev, dg, transpose_a=True)], 0)
            dx = tf.reshape(tf.matmul(dg, w_x, transpose_b=True), tf.shape(x))
            return dx, dc0, dh0, d_kernel, tf.reduce_sum(dg, 0)

        return (outputs, c, h), grad

    outputs, c, h = layer(x, c0, h0, kernel, bias)
    outputs.set_shape(x.shape[:2].concatenate([c0.shape[-1]]))
    return outputs, c, h


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
    inputs = tf.transpose(x, [1, 0, 2])
    live = None
    if sequence_length is not None:
        live = tf.transpose(tf.sequence_mask(sequence_length, tf.shape(x)[1]))[:, :, None]
    final_c, final_h = [], []
    for layer, scope in enumerate(cell_scopes(num_layers)):
        kernel, bias = _variables(scope, inputs.shape[-1], num_units)
        inputs, c, h = _layer(inputs, layer_c[layer], layer_h[layer], kernel, bias, live)
        if training and dropout:
            inputs = tf.nn.dropout(inputs, rate=dropout)
        final_c.append(c)
        final_h.append(h)
    return tf.transpose(inputs, [1, 0, 2]), tf.concat(final_c, axis=1), tf.concat(final_h, axis=1)
