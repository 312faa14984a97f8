"""The built-in data the CLI trains on by default: generated here, no download.

Both sets are drawn from a fixed seed, so every run sees the same numbers.
"""
from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Split:
    """Features (a dict with ``x``) and integer class labels."""

    features: dict[str, np.ndarray]
    labels: np.ndarray


def blobs(num_examples: int, *, dim: int = 16, num_classes: int = 3, seed: int = 0) -> Split:
    """Gaussian clusters in ``dim`` dimensions, one per class, that overlap: the best
    possible accuracy is about 0.97."""
    rng = np.random.default_rng(seed)
    centers = np.random.default_rng(1234).normal(0.0, 0.6, (num_classes, dim))
    labels = rng.integers(0, num_classes, num_examples)
    x = centers[labels] + rng.normal(0.0, 1.0, (num_examples, dim))
    return Split({"x": x.astype(np.float32)}, labels.astype(np.int64))


def waves(num_examples: int, *, time_steps: int = 24, num_classes: int = 3, seed: int = 0) -> Split:
    """Noisy sine waves with a random phase; the class is the frequency band."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, num_examples)
    frequency = 0.15 + 0.12 * labels + rng.uniform(-0.03, 0.03, num_examples)
    phase = rng.uniform(0.0, 2 * np.pi, num_examples)
    t = np.arange(time_steps)
    x = np.sin(frequency[:, None] * t[None, :] + phase[:, None])
    x += rng.normal(0.0, 0.3, x.shape)
    return Split({"x": x[:, :, None].astype(np.float32)}, labels.astype(np.int64))
