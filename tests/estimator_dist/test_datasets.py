"""The built-in data: deterministic, shaped as the built-in models read it, learnable."""
import numpy as np
import pytest

from estimator_dist import datasets


@pytest.mark.parametrize("make", [datasets.blobs, datasets.waves])
def test_dataset_same_seed_same_numbers(make):
    first, second = make(64, seed=3), make(64, seed=3)
    np.testing.assert_array_equal(first.features["x"], second.features["x"])
    np.testing.assert_array_equal(first.labels, second.labels)
    assert not np.array_equal(first.features["x"], make(64, seed=4).features["x"])


def test_blobs_shapes_and_classes():
    split = datasets.blobs(100)
    assert split.features["x"].shape == (100, 16) and split.features["x"].dtype == np.float32
    assert set(split.labels) == {0, 1, 2}


def test_blobs_best_accuracy_about_097():
    """The docstring's claim: the nearest-center (Bayes) rule scores about 0.97."""
    split = datasets.blobs(20_000)
    centers = np.stack([split.features["x"][split.labels == k].mean(0) for k in range(3)])
    distances = ((split.features["x"][:, None, :] - centers[None]) ** 2).sum(-1)
    assert 0.95 < (distances.argmin(1) == split.labels).mean() < 0.985


def test_waves_shapes_and_classes():
    split = datasets.waves(100, time_steps=24)
    assert split.features["x"].shape == (100, 24, 1) and split.features["x"].dtype == np.float32
    assert set(split.labels) == {0, 1, 2}
