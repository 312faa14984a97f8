"""Time series: stateful streams stay contiguous per replica; sliding windows shard."""
import numpy as np
import pytest
import tensorflow as tf

import estimator_dist
import input_fns
from tests.input_fns.util import assert_disjoint_cover, context

WINDOW = 3
STEPS = 4


def _series(num_streams):
    # Value == time index, so a window says where it starts.
    return np.arange(num_streams * STEPS * WINDOW + 1, dtype=np.float32)


def _elements(input_fn, input_context=None):
    return [(f["x"].numpy(), f["stream"].numpy(), f["reset"].numpy(), labels.numpy())
            for f, labels in input_fn(input_context)]


def _start(stream, step):
    return (stream * STEPS + step) * WINDOW


@pytest.mark.parametrize("num_pipelines, num_replicas", [(1, 1), (1, 2), (1, 4), (2, 2),
                                                         (2, 4), (4, 4)])
def test_streams_stay_with_their_replica_in_order_across_steps(num_pipelines, num_replicas):
    num_streams = 8
    input_fn = input_fns.time_series_streams(_series(num_streams), num_streams=num_streams,
                                             window=WINDOW, num_epochs=1)
    local = num_replicas // num_pipelines
    per_replica = num_streams // num_replicas
    for pipeline in range(num_pipelines):
        elements = _elements(input_fn, context(num_pipelines, pipeline, num_replicas))
        assert len(elements) == STEPS * local
        for position, (x, stream, reset, _) in enumerate(elements):
            step, replica = divmod(position, local)
            first = (pipeline * local + replica) * per_replica
            assert stream.tolist() == list(range(first, first + per_replica))
            assert x[:, 0, 0].tolist() == [_start(s, step) for s in stream]
            assert reset.tolist() == [step == 0] * per_replica


def test_streams_global_batch_holds_every_stream_in_order():
    input_fn = input_fns.time_series_streams(_series(4), num_streams=4, window=WINDOW)
    x, stream, _, _ = _elements(lambda ctx: input_fn(ctx).take(1))[0]
    assert stream.tolist() == [0, 1, 2, 3]
    assert x.shape == (4, WINDOW, 1)
    np.testing.assert_array_equal(x[1, :, 0], [_start(1, 0) + t for t in range(WINDOW)])


def test_streams_labels_are_next_values():
    input_fn = input_fns.time_series_streams(_series(2), num_streams=2, window=WINDOW)
    x, _, _, labels = _elements(lambda ctx: input_fn(ctx).take(1))[0]
    np.testing.assert_array_equal(labels, x + 1)


def test_streams_targets_are_windowed_with_x():
    series = _series(2)
    input_fn = input_fns.time_series_streams(series, num_streams=2, window=WINDOW,
                                             targets=(series * 10).astype(np.int64))
    x, _, _, labels = _elements(lambda ctx: input_fn(ctx).take(1))[0]
    np.testing.assert_array_equal(labels, (x[..., 0] * 10).astype(np.int64))  # [batch, window]


def test_streams_reset_where_a_new_series_starts():
    # Two series of 3 and 5 windows: stream 0 = windows 0-3, so window 3 starts series 2.
    series = [np.arange(3 * WINDOW + 1.0), 100 + np.arange(5 * WINDOW + 1.0)]
    input_fn = input_fns.time_series_streams(series, num_streams=2, window=WINDOW, num_epochs=1)
    resets = np.stack([reset for _, _, reset, _ in _elements(input_fn)])
    assert resets[:, 0].tolist() == [True, False, False, True]
    assert resets[:, 1].tolist() == [True, False, False, False]


def test_streams_reset_again_each_epoch():
    input_fn = input_fns.time_series_streams(_series(2), num_streams=2, window=WINDOW,
                                             num_epochs=2)
    resets = [bool(reset[0]) for _, _, reset, _ in _elements(input_fn)]
    assert resets == ([True] + [False] * (STEPS - 1)) * 2


