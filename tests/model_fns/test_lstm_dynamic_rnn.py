"""The LSTM stack against BasicLSTMCell + ``dynamic_rnn``: variables, outputs, final
state and gradients (w.r.t. x, the initial state, every kernel and bias)."""
import gc
import weakref

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import ops

from model_fns import _lstm_stack

v1 = tf.compat.v1
BATCH, DIM, UNITS = 4, 3, 5


def _dynamic_rnn_stack(x, c, h, *, num_units, num_layers, sequence_length=None):
    """The reference: BasicLSTMCell (a MultiRNNCell of them when stacked) + dynamic_rnn."""
    cells = [v1.nn.rnn_cell.BasicLSTMCell(num_units, forget_bias=_lstm_stack.FORGET_BIAS)
             for _ in range(num_layers)]
    states = [v1.nn.rnn_cell.LSTMStateTuple(*s) for s in zip(tf.split(c, num_layers, 1),
                                                              tf.split(h, num_layers, 1))]
    cell, state = cells[0], states[0]
    if num_layers > 1:
        cell, state = v1.nn.rnn_cell.MultiRNNCell(cells), tuple(states)
    outputs, final = v1.nn.dynamic_rnn(cell, x, sequence_length=sequence_length,
                                       initial_state=state, scope="rnn")
    finals = [final] if num_layers == 1 else final
    return (outputs, tf.concat([s.c for s in finals], 1), tf.concat([s.h for s in finals], 1))


def _data(time, num_layers):
    """Inputs x, c, h and the loss coefficients of outputs, final c and final h."""
    rng = np.random.default_rng(0)
    state = UNITS * num_layers
    shapes = [(BATCH, time, DIM), (BATCH, state), (BATCH, state), (BATCH, time, UNITS),
              (BATCH, state), (BATCH, state)]
    values = [rng.normal(size=shape).astype(np.float32) for shape in shapes]
    return values[:3], values[3:]


def _evaluate(stack, *, time, num_layers, lengths=None, static_time=True, static_batch=False,
              uses="och"):
    """Outputs, final state and gradients of ``stack`` with fixed weights and inputs.

    The loss weighs each of the outputs, final c and final h (letters o, c, h in ``uses``) by
    random coefficients, so every upstream gradient differs from element to element.
    """
    rng = np.random.default_rng(1)
    state = UNITS * num_layers
    values, coefficients = _data(time, num_layers)
    with tf.Graph().as_default():
        batch = BATCH if static_batch else None
        x = v1.placeholder(tf.float32, [batch, time if static_time else None, DIM])
        c, h = (v1.placeholder(tf.float32, [batch, state]) for _ in range(2))
        sequence_length = None if lengths is None else tf.constant(lengths, tf.int32)
        results = stack(x, c, h, num_units=UNITS, num_layers=num_layers,
                        sequence_length=sequence_length)
        loss = sum(tf.reduce_sum(r * k)
                   for r, k, use in zip(results, coefficients, "och") if use in uses)
        variables = sorted(v1.trainable_variables(), key=lambda v: v.op.name)
        gradients = tf.gradients(loss, [x, c, h, *variables])
        with v1.Session() as session:
            for variable in variables:
                variable.load(rng.normal(0.0, 0.5, variable.shape), session)
            return session.run([*results, *gradients], dict(zip([x, c, h], values)))


def _assert_same(num_layers, **kwargs):
    expected = _evaluate(_dynamic_rnn_stack, num_layers=num_layers, **kwargs)
    actual = _evaluate(_lstm_stack.run, num_layers=num_layers, **kwargs)
    names = ["outputs", "final c", "final h", "d x", "d initial c", "d initial h"] + [
        f"d {scope}/{v}" for scope in _lstm_stack.cell_scopes(num_layers)
        for v in ("bias", "kernel")]
    assert len(actual) == len(expected) == len(names)
    for name, a, e in zip(names, actual, expected):
        assert a.shape == e.shape, name
        np.testing.assert_allclose(a, e, atol=1e-5, err_msg=name)
    assert np.abs(expected[0]).max() > 0.1  # the comparison is not of zeros


@pytest.mark.parametrize("num_layers", [1, 3])
@pytest.mark.slow
def test_stack_matches_dynamic_rnn(num_layers):
    _assert_same(num_layers, time=6)


@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.slow
def test_stack_matches_dynamic_rnn_with_sequence_length(num_layers):
    _assert_same(num_layers, time=6, lengths=[6, 2, 0, 9])


@pytest.mark.slow
def test_stack_matches_dynamic_rnn_with_variable_time():
    _assert_same(2, time=7, lengths=[3, 7, 1, 5], static_time=False)


@pytest.mark.parametrize("uses", ["o", "c", "h", "ch"])
@pytest.mark.slow
def test_stack_matches_dynamic_rnn_when_some_results_get_no_gradient(uses):
    _assert_same(2, time=4, lengths=[4, 1, 3, 2], uses=uses)


