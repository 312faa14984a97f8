"""Long time series as input: stateful streams for truncated BPTT, and sliding windows.

A series is an array [time] or [time, dim]; several series are a list of them (each may
have its own length, all the same ``dim``). Targets, when given, are arrays aligned with
the series in time ([time, ...]); without targets the label is the next value of the
series itself (forecasting).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from input_fns import _pipeline, _sharding


def _as_series_list(series: Any, name: str) -> list[np.ndarray]:
    items = [series] if isinstance(series, np.ndarray) or np.ndim(series[0]) == 0 else series
    arrays = [np.asarray(item) for item in items]
    for array in arrays:
        if array.ndim not in (1, 2) or len(array) == 0:
            raise ValueError(f"{name} must be arrays of shape [time] or [time, dim]. "
                             f"Received: shape {array.shape}")
    return [a[:, None] if a.ndim == 1 else a for a in arrays]


def _concatenate(series: Any,
                 targets: Any) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, list[int]]:
    """One array of all series (float32), the label source, and each series' start."""
    values = _as_series_list(series, "series")
    if len({a.shape[1] for a in values}) != 1:
        raise ValueError("series must all have the same dim. Received: dims "
                         f"{sorted({a.shape[1] for a in values})}")
    offsets = np.cumsum([0] + [len(a) for a in values[:-1]])
    data = np.concatenate(values).astype(np.float32)
    if targets is None:
        return data, None, offsets, [len(a) for a in values]
    labels = [np.asarray(t) for t in ([targets] if len(values) == 1 and not isinstance(
        targets, (list, tuple)) else targets)]
    if [len(t) for t in labels] != [len(a) for a in values]:
        raise ValueError("targets must match the series in length. Received: lengths "
                         f"{[len(t) for t in labels]} for series of {[len(a) for a in values]}")
    return data, np.concatenate(labels), offsets, [len(a) for a in values]


def _window_starts(offsets: np.ndarray, lengths: list[int], span: int,
                   stride: int) -> tuple[np.ndarray, np.ndarray]:
    """Start of every window of ``span`` steps that stays inside its series, and whether
    it is its series' first window."""
    starts, first = [], []
    for offset, length in zip(offsets, lengths):
        local = np.arange(0, length - span + 1, stride)
        starts.append(offset + local)
        first.append(local == 0)
    return np.concatenate(starts).astype(np.int64), np.concatenate(first)


def _gather_windows(data: Any, starts: tf.Tensor, window: int, shift: int = 0) -> tf.Tensor:
    """``data[start + shift : start + shift + window]`` for each start: [batch, window, ...]."""
    return tf.gather(data, starts[:, None] + shift + tf.range(window, dtype=tf.int64))


