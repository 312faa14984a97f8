"""from_arrays: shards, static per-replica batches, determinism, bad arguments."""
import numpy as np
import pytest

import input_fns
from tests.input_fns.util import assert_disjoint_cover, context, labels_seen, shards

ROWS = 40


def _input_fn(**kwargs):
    options = dict(batch_size=12, num_epochs=1, drop_remainder=False, seed=3)
    options.update(kwargs)
    x = np.arange(ROWS * 2, dtype=np.float32).reshape(ROWS, 2)
    return input_fns.from_arrays({"x": x}, np.arange(ROWS), **options)


@pytest.mark.parametrize("num_pipelines", [1, 2, 3, 4])
def test_from_arrays_shards_are_disjoint_and_cover_rows(num_pipelines):
    assert_disjoint_cover(shards(_input_fn(), num_pipelines), range(ROWS))


def test_from_arrays_per_replica_batch_is_static():
    dataset = _input_fn(batch_size=8, num_epochs=None, drop_remainder=True)(context(1, 0, 4))
    features, labels = dataset.element_spec
    assert features["x"].shape.as_list() == [2, 2]
    assert labels.shape.as_list() == [2]


def test_from_arrays_features_stay_with_their_labels():
    for features, labels in _input_fn()(context(2, 1)):
        np.testing.assert_array_equal(features["x"].numpy()[:, 0], 2 * labels.numpy())


def test_from_arrays_same_seed_same_order():
    assert labels_seen(_input_fn(seed=7)) == labels_seen(_input_fn(seed=7))
    assert labels_seen(_input_fn(seed=7)) != labels_seen(_input_fn(seed=8))


def test_from_arrays_more_pipelines_than_rows_raises():
    input_fn = input_fns.from_arrays(np.zeros((2, 1)), np.zeros(2), batch_size=1)
    with pytest.raises(ValueError, match="input pipeline 2 of 3 has no data: 2 rows"):
        input_fn(context(3, 2))


def test_from_arrays_batch_size_zero_raises():
    with pytest.raises(ValueError, match=r"batch_size must be a positive int. "
                                         r"Received: batch_size=0"):
        input_fns.from_arrays(np.zeros((2, 1)), batch_size=0)


def test_from_arrays_ragged_row_counts_raise():
    with pytest.raises(ValueError, match=r"same number of rows. Received: row counts \[2, 3\]"):
        input_fns.from_arrays(np.zeros((3, 1)), np.zeros(2), batch_size=1)


def test_from_arrays_batch_not_divisible_by_replicas_raises():
    """The fact docs/input.md states: TensorFlow refuses a global batch that does not
    split evenly over the replicas."""
    input_fn = input_fns.from_arrays(np.zeros((40, 2), np.float32), batch_size=10)
    with pytest.raises(ValueError, match=r"not divisible by `num_replicas_in_sync` 4"):
        input_fn(input_context=context(1, 0, 4))
