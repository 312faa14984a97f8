"""Graph-mode ``tf.custom_gradient`` and Estimator's train/evaluate cycles.

Plain TensorFlow keeps every graph built with a ``tf.custom_gradient`` alive through its
gradient registry; under ``make_run_config`` (``estimator_dist.mends.custom_gradient_leak``)
the graphs go, and the gradients stay what they were. The cycles run in processes of
their own (``custom_gradient_probe.py``).
"""
import gc
import re
import weakref

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import ops

import estimator_dist
from estimator_dist.mends import custom_gradient_leak
from tests.support import assert_passes_under_tf1_behaviour

v1 = tf.compat.v1


def _cycles(python_run, model_dir, how, model, cycles, measure, timeout):
    """What the probe printed after each cycle, as one tuple of numbers per cycle."""
    result = python_run(["-m", "tests.estimator_dist.custom_gradient_probe", how, model,
                         str(cycles), measure, model_dir], timeout=timeout)
    lines = [line for line in result.stdout.splitlines() if line.startswith("cycle ")]
    assert len(lines) == cycles, result.stderr[-2000:]
    return [tuple(float(n) for n in re.findall(r"[\d.]+", line)[1:]) for line in lines]


@pytest.mark.slow
def test_tf_custom_gradient_keeps_a_graph_per_estimator_call(python_run, model_dir):
    """Plain TF: each train and evaluate call leaves its graph and registry entry."""
    graphs = _cycles(python_run, model_dir, "plain", "custom_gradient", 6, "graphs", 120)
    assert [registry for _, registry in graphs] == [2, 4, 6, 8, 10, 12]
    assert graphs[-1][0] >= graphs[0][0] + 10


@pytest.mark.slow
@pytest.mark.parametrize("how, model", [("mended", "custom_gradient"), ("plain", "lstm")])
def test_graphs_do_not_accumulate_over_cycles(python_run, model_dir, how, model):
    """The mend for a user's custom_gradient; the package's LSTM kernel, which needs none."""
    graphs = _cycles(python_run, model_dir, how, model, 6, "graphs", 120)
    assert graphs == [(0, 0)] * 6


@pytest.mark.slow
@pytest.mark.parametrize("model", ["custom_gradient", "lstm"])
def test_rss_stays_within_ten_percent_over_40_cycles(python_run, model_dir, model):
    """No collection is forced: the dead graphs (cyclic garbage) wait for Python's
    collector, so RSS saws up and down over about ten cycles (by ~40 MB for the lstm);
    its peak over the last 20 cycles stays within 10 % of that over the first 20 (halves
    that each hold two of the collector's teeth)."""
    rss = [mb for (mb,) in _cycles(python_run, model_dir, "mended", model, 40, "rss", 280)]
    assert max(rss[-20:]) <= 1.1 * max(rss[:20]), rss


@tf.custom_gradient
def _scaled_gradient(x):
    return tf.identity(x), lambda dy: 3.0 * dy


def _gradient_and_graph():
    """The gradient through ``_scaled_gradient`` built in a graph of its own, and a weak
    reference to that graph."""
    with tf.Graph().as_default() as graph:
        x = tf.constant([1.0, 2.0])
        gradient = tf.gradients(tf.reduce_sum(_scaled_gradient(x) ** 2), x)[0]
        with v1.Session() as session:
            value = session.run(gradient)
    return value, weakref.ref(graph)


def test_make_run_config_installs_the_mend():
    estimator_dist.make_run_config("default")
    assert custom_gradient_leak.installed()


@pytest.mark.slow
def test_mended_custom_gradient_gives_its_gradient_and_frees_its_graph():
    custom_gradient_leak.install()
    gc.collect()  # Earlier tests' graphs take their registry entries with them first.
    registered = len(ops.gradient_registry.list())
    value, graph = _gradient_and_graph()
    gc.collect()
    np.testing.assert_allclose(value, [6.0, 12.0])
    assert graph() is None
    assert len(ops.gradient_registry.list()) == registered


@pytest.mark.slow
def test_uninstall_brings_back_tensorflow_registration():
    custom_gradient_leak.uninstall()
    try:
        gc.collect()
        registered = len(ops.gradient_registry.list())
        _, graph = _gradient_and_graph()
        gc.collect()
        assert graph() is not None
        assert len(ops.gradient_registry.list()) == registered + 1
    finally:
        custom_gradient_leak.install()


@pytest.mark.slow
def test_module_under_tf1_behaviour():
    """The mend and the gradients it keeps, with ``disable_v2_behavior()`` first."""
    assert_passes_under_tf1_behaviour(__file__, "-m", "not slow", timeout=240)
