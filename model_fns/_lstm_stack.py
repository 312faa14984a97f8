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
initializer, else ``glorot_uniform`` of the Keras that serves ``tf.layers`` (tf-keras on
TF 2.16+; see "Seeds" in docs/strategies.md).

The kernel: each layer computes what BasicLSTMCell + ``dynamic_rnn`` computes, with
fewer ops per step, because at these sizes a step's time is mostly op overhead on the
recurrent chain (docs/benchmarks.md has the measurements). The input projection of all
steps is one matmul before the forward ``tf.while_loop``, which holds only the
recurrent matmul and saves the gate activations. The backward pass is a hand-written
loop: fused ``SigmoidGrad``/``TanhGrad`` for the gates, the
recurrent matmul, and the kernel and bias gradients summed step by step (these do not
wait on the recurrence; at these sizes that beats one large matmul after the loop:
docs/benchmarks.md, "Faster LSTM kernels"); the input gradient is one matmul after the
loop. Plain TF ops, so it compiles under XLA (and so
for TPU). With ``sequence_length`` it keeps ``dynamic_rnn``'s semantics: past a row's
length its state stays as it was and its outputs are zero.

The backward pass is registered once, under the name ``GRADIENT``: a layer's results
and what its gradient needs (inputs, weights, the saved activations) go through one
``IdentityN`` op whose gradient function reads them back from the op. Graph-mode
``tf.custom_gradient`` would register a new function per graph in TensorFlow's
process-wide registry, which keeps every graph alive: an Estimator that alternates
``train`` and ``evaluate`` would grow by a graph per call.

When no gradient is needed (EVAL, PREDICT, export: ``needs_gradient=False``) the
forward loop saves nothing but its outputs.

State contract: the state of the stack is two tensors ``c`` and ``h``, each
[batch, num_layers * num_units], layer 0's units first. With one layer that is the
``LSTMStateTuple(c, h)`` of a BasicLSTMCell. Zeros are the state before any input.
"""
from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

v1 = tf.compat.v1

FORGET_BIAS = 1.0
# The gradient of a layer's IdentityN op, registered once for the process.
GRADIENT = "EstimatorDistLSTMLayer"


def _scopes(num_layers: int) -> list[str]:
    if num_layers == 1:
        return ["rnn"]
    return [f"rnn/multi_rnn_cell/cell_{i}" for i in range(num_layers)]


def cell_scopes(num_layers: int) -> list[str]:
    """The variable scope of each layer's ``kernel`` and ``bias``, layer 0 first."""
    return [f"{scope}/basic_lstm_cell" for scope in _scopes(num_layers)]


def _glorot_uniform() -> Any:
    """BasicLSTMCell's default kernel initializer: that of the Keras serving the TF1 layers
    and cells, tf.keras on TF 2.15, tf-keras on 2.16+ (where tf.keras is Keras 3, whose
    initializer draws through other ops)."""
    if tf.__version__.startswith("2.15."):
        return tf.keras.initializers.get("glorot_uniform")
    import tf_keras  # Late: loads Keras.

    return tf_keras.initializers.get("glorot_uniform")


def _variables(scope: str, dim: int, num_units: int) -> tuple[tf.Tensor, tf.Tensor]:
    """A layer's kernel and bias, created as BasicLSTMCell creates them."""
    with v1.variable_scope(scope):
        initializer = v1.get_variable_scope().initializer or _glorot_uniform()
        kernel = v1.get_variable("kernel", [dim + num_units, 4 * num_units],
                                 initializer=initializer)
        bias = v1.get_variable("bias", [4 * num_units], initializer=v1.zeros_initializer())
    return tf.convert_to_tensor(kernel), tf.convert_to_tensor(bias)


def _steps(size: int | tf.Tensor, batch: int | None, width: int) -> tf.TensorArray:
    return tf.TensorArray(tf.float32, size=size, element_shape=[batch, width],
                          clear_after_read=False)


def _forward(x: tf.Tensor, c0: tf.Tensor, h0: tf.Tensor, kernel: tf.Tensor, bias: tf.Tensor,
             live: tf.Tensor | None, saving: bool
             ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, list[tf.TensorArray]]:
    """The loop over time-major ``x`` [time, batch, dim] from the state (c0, h0).

    Returns its time-major outputs, final c and h, and, when ``saving``, the
    TensorArrays of i, j, f, o, c_prev and tanh(c) at each step that the backward pass
    reads (else an empty list). ``live``: None, or bool [time, batch, 1], True while
    t < sequence_length.
    """
    dim, units = x.shape[-1], kernel.shape[-1] // 4
    time, batch = tf.shape(x)[0], x.shape[1]
    w_x, w_h = kernel[:dim], kernel[dim:]
    gate_bias = bias + tf.repeat([0.0, 0.0, FORGET_BIAS, 0.0], units)  # i, j, f, o
    projected = tf.reshape(tf.matmul(tf.reshape(x, [-1, dim]), w_x) + gate_bias,
                           [time, -1, 4 * units])

    def step(t: tf.Tensor, c: tf.Tensor, h: tf.Tensor, hs: tf.TensorArray,
             saved: list[tf.TensorArray]) -> tuple[Any, ...]:
        i, j, f, o = tf.split(projected[t] + tf.matmul(h, w_h), 4, axis=1)
        i, j, f, o = tf.sigmoid(i), tf.tanh(j), tf.sigmoid(f), tf.sigmoid(o)
        new_c = c * f + i * j
        tanh_c = tf.tanh(new_c)
        new_h = tanh_c * o
        if live is not None:
            new_c, new_h = tf.where(live[t], new_c, c), tf.where(live[t], new_h, h)
        saved = [s.write(t, v) for s, v in zip(saved, (i, j, f, o, c, tanh_c))]
        return t + 1, new_c, new_h, hs.write(t, new_h), saved

    saved = [_steps(time, batch, units) for _ in range(6 if saving else 0)]
    _, c, h, hs, saved = tf.while_loop(lambda t, *_: t < time, step,
                                       (0, c0, h0, _steps(time, batch, units), saved))
    hs = hs.stack()
    outputs = hs if live is None else tf.where(live, hs, 0.0)
    return outputs, c, h, saved


