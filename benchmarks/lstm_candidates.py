"""LSTM kernels against BasicLSTMCell + ``dynamic_rnn`` (the reference), each in the same
Estimator model_fn, in one process, alternating.

    python benchmarks/lstm_candidates.py [--rounds 3] [--steps 60] [--forward [--cpu-time]]

All keep the BasicLSTMCell variables (``rnn/basic_lstm_cell/{kernel,bias}``, gate
blocks i, j, f, o, forget bias 1.0 added when run):

* ``package``: what ``model_fns._lstm_stack`` runs. The input projection of all time
  steps as one matmul, only the recurrent matmul in the forward loop; a hand-written
  backward loop with fused activation gradients, the recurrent matmul and the kernel
  gradient summed step by step.
* ``package_forward`` (``--forward`` only): the package's forward-only loop, what EVAL,
  PREDICT and export run; it saves no activations for a backward pass.
* ``block_cell``: ``tf.raw_ops.LSTMBlockCell`` (one fused op per step, same gate
  layout) in a ``tf.while_loop``; backward ``LSTMBlockCellGrad`` and one matmul per
  step, the kernel gradient one large matmul over all steps (TF registers no gradient
  for ``LSTMBlockCell``, which has no XLA kernel, so none for TPU either).

Before timing, each kernel's outputs and gradients are compared with ``dynamic_rnn``'s
on a small batch (max abs difference printed). The model_fn (last
output -> dense logits, v1 Adam) and shapes (T=50, dim 32, 128 units, batch 128) are
those of ``benchmarks/models.py lstm``.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import numpy as np
import tensorflow as tf

import _timing
import models
from model_fns import _lstm_stack

# A candidate: (x, initial c, initial h, units) -> (outputs, final c, final h).
Run = Callable[[Any, Any, Any, int], tuple[Any, Any, Any]]

v1 = tf.compat.v1
FORGET_BIAS = _lstm_stack.FORGET_BIAS


def package_run(x: tf.Tensor, c0: tf.Tensor, h0: tf.Tensor,
                units: int) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    return _lstm_stack.run(x, c0, h0, num_units=units, num_layers=1)


def package_forward_run(x: tf.Tensor, c0: tf.Tensor, h0: tf.Tensor,
                        units: int) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    return _lstm_stack.run(x, c0, h0, num_units=units, num_layers=1, needs_gradient=False)


@tf.custom_gradient
def _block_cell_lstm(x: tf.Tensor, c0: tf.Tensor, h0: tf.Tensor, kernel: tf.Tensor,
                     bias: tf.Tensor) -> tuple[tuple[tf.Tensor, tf.Tensor, tf.Tensor],
                                               Callable[..., tuple[tf.Tensor, ...]]]:
    dim, units = tf.compat.dimension_value(x.shape[-1]), tf.compat.dimension_value(c0.shape[-1])
    inputs = tf.transpose(x, [1, 0, 2])
    time = tf.shape(x)[1]
    no_peephole = tf.zeros([units])
    cell = dict(w=kernel, wci=no_peephole, wcf=no_peephole, wco=no_peephole, b=bias)

    def step(t: tf.Tensor, c: tf.Tensor, h: tf.Tensor,
             saved: list[Any]) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, list[Any]]:
        i, c, f, o, ci, co, h = tf.raw_ops.LSTMBlockCell(
            x=inputs[t], cs_prev=c, h_prev=h, forget_bias=FORGET_BIAS, cell_clip=-1.0,
            use_peephole=False, **cell)
        return t + 1, c, h, [a.write(t, v) for a, v in zip(saved, (i, c, f, o, ci, co, h))]

    saved = [tf.TensorArray(tf.float32, size=time) for _ in range(7)]
    _, c, h, saved = tf.while_loop(lambda t, *_: t < time, step, (0, c0, h0, saved))
    i, cs, f, o, ci, co, hs = (array.stack() for array in saved)

    def grad(d_outputs: tf.Tensor, d_c: tf.Tensor, d_h: tf.Tensor) -> tuple[tf.Tensor, ...]:
        d_hs = tf.transpose(d_outputs, [1, 0, 2])
        c_prev = tf.concat([c0[None], cs[:-1]], 0)
        h_prev = tf.concat([h0[None], hs[:-1]], 0)
        w_h_t = tf.transpose(kernel[dim:])

        def back(t: tf.Tensor, dc: tf.Tensor, dh: tf.Tensor,
                 d_gates: Any) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, Any]:
            dc, dg, _, _, _ = tf.raw_ops.LSTMBlockCellGrad(
                x=inputs[t], cs_prev=c_prev[t], h_prev=h_prev[t], i=i[t], cs=cs[t], f=f[t],
                o=o[t], ci=ci[t], co=co[t], cs_grad=dc, h_grad=dh + d_hs[t],
                use_peephole=False, **cell)
            return t - 1, dc, tf.matmul(dg, w_h_t), d_gates.write(t, dg)

        _, dc0, dh0, d_gates = tf.while_loop(
            lambda t, *_: t >= 0, back,
            (time - 1, d_c, d_h, tf.TensorArray(tf.float32, size=time)))
        dg = tf.reshape(d_gates.stack(), [-1, 4 * units])
        rows = tf.reshape(tf.concat([inputs, h_prev], 2), [-1, dim + units])
        dx = tf.reshape(tf.matmul(dg, kernel[:dim], transpose_b=True), tf.shape(inputs))
        return (tf.transpose(dx, [1, 0, 2]), dc0, dh0,
                tf.matmul(rows, dg, transpose_a=True), tf.reduce_sum(dg, 0))

    return (tf.transpose(hs, [1, 0, 2]), c, h), grad


def block_cell_run(x: tf.Tensor, c0: tf.Tensor, h0: tf.Tensor,
                   units: int) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    kernel, bias = _lstm_stack._variables(_lstm_stack.cell_scopes(1)[0], x.shape[-1], units)
    return _block_cell_lstm(x, c0, h0, kernel, bias)


def dynamic_rnn_run(x: tf.Tensor, c0: tf.Tensor, h0: tf.Tensor,
                    units: int) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    cell = v1.nn.rnn_cell.BasicLSTMCell(units, forget_bias=FORGET_BIAS)
    state = v1.nn.rnn_cell.LSTMStateTuple(c0, h0)
    outputs, state = v1.nn.dynamic_rnn(cell, x, initial_state=state, scope="rnn")
    return outputs, state.c, state.h


CANDIDATES: dict[str, Run] = {"dynamic_rnn": dynamic_rnn_run, "package": package_run,
              "block_cell": block_cell_run}
# The loop that EVAL, PREDICT and export run, timed with --forward only.
FORWARD_CANDIDATES = {**CANDIDATES, "package_forward": package_forward_run}


def max_difference(run: Run, reference: Run = dynamic_rnn_run, shape: tuple[int, ...] = (4, 6, 3),
                   units: int = 5) -> float:
    """Max abs difference of outputs, final state and gradients from ``reference``'s.

    Fetching a v2 while loop's outputs and its gradients from one plain session needs
    every loop intermediate kept, for this check only.
    """
    values = []
    v1.experimental.output_all_intermediates(True)
    for fn in (reference, run):
        with tf.Graph().as_default():
            rng = np.random.RandomState(0)
            x = tf.constant(rng.randn(*shape).astype(np.float32))
            c0, h0 = (tf.constant(rng.randn(shape[0], units).astype(np.float32))
                      for _ in range(2))
            outputs, c, h = fn(x, c0, h0, units)
            loss = tf.reduce_sum(outputs ** 2) + tf.reduce_sum(tf.sin(c)) + tf.reduce_sum(h)
            variables = sorted(v1.trainable_variables(), key=lambda v: v.name)  # bias, kernel
            with v1.Session() as session:
                for variable in variables:
                    size = variable.shape.num_elements()
                    variable.load(np.linspace(-1, 1, size).reshape(variable.shape), session)
                values.append(session.run([outputs, c, h,
                                           *tf.gradients(loss, variables + [x])]))
    v1.experimental.output_all_intermediates(None)
    return max(float(np.max(np.abs(a - b))) for a, b in zip(*values))


def _model_fn(run: Run) -> Callable[..., Any]:
    def model_fn(features: dict[str, Any], labels: Any, mode: str,
                 params: dict[str, Any]) -> Any:
        x = features["x"]
        zeros = tf.zeros([tf.shape(x)[0], models.LSTM["num_units"]])
        outputs, _, _ = run(x, zeros, zeros, models.LSTM["num_units"])
        logits = v1.layers.dense(outputs[:, -1], models.LSTM["num_classes"])
        return models._plain_spec(mode, logits, labels)

    return model_fn


def _forward_system(run: Run, steps: int,
                    clock: Callable[[], float] = time.perf_counter) -> Callable[[], float]:
    """Examples/s of the forward pass alone (what inference runs), in a plain Session;
    per second of ``clock`` (``time.process_time``: per CPU second of the process)."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant(np.random.RandomState(0).randn(
            models.BATCH, models.LSTM["time"], models.LSTM["dim"]).astype(np.float32))
        zeros = tf.zeros([models.BATCH, models.LSTM["num_units"]])
        outputs, _, _ = run(x, zeros, zeros, models.LSTM["num_units"])
        total = tf.reduce_sum(outputs)
        session = v1.Session(graph=graph)
        session.run(v1.global_variables_initializer())
    session.run(total)

    def measure() -> float:
        start = clock()
        for _ in range(steps):
            session.run(total)
        return steps * models.BATCH / (clock() - start)

    return measure


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--tiny", action="store_true", help="tiny shapes (smoke test)")
    parser.add_argument("--forward", action="store_true",
                        help="time the forward pass alone (inference), not training")
    parser.add_argument("--cpu-time", action="store_true",
                        help="with --forward: examples per CPU second of the process, "
                             "steadier than wall time on a machine shared with other jobs")
    args = parser.parse_args(argv)
    if args.tiny:
        models.LSTM.update(models.TINY["lstm"])
    _timing.print_header()
    candidates = FORWARD_CANDIDATES if args.forward else CANDIDATES
    for name, run in candidates.items():
        print(f"  {name}: max abs difference from dynamic_rnn {max_difference(run):.1e}")
    if args.forward:
        clock = time.process_time if args.cpu_time else time.perf_counter
        systems = {name: _forward_system(run, args.steps, clock)
                   for name, run in candidates.items()}
        _timing.alternate(systems, args.rounds, baseline="dynamic_rnn")
        return
    input_fn = _timing.blobs_input_fn([models.LSTM["time"], models.LSTM["dim"]],
                                      models.BATCH)
    systems = {name: models._estimator_system(_model_fn(run), {}, input_fn, args.steps)
               for name, run in CANDIDATES.items()}
    rates, gflops = _timing.alternate(systems, args.rounds, baseline="dynamic_rnn")
    for name, values in rates.items():
        share = statistics.median(values) * models.lstm_flops_per_example() / 1e9 / gflops
        print(f"  {name:<28} {share:.0%} of the sgemm ceiling")


if __name__ == "__main__":
    main()