def test_streams_static_shapes_per_replica():
    input_fn = input_fns.time_series_streams(_series(4), num_streams=4, window=WINDOW)
    features, labels = input_fn(context(1, 0, 2)).element_spec
    assert features["x"].shape.as_list() == [2, WINDOW, 1]
    assert features["stream"].shape.as_list() == [2]
    assert features["reset"].dtype == tf.bool
    assert labels.shape.as_list() == [2, WINDOW, 1]


def test_streams_not_divisible_by_replicas_raises():
    input_fn = input_fns.time_series_streams(_series(3), num_streams=3, window=WINDOW)
    with pytest.raises(ValueError, match=r"num_streams must be divisible by the number of "
                                         r"replicas \(2\)"):
        input_fn(context(1, 0, 2))


def test_streams_too_short_series_raises():
    with pytest.raises(ValueError, match=r"at least num_streams=8 windows.*Received: 4 windows"):
        input_fns.time_series_streams(_series(1), num_streams=8, window=WINDOW)


@pytest.mark.parametrize("num_pipelines", [1, 2, 3, 4])
@pytest.mark.slow
def test_windows_shards_are_disjoint_and_cover_windows(num_pipelines):
    series = np.arange(40, dtype=np.float32)
    input_fn = input_fns.time_series_windows(series, window=4, stride=2, batch_size=12,
                                             num_epochs=1, drop_remainder=False, seed=1)
    parts = [[int(x) for f, _ in input_fn(context(num_pipelines, i)) for x in f["x"][:, 0, 0]]
             for i in range(num_pipelines)]
    assert_disjoint_cover(parts, range(0, 36, 2))


def test_windows_label_is_next_horizon_values():
    series = np.arange(20, dtype=np.float32)
    input_fn = input_fns.time_series_windows(series, window=4, horizon=2, batch_size=3,
                                             shuffle=False)
    features, labels = next(iter(input_fn()))
    assert features["x"].shape == (3, 4, 1)
    assert labels[:, :, 0].numpy().tolist() == [[4, 5], [5, 6], [6, 7]]


def test_windows_never_cross_series():
    series = [np.zeros(6, np.float32), np.ones(6, np.float32)]
    input_fn = input_fns.time_series_windows(series, window=4, batch_size=1, horizon=1,
                                             num_epochs=1, shuffle=False)
    windows = [f["x"].numpy()[0, :, 0].tolist() + labels.numpy()[0, :, 0].tolist()
               for f, labels in input_fn()]
    assert windows == [[0.0] * 5, [0.0] * 5, [1.0] * 5, [1.0] * 5]


def _recording_model_fn(seen):
    def record(replica, stream, start, reset):
        seen.append((int(replica), stream.tolist(), start.tolist(), reset.tolist()))
        return np.int64(0)

    def model_fn(features, labels, mode):
        del labels
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        recorded = tf.compat.v1.py_func(
            record, [replica, features["stream"], features["x"][:, 0, 0], features["reset"]],
            tf.int64)
        weight = tf.compat.v1.get_variable("w", [], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(weight * features["x"])
        with tf.control_dependencies([recorded]):
            train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
                loss, tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    return model_fn


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_streams_under_mirrored_estimator_keep_each_replica_on_its_streams(model_dir):
    seen = []
    config = estimator_dist.make_run_config("mirrored", num_replicas=2, model_dir=model_dir)
    estimator = tf.estimator.Estimator(_recording_model_fn(seen), config=config)
    input_fn = input_fns.time_series_streams(_series(4), num_streams=4, window=WINDOW)
    estimator.train(input_fn, max_steps=STEPS + 1)  # one step into the second epoch
    for replica in (0, 1):
        mine = [entry[1:] for entry in seen if entry[0] == replica]
        streams = [2 * replica, 2 * replica + 1]
        assert len(mine) == STEPS + 1
        for step, (stream, start, reset) in enumerate(mine):
            assert stream == streams
            assert start == [_start(s, step % STEPS) for s in streams]
            assert reset == [step % STEPS == 0] * 2