def time_series_streams(series: Any, *, num_streams: int, window: int, targets: Any = None,
                        num_epochs: int | None = None) -> _pipeline.InputFn:
    """Returns an ``input_fn(input_context=None)`` of stateful streams for truncated BPTT.

    The windows of all series, in time order, are cut into ``num_streams`` contiguous
    streams of ``n`` windows each (``n`` = windows // num_streams; the rest is dropped).
    Windows are consecutive (stride = window), so the state at the end of one window is
    the state at the start of the next window of the same stream. Step ``s`` of an epoch
    holds window ``s`` of every stream, in stream order: the global batch is
    ``num_streams``.

    Features: ``x`` float32 [batch, window, dim]; ``stream`` int32 [batch], the stream
    id in [0, num_streams); ``reset`` bool [batch], True where a stream (re)starts — its
    first window in every epoch, and a window that begins a new series — so the model
    starts that row from zero state. Labels: without ``targets`` the next values,
    float32 [batch, window, dim] (``labels[:, t] = series[t + 1]``); with ``targets``
    their windows [batch, window, ...] aligned with ``x``.

    Under a strategy each replica keeps the same streams every step: with R replicas
    over P input pipelines, pipeline p owns streams [p K/P, (p+1) K/P) and yields per
    step one element of K/R consecutive streams per local replica, in replica order,
    which is the order MirroredStrategy hands elements to replicas.

    Args:
      series: one array [time] or [time, dim], or a list of them.
      num_streams: K, the streams (and the global batch); divisible by the replicas.
      window: time steps per window (the truncated-BPTT length).
      targets: per-time-step labels aligned with ``series``, or None for next values.
      num_epochs: passes over the streams; None repeats forever.

    Raises:
      ValueError: a bad argument, too few windows for ``num_streams``, or (when the
        input_fn is called) ``num_streams`` not divisible by the number of replicas.
    """
    _pipeline.check_positive_int("num_streams", num_streams)
    _pipeline.check_positive_int("window", window)
    _pipeline.check_positive_int("num_epochs", num_epochs, allow_none=True)
    data, labels, offsets, lengths = _concatenate(series, targets)
    span = window + (1 if targets is None else 0)
    starts, first = _window_starts(offsets, lengths, span, window)
    steps = len(starts) // num_streams
    if steps == 0:
        raise ValueError(
            f"series must hold at least num_streams={num_streams} windows of {window} steps "
            f"(+1 for the next-value label). Received: {len(starts)} windows")
    order = np.arange(num_streams * steps).reshape(num_streams, steps)
    reset = first[order]
    reset[:, 0] = True

    def input_fn(input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        begin, per_replica, local = _sharding.stream_layout(num_streams, input_context)
        streams = np.arange(begin, begin + per_replica * local).reshape(local, per_replica)
        # Element (step, replica): the windows of that replica's streams at that step.
        windows = order[streams].transpose(2, 0, 1).reshape(-1, per_replica)
        stream_ids = np.broadcast_to(streams, (steps, local, per_replica)).reshape(-1, per_replica)
        resets = reset[streams].transpose(2, 0, 1).reshape(-1, per_replica)
        dataset = tf.data.Dataset.from_tensor_slices(
            (starts[windows], stream_ids.astype(np.int32), resets)).repeat(num_epochs)

        def make(window_starts: tf.Tensor, stream: tf.Tensor,
                 restart: tf.Tensor) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
            features = {"x": _gather_windows(data, window_starts, window), "stream": stream,
                        "reset": restart}
            if labels is None:
                return features, _gather_windows(data, window_starts, window, shift=1)
            return features, _gather_windows(labels, window_starts, window)

        return dataset.map(make).prefetch(tf.data.AUTOTUNE)

    return input_fn


def time_series_windows(series: Any, *, window: int, batch_size: int, stride: int = 1,
                        horizon: int = 1, targets: Any = None, shuffle: bool = True,
                        num_epochs: int | None = None, seed: int | None = None,
                        drop_remainder: bool = True) -> _pipeline.InputFn:
    """Returns an ``input_fn(input_context=None)`` of independent sliding windows.

    The stateless form, for forecasting or classification: every window of ``window``
    steps, ``stride`` apart, that stays inside one series. Features: ``x`` float32
    [batch, window, dim]. Labels: without ``targets`` the next ``horizon`` values,
    float32 [batch, horizon, dim]; with ``targets`` the target at the window's last
    step, [batch, ...]. Windows are sharded over input pipelines, shuffled and batched
    like the rows of ``from_arrays``.

    Raises:
      ValueError: a bad argument, no window fits, or (when the input_fn is called)
        fewer windows than input pipelines.
    """
    for name, value in (("window", window), ("stride", stride), ("horizon", horizon)):
        _pipeline.check_positive_int(name, value)
    _pipeline.check_batching(batch_size, num_epochs)
    data, labels, offsets, lengths = _concatenate(series, targets)
    span = window + (horizon if targets is None else 0)
    starts, _ = _window_starts(offsets, lengths, span, stride)
    if len(starts) == 0:
        raise ValueError(f"series must be longer than window + horizon = {span} steps. "
                         f"Received: lengths {lengths}")

    def make(window_starts: tf.Tensor) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
        x = _gather_windows(data, window_starts, window)
        if labels is None:
            return {"x": x}, _gather_windows(data, window_starts, horizon, shift=window)
        return {"x": x}, tf.gather(labels, window_starts + window - 1)

    def input_fn(input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        _pipeline.check_shard_not_empty(len(starts), input_context, what="windows")
        indices = _pipeline.index_batches(
            len(starts), input_context, batch_size=batch_size, shuffle=shuffle,
            num_epochs=num_epochs, seed=seed, drop_remainder=drop_remainder)
        return indices.map(lambda i: make(tf.gather(starts, i)),
                           num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    return input_fn
