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
initializer, else Keras' ``glorot_uniform`` (what ``tf.layers`` use; see "Seeds" in
docs/strategies.md).

The kernel: each layer computes what BasicLSTMCell + ``dynamic_rnn`` computes, with
fewer ops per step, because at these sizes a step's time is mostly op overhead on the
recurrent chain (docs/benchmarks.md has the measurements). The input projection of all
steps is one matmul before the forward ``tf.while_loop``, which holds only the
recurrent matmul and saves the gate activations. The backward pass is a hand-written
loop (``tf.custom_gradient``): fused ``SigmoidGrad``/``TanhGrad`` for the gates, the
recurrent matmul, and the kernel and bias gradients summed step by step (these do not
wait on the recurrence; one large matmul after the loop measured slower); the input
gradient is one matmul after the loop. Plain TF ops, so it compiles under XLA (and so
for TPU). With ``sequence_length`` it keeps ``dynamic_rnn``'s semantics: past a row's
length its state stays as it was and its outputs are zero.

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


def _steps(size, batch, width):
    return tf.TensorArray(tf.float32, size=size, element_shape=[batch, width],
                          clear_after_read=False)


def _layer(x, c0, h0, kernel, bias, live):
    """One layer over time-major ``x`` [time, batch, dim] from the state (c0, h0).

    Returns its time-major outputs and final c and h. ``live``: None, or bool
    [time, batch, 1], True while t < sequence_length.
    """

    @tf.custom_gradient
    def layer(x, c0, h0, kernel, bias):
        dim, units = x.shape[-1], kernel.shape[-1] // 4
        time, batch = tf.shape(x)[0], x.shape[1]
        w_x, w_h = kernel[:dim], kernel[dim:]
        gate_bias = bias + tf.repeat([0.0, 0.0, FORGET_BIAS, 0.0], units)  # i, j, f, o
        projected = tf.reshape(tf.matmul(tf.reshape(x, [-1, dim]), w_x) + gate_bias,
                               [time, -1, 4 * units])

        def step(t, c, h, saved):
            i, j, f, o = tf.split(projected[t] + tf.matmul(h, w_h), 4, axis=1)
            i, j, f, o = tf.sigmoid(i), tf.tanh(j), tf.sigmoid(f), tf.sigmoid(o)
            new_c = c * f + i * j
            tanh_c = tf.tanh(new_c)
            new_h = tanh_c * o
            if live is not None:
                new_c, new_h = tf.where(live[t], new_c, c), tf.where(live[t], new_h, h)
            values = (i, j, f, o, c, tanh_c, new_h)
            return t + 1, new_c, new_h, [s.write(t, v) for s, v in zip(saved, values)]

        saved = [_steps(time, batch, units) for _ in range(7)]
        _, c, h, saved = tf.while_loop(lambda t, *_: t < time, step, (0, c0, h0, saved))
        hs = saved[-1].stack()
        outputs = hs if live is None else tf.where(live, hs, 0.0)

        def grad(d_outputs, d_c, d_h):  # TF passes zeros for results with no gradient
            if live is not None:
                d_outputs = tf.where(live, d_outputs, 0.0)
            rows = tf.concat([x, tf.concat([h0[None], hs], 0)[:-1]], 2)  # [x_t, h_t-1]
            w_h_t = tf.transpose(w_h)

            def back(t, dc, dh, d_kernel, d_bias, d_gates):
                i, j, f, o, c_prev, tanh_c = (s.read(t) for s in saved[:-1])
                dh_in = dh + d_outputs[t]
                dc_in = dc + tf.raw_ops.TanhGrad(y=tanh_c, dy=dh_in * o)
                dg = tf.concat([tf.raw_ops.SigmoidGrad(y=i, dy=dc_in * j),
                                tf.raw_ops.TanhGrad(y=j, dy=dc_in * i),
                                tf.raw_ops.SigmoidGrad(y=f, dy=dc_in * c_prev),
                                tf.raw_ops.SigmoidGrad(y=o, dy=dh_in * tanh_c)], 1)
                dc_prev = dc_in * f
                if live is not None:  # past a row's length its state's gradient passes by
                    dg, dc_prev = tf.where(live[t], dg, 0.0), tf.where(live[t], dc_prev, dc)
                dh_prev = tf.matmul(dg, w_h_t)
                if live is not None:
                    dh_prev = tf.where(live[t], dh_prev, dh)
                return (t - 1, dc_prev, dh_prev,
                        d_kernel + tf.matmul(rows[t], dg, transpose_a=True),
                        d_bias + tf.reduce_sum(dg, 0), d_gates.write(t, dg))

            _, dc0, dh0, d_kernel, d_bias, d_gates = tf.while_loop(
                lambda t, *_: t >= 0, back,
                (time - 1, d_c, d_h, tf.zeros_like(kernel), tf.zeros_like(bias),
                 _steps(time, batch, 4 * units)))
            d_gates = tf.reshape(d_gates.stack(), [-1, 4 * units])
            dx = tf.reshape(tf.matmul(d_gates, w_x, transpose_b=True), tf.shape(x))
            return dx, dc0, dh0, d_kernel, d_bias

        return (outputs, c, h), grad

    outputs, c, h = layer(x, c0, h0, kernel, bias)
    outputs.set_shape(x.shape[:2].concatenate([kernel.shape[-1] // 4]))
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
