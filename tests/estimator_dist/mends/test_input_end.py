"""Finite input on workers: every worker stops after the same step (``input_end``)."""
import re
import sys

import pytest
import tensorflow as tf

from estimator_dist import mends
from estimator_dist.mends import input_end
from tests.support import HANG_MARGIN_SECONDS, WatchedPython


def _elements(dataset):
    return [tf.nest.map_structure(lambda t: t.numpy(), e, expand_composites=True)
            for e in dataset]


def test_flagged_infinite_dataset_left_alone():
    assert input_end.flagged(tf.data.Dataset.range(3).repeat()) is None


def test_flagged_non_dataset_left_alone():
    assert input_end.flagged((tf.constant([1.0]), tf.constant([0]))) is None


@pytest.mark.parametrize("counted", [True, False], ids=["known_cardinality", "read_ahead"])
def test_flagged_marks_last_element_then_pads(counted):
    dataset = tf.data.Dataset.range(5)
    if not counted:  # A filter hides the cardinality: the flags come from reading ahead.
        dataset = dataset.filter(lambda x: x < 3)
    else:
        dataset = dataset.take(3)
    elements = _elements(input_end.flagged(dataset.batch(2)).take(4))
    flags = [(bool(has), bool(more)) for _, has, more in elements]
    assert flags == [(True, True), (True, False), (False, False), (False, False)]
    assert [e[0].tolist() for e in elements] == [[0, 1], [2], [], []]


def test_flagged_pads_sparse_and_string_features():
    sparse = tf.sparse.from_dense(tf.constant([[1, 0], [0, 2]]))
    dataset = tf.data.Dataset.from_tensor_slices(
        ({"ids": sparse, "word": tf.constant(["a", "b"])}, tf.constant([0, 1]))).batch(2)
    padding = next(iter(input_end.flagged(dataset).skip(1)))
    (features, label), has_data, _ = padding
    assert not has_data and label.shape == (0,)
    assert features["word"].shape == (0,) and features["ids"].values.shape == (0,)


def test_applied_strategy_flags_its_finite_input_iterators():
    """``mends.apply`` is all a builder calls: the strategy it is applied to then makes an
    iterator whose input ends together of a finite input, and TensorFlow's own of an
    infinite one."""
    with tf.Graph().as_default():
        strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
        assert mends.apply("input_end", strategy)
        finite = strategy.make_input_fn_iterator(lambda _: tf.data.Dataset.range(3).batch(1))
        endless = strategy.make_input_fn_iterator(lambda _: tf.data.Dataset.range(3).repeat())
    assert isinstance(finite, input_end.EndTogetherIterator)
    assert not isinstance(endless, input_end.EndTogetherIterator)


def test_stop_unless_all_raises_stop_iteration_as_out_of_range():
    """The TF fact the end of input relies on: a py_func raising StopIteration fails its
    Session.run with OutOfRangeError, which a monitored session takes as the end."""
    with tf.Graph().as_default():
        stop = tf.compat.v1.py_func(input_end._stop_unless_all, [1.0, 2.0], tf.bool)
        with tf.compat.v1.Session() as session, pytest.raises(tf.errors.OutOfRangeError):
            session.run(stop)


_PLAIN_UNEVEN = """
import estimator_dist  # tf.estimator on TF 2.16+ (no other mend without make_run_config)
import numpy as np, tensorflow as tf
strategy = tf.distribute.MultiWorkerMirroredStrategy()
index = strategy.cluster_resolver.task_id
config = tf.estimator.RunConfig(model_dir={model_dir!r}, train_distribute=strategy)

def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features, 2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

def input_fn(input_context=None):
    rows = 24 if index == 0 else 16  # Uneven shards: 3 batches and 2.
    x, y = np.ones([rows, 3], np.float32), np.zeros([rows], np.int32)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(8)

tf.estimator.train_and_evaluate(tf.estimator.Estimator(model_fn, config=config),
                                tf.estimator.TrainSpec(input_fn),
                                tf.estimator.EvalSpec(input_fn, steps=1))
print("FINISHED", flush=True)
"""


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.timeout(200)
def test_plain_multi_worker_uneven_shards_never_end(model_dir):
    """The failure ``input_end`` mends: with plain TensorFlow the worker with the longer
    shard waits in its next all-reduce for a worker whose input ended; it never ends.

    Shown as: worker 1 finishes, and ``HANG_MARGIN_SECONDS`` later worker 0 has not (its
    steps done as well, it would end within seconds of worker 1)."""
    with WatchedPython(["-m", "estimator_dist.launch", "--workers", "2", "--timeout", "150",
                        "--", sys.executable, "-c",
                        _PLAIN_UNEVEN.format(model_dir=model_dir)]) as cluster:
        assert cluster.wait_for_line(r"^\[worker 1\] FINISHED", 120), cluster.output[-2000:]
        cluster.outlives(HANG_MARGIN_SECONDS)
        code = cluster.process.poll()  # None: still running.
    assert code != 0, cluster.output[-2000:]
    assert not re.search(r"^\[worker 0\] FINISHED", cluster.output, re.M)