@pytest.mark.parametrize("lengths", [None, [0, 0, 0, 0]])
@pytest.mark.parametrize("static_time", [True, False])
@pytest.mark.slow
def test_stack_over_zero_steps_returns_the_initial_state(lengths, static_time):
    """No steps: empty outputs, the initial state, as dynamic_rnn (which in TF1
    behaviour fails on zero steps)."""
    kwargs = dict(num_layers=2, time=0, lengths=lengths, static_time=static_time,
                  static_batch=True)
    actual = _evaluate(_lstm_stack.run, **kwargs)
    (_, c, h), (_, d_c, d_h) = _data(0, 2)
    for a, e in zip(actual, [np.zeros((BATCH, 0, UNITS)), c, h, np.zeros((BATCH, 0, DIM)),
                             d_c, d_h]):
        np.testing.assert_array_equal(a, e)
    assert not any(np.any(gradient) for gradient in actual[6:])
    if tf.__internal__.tf2.enabled():
        for a, e in zip(actual, _evaluate(_dynamic_rnn_stack, **kwargs)):
            np.testing.assert_array_equal(a, e)


@pytest.mark.parametrize("stack", [_dynamic_rnn_stack, _lstm_stack.run])
@pytest.mark.slow
def test_stack_over_zero_steps_needs_a_static_batch_size(stack):
    """Like dynamic_rnn, stacking zero steps of unknown batch size fails when run."""
    with pytest.raises((tf.errors.InvalidArgumentError, tf.errors.UnimplementedError),
                       match="not fully defined|non-fully-defined"):
        _evaluate(stack, num_layers=1, time=0)


def _variables(stack, num_layers):
    """Name, shape and initial value of each variable, under a constant scope initializer,
    and the op types that initialize them by default."""
    with tf.Graph().as_default() as graph:
        with v1.variable_scope(v1.get_variable_scope(), initializer=v1.constant_initializer(0.3)):
            stack(tf.zeros([2, 3, DIM]), *[tf.zeros([2, UNITS * num_layers])] * 2,
                  num_units=UNITS, num_layers=num_layers)
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            values = {v.op.name: (v.shape.as_list(), session.run(v).tolist())
                      for v in v1.global_variables()}
        assert {v.op.name for v in v1.trainable_variables()} == set(values)
    with tf.Graph().as_default() as graph:
        stack(tf.zeros([2, 3, DIM]), *[tf.zeros([2, UNITS * num_layers])] * 2,
              num_units=UNITS, num_layers=num_layers)
        initializers = {v.op.name: sorted(op.type for op in graph.get_operations()
                                          if op.name.startswith(v.op.name + "/Initializer/"))
                        for v in v1.global_variables()}
    return values, initializers


@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.slow
def test_stack_variables_are_basic_lstm_cells(num_layers):
    """Same names, shapes and initializers: the kernel the scope's (glorot uniform by
    default), the bias zeros."""
    values, initializers = _variables(_lstm_stack.run, num_layers)
    assert (values, initializers) == _variables(_dynamic_rnn_stack, num_layers)
    scope = _lstm_stack.cell_scopes(num_layers)[-1]
    assert values[f"{scope}/kernel"][0] == [2 * UNITS if num_layers > 1 else DIM + UNITS,
                                            4 * UNITS]
    np.testing.assert_allclose(values[f"{scope}/kernel"][1], 0.3)
    np.testing.assert_array_equal(values[f"{scope}/bias"][1], 0.0)
    assert any("RandomUniform" in op_type for op_type in initializers[f"{scope}/kernel"])


def _forward_only(*args, **kwargs):
    return _lstm_stack.run(*args, needs_gradient=False, **kwargs)


@pytest.mark.parametrize("lengths", [None, [6, 2, 0, 9]])
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.slow
def test_forward_only_stack_matches_dynamic_rnn(num_layers, lengths):
    """The loop that EVAL, PREDICT and export run: outputs and final state as
    dynamic_rnn's (the gradients are TensorFlow's own, through the plain loop)."""
    kwargs = dict(num_layers=num_layers, time=6, lengths=lengths)
    expected = _evaluate(_dynamic_rnn_stack, **kwargs)
    actual = _evaluate(_forward_only, **kwargs)
    for name, a, e in zip(["outputs", "final c", "final h"], actual, expected):
        np.testing.assert_allclose(a, e, atol=1e-5, err_msg=name)


def test_forward_only_stack_saves_no_activations():
    """Training saves six TensorArrays of activations per layer; the forward-only loop
    writes only its outputs."""
    def arrays(stack):
        with tf.Graph().as_default() as graph:
            stack(tf.zeros([2, 3, DIM]), *[tf.zeros([2, UNITS])] * 2, num_units=UNITS,
                  num_layers=1)
            return sum(op.type in ("TensorListReserve", "TensorArrayV3")
                       for op in graph.get_operations())

    assert (arrays(_lstm_stack.run), arrays(_forward_only)) == (7, 1)


def _differentiated_stack_graph():
    """A weak reference to a graph in which the stack was built and differentiated."""
    with tf.Graph().as_default() as graph:
        x = tf.zeros([2, 3, DIM])
        outputs, _, _ = _lstm_stack.run(x, *[tf.zeros([2, 2 * UNITS])] * 2,
                                        num_units=UNITS, num_layers=2)
        tf.gradients(outputs, [x] + v1.trainable_variables())
    return weakref.ref(graph)


@pytest.mark.slow
def test_stack_gradient_keeps_no_graph_alive():
    """The backward pass is registered once, by name: building and differentiating the
    stack in a graph leaves nothing process-wide that holds the graph."""
    registered = len(ops.gradient_registry.list())
    graph = _differentiated_stack_graph()
    gc.collect()
    assert graph() is None
    assert len(ops.gradient_registry.list()) == registered