def _held(array: tf.TensorArray) -> tf.Tensor:
    """What stands for a TensorArray of saved activations among the layer op's inputs: its
    list (TF2 control flow), or its stacked values (TF1 control flow, whose TensorArray
    handles cannot pass through the op)."""
    return array.flow if array.handle is None else array.stack()


def _reader(held: tf.Tensor) -> Callable[[tf.Tensor], tf.Tensor]:
    """Reads step t of what ``_held`` returned."""
    if held.dtype == tf.variant:
        return tf.TensorArray(tf.float32, flow=held).read
    return lambda t: held[t]


@tf.RegisterGradient(GRADIENT)
def _layer_gradient(op: tf.Operation, d_outputs: tf.Tensor, d_c: tf.Tensor, d_h: tf.Tensor,
                    *_: tf.Tensor) -> list[tf.Tensor | None]:
    """The gradient of a layer from what its ``IdentityN`` op holds: the outputs, the
    final state, then x, c0, h0, kernel, bias, ``live`` when given, and the saved
    activations. Nothing else is kept, so no graph outlives its use."""
    outputs, x, h0, kernel, bias = (op.inputs[k] for k in (0, 3, 5, 6, 7))
    held = list(op.inputs[8:])
    live = held.pop(0) if held[0].dtype == tf.bool else None
    dim, units = x.shape[-1], kernel.shape[-1] // 4
    time, batch = tf.shape(x)[0], x.shape[1]
    w_x, w_h_t = kernel[:dim], tf.transpose(kernel[dim:])
    saved = [_reader(h) for h in held]
    if live is not None:
        d_outputs = tf.where(live, d_outputs, 0.0)
    rows = tf.concat([x, tf.concat([h0[None], outputs], 0)[:-1]], 2)  # [x_t, h_t-1]

    def back(t: tf.Tensor, dc: tf.Tensor, dh: tf.Tensor, d_kernel: tf.Tensor, d_bias: tf.Tensor,
             d_gates: tf.TensorArray) -> tuple[tf.Tensor, ...]:
        i, j, f, o, c_prev, tanh_c = (read(t) for read in saved)
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
    return [None] * 3 + [dx, dc0, dh0, d_kernel, d_bias] + [None] * (len(op.inputs) - 8)


def _layer(x: tf.Tensor, c0: tf.Tensor, h0: tf.Tensor, kernel: tf.Tensor, bias: tf.Tensor,
           live: tf.Tensor | None, needs_gradient: bool) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """One layer over time-major ``x`` [time, batch, dim] from the state (c0, h0).

    Returns its time-major outputs and final c and h. ``live``: None, or bool
    [time, batch, 1], True while t < sequence_length. Without ``needs_gradient`` the
    loop saves nothing for a backward pass.
    """
    outputs, c, h, saved = _forward(x, c0, h0, kernel, bias, live, needs_gradient)
    if needs_gradient:
        held = [x, c0, h0, kernel, bias] + ([] if live is None else [live])
        held += [_held(array) for array in saved]
        with v1.get_default_graph().gradient_override_map({"IdentityN": GRADIENT}):
            outputs, c, h = tf.identity_n([outputs, c, h] + held)[:3]
    outputs.set_shape(x.shape[:2].concatenate([kernel.shape[-1] // 4]))
    return outputs, c, h


def run(x: tf.Tensor, initial_c: tf.Tensor, initial_h: tf.Tensor, *, num_units: int,
        num_layers: int, sequence_length: tf.Tensor | None = None, dropout: float = 0.0,
        training: bool = False, needs_gradient: bool = True
        ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Runs the stack over ``x`` from the given state.

    Args:
      x: float [batch, time, dim].
      initial_c, initial_h: float [batch, num_layers * num_units].
      num_units, num_layers: the size of the stack.
      sequence_length: int [batch] or None; past its length a row's state stays as it
        was and its outputs are zero.
      dropout: rate of dropout on every layer's outputs when ``training``.
      training: whether dropout applies.
      needs_gradient: False runs the forward-only loop (EVAL, PREDICT, export), which
        saves no activations and has no gradient.

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
        inputs, c, h = _layer(inputs, layer_c[layer], layer_h[layer], kernel, bias, live,
                              needs_gradient)
        if training and dropout:
            inputs = tf.nn.dropout(inputs, rate=dropout)
        final_c.append(c)
        final_h.append(h)
    return tf.transpose(inputs, [1, 0, 2]), tf.concat(final_c, axis=1), tf.concat(final_h, axis=1)
