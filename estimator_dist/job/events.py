"""Scalars from the TensorBoard event files an Estimator writes.

Training events sit in the model dir itself, evaluation events in ``MODEL_DIR/eval``.
"""
from __future__ import annotations

import glob
import os
from typing import Any, Iterator

import tensorflow as tf


def _values(event: Any) -> Iterator[tuple[str, float]]:
    for value in event.summary.value:
        if value.HasField("simple_value"):
            yield value.tag, float(value.simple_value)
        elif value.HasField("tensor") and not value.tensor.tensor_shape.dim:
            array = tf.make_ndarray(value.tensor)
            if array.dtype.kind in "fiu":
                yield value.tag, float(array)


def _events(path: str) -> Iterator[Any]:
    """The events of one file; a file still being written may end mid-record."""
    try:
        yield from tf.compat.v1.train.summary_iterator(path)
    except tf.errors.DataLossError:
        return


def scalars(directory: str) -> dict[str, list[tuple[int, float]]]:
    """Scalar summaries of the event files directly in ``directory``.

    Returns:
      tag -> sorted list of (step, value); for a step seen twice the later value wins.
    """
    by_tag: dict[str, dict[int, float]] = {}
    for path in sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*"))):
        for event in _events(path):
            for tag, value in _values(event):
                by_tag.setdefault(tag, {})[int(event.step)] = value
    return {tag: sorted(points.items()) for tag, points in by_tag.items()}


def last_values(directory: str) -> dict[str, float]:
    """Each tag's value at the last step written, plus that step as ``global_step``."""
    found = scalars(directory)
    if not found:
        return {}
    step = max(points[-1][0] for points in found.values())
    values = {tag: points[-1][1] for tag, points in found.items() if points[-1][0] == step}
    values["global_step"] = step
    return values
