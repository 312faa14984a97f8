"""numpy_input_fn / pandas_input_fn: the tf.estimator.inputs signatures as sharded Datasets."""
import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import input_fns

X = {"a": np.arange(10, dtype=np.float32), "b": np.arange(10, 20, dtype=np.float32)}
Y = np.arange(10, dtype=np.int64) % 3


def _batches(dataset):
    return [tf.nest.map_structure(np.asarray, batch) for batch in dataset]


def _original_batches(input_fn):
    with tf.Graph().as_default():
        features, labels = input_fn()
        with tf.compat.v1.train.MonitoredSession() as session:
            out = []
            while not session.should_stop():
                out.append(session.run((features, labels)))
    return out


def test_numpy_input_fn_one_device_batches_like_original():
    ours = _batches(input_fns.numpy_input_fn(X, Y, batch_size=4, num_epochs=1, shuffle=False)())
    original = _original_batches(tf.compat.v1.estimator.inputs.numpy_input_fn(
        X, Y, batch_size=4, num_epochs=1, shuffle=False))
    assert [len(labels) for _, labels in ours] == [len(labels) for _, labels in original]
    for (features, labels), (want_features, want_labels) in zip(ours, original):
        np.testing.assert_array_equal(labels, want_labels)
        for key in X:
            np.testing.assert_array_equal(features[key], want_features[key])


def test_numpy_input_fn_batch_size_global_under_two_pipelines():
    seen = []
    for index in range(2):
        context = tf.distribute.InputContext(2, index, 2)
        batches = _batches(input_fns.numpy_input_fn(
            X, Y, batch_size=4, num_epochs=1, shuffle=False)(context))
        assert len(batches[0][1]) == 2  # Per-replica half of the global 4.
        seen.extend(v for features, _ in batches for v in features["a"])
    assert sorted(seen) == list(range(10))


def test_numpy_input_fn_shuffle_unset_rejected():
    with pytest.raises(TypeError, match=r"shuffle must be explicitly set as a bool\. "
                                        r"Received: shuffle=None"):
        input_fns.numpy_input_fn(X, Y)


def test_pandas_input_fn_columns_become_features():
    frame = pd.DataFrame(X)
    batches = _batches(input_fns.pandas_input_fn(frame, pd.Series(Y), batch_size=5,
                                                 shuffle=False)())
    assert sorted(batches[0][0]) == ["a", "b"]
    np.testing.assert_array_equal(np.concatenate([labels for _, labels in batches]), Y)


def test_pandas_input_fn_index_mismatch_rejected():
    frame = pd.DataFrame(X)
    with pytest.raises(ValueError, match=r"y's index must match x's index"):
        input_fns.pandas_input_fn(frame, pd.Series(Y, index=np.arange(10) + 1), shuffle=True)


def test_pandas_input_fn_target_column_in_x_rejected():
    frame = pd.DataFrame(dict(X, target=Y))
    with pytest.raises(ValueError, match=r"target_column must not name a column of x\. "
                                         r"Received: target_column='target'"):
        input_fns.pandas_input_fn(frame, pd.Series(Y), shuffle=True)
